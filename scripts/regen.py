"""Every generated file of this repository, remade by one command.

    python scripts/regen.py                  remake all of them
    python scripts/regen.py schemas golden   remake these parts only
    python scripts/regen.py --check          change nothing; exit 1 naming each stale part

The parts, in the order they are made:
  schemas  schemas/manifest.schema.json (what `edgebuild schema` prints) and
           schemas/artifacts/model.v1.schema.json (edgebuild.manifest.schema: the layer
           records of every op); the other artifact schemas are written by hand
  reference  docs/reference/manifest.md (the manifest reference, from the schema) and the
           `check` example of docs/guide/manifest.md (its error names the ops): the
           fast blocks of `docs/generate.py`, in a second
  golden   tests/golden/: the C the golden tests render (`pytest tests/test_golden.py
           --update-golden`)
  docs     README.md's and docs/'s generated blocks and pages (`python docs/generate.py`:
           it runs the commands they show, building the examples first when they are not
           built, which takes minutes)

Adding an op changes the schemas and the reference (a new layer record) and, when it changes a shared C
kernel or template, the golden files: review `git diff` before committing what this wrote.
The tests that find a stale file name this command.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = {
    "schemas/manifest.schema.json": "render",
    "schemas/artifacts/model.v1.schema.json": "render_model_artifact",
}


def schemas(check: bool) -> list[str]:
    """The stale schema files (rewritten unless `check`)."""
    from edgebuild.manifest import schema

    stale = []
    for relative, function in SCHEMAS.items():
        path, text = REPO / relative, getattr(schema, function)()
        if path.read_text() != text:
            stale.append(relative)
            if not check:
                path.write_text(text)
    return stale


def golden(check: bool) -> list[str]:
    """The golden files the golden tests find stale (rewritten first unless `check`)."""
    root = REPO / "tests" / "golden"
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
               "tests/test_golden.py", *([] if check else ["--update-golden"])]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-2000:], sep="\n", file=sys.stderr)
        return ["tests/golden/ (see the test output above)"]
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return sorted(p.relative_to(REPO).as_posix() for p in before.keys() | after.keys()
                  if before.get(p) != after.get(p))


def docs(check: bool, blocks: tuple[str, ...] = ()) -> list[str]:
    """The generated documentation blocks (docs/generate.py says which are stale)."""
    command = [sys.executable, str(REPO / "docs" / "generate.py"), *blocks,
               *(["--check"] if check else [])]
    result = subprocess.run(command, cwd=REPO)
    return [f"the generated {' and '.join(blocks) or 'blocks'} of README.md and docs/"] \
        if result.returncode != 0 else []


def reference(check: bool) -> list[str]:
    return docs(check, ("reference", "check"))


PARTS: dict[str, Callable[[bool], list[str]]] = {
    "schemas": schemas, "reference": reference, "golden": golden, "docs": docs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", metavar="PART",
                        help=f"what to remake ({', '.join(PARTS)}; default: all)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a part is stale")
    args = parser.parse_args(argv)
    unknown = [name for name in args.parts if name not in PARTS]
    if unknown:
        parser.error(f"no part {', '.join(unknown)} (parts: {', '.join(PARTS)})")
    stale = []
    for name in args.parts or list(PARTS):
        found = PARTS[name](args.check)
        stale += found
        verb = "stale" if args.check else "remade"
        print(f"{name}: {verb}: {', '.join(found)}" if found else f"{name}: current")
    if args.check and stale:
        print("run `python scripts/regen.py` and review the diff", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
