"""Prove a refactor changes nothing: build every example on two versions of edgebuild and
compare what came out, byte for byte.

    python benchmarks/compare_builds.py [--base REV] [--head REV] [MANIFEST ...]

`--moved OLD=NEW` names a file the change relocates (paths under build/<name>/): it is
compared at its two places, and the stages it leaves or enters are compared file by file
instead of by output digest. `--base` defaults to `HEAD~1`; `--head` defaults to the working tree (tracked and untracked,
not ignored, files as they are now). Each side is checked out into a temporary directory
and built there with a cold cache by *its own* edgebuild source (the installed edgebuild,
editable or not, is kept out of the way), sequentially, one job. Then, per manifest and
stage, the output digests (a hash of every file of the stage's artifact, see
edgebuild/build/cache.py) are compared, and every file under build/<name>/ (except the build's
private bookkeeping: `.state/`) is compared byte for byte. Differences are listed per file;
a JSON file that differs is also shown as the paths of the values that differ.

Exit status: 0 identical, 1 something differs or a build failed. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Runs `edgebuild` from the checked-out tree given as argv[1], never from the installed one:
# an editable install registers a finder that would map `edgebuild` back to this checkout.
BOOTSTRAP = """\
import sys
tree = sys.argv.pop(1)
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, tree)
import edgebuild
from edgebuild.cli import main
if not edgebuild.__file__.startswith(tree):
    sys.exit(f"edgebuild imported from {edgebuild.__file__}, not from {tree}")
sys.exit(main(sys.argv[1:]))
"""
PRIVATE = (".state",)


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def checkout(rev: str | None, into: Path) -> str:
    """A copy of `rev` (None: the working tree) at `into`; returns a label for it."""
    if rev is None:
        files = git("ls-files", "-co", "--exclude-standard", "-z").split("\0")
        for name in filter(None, files):
            source = REPO / name
            if source.is_file():
                target = into / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        return "working tree"
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return git("rev-parse", "--short", rev).strip()


def build(tree: Path, manifests: list[str]) -> dict:
    """Build in `tree` with its own cache; the `--json` outcome per manifest and stage."""
    env = {**os.environ, "EDGEBUILD_CACHE": str(tree / "cache")}
    env.pop("PYTHONPATH", None)
    command = [sys.executable, "-c", BOOTSTRAP, str(tree), "build", "--json", *manifests]
    result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL)
    (tree / "build.log").write_text(result.stderr)
    if result.returncode != 0:
        print(f"build in {tree} failed (exit {result.returncode}); last lines:\n"
              + "\n".join(result.stderr.splitlines()[-20:]), file=sys.stderr)
    try:
        return json.loads(result.stdout)["manifests"]
    except (ValueError, KeyError):
        return {}


def files_of(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*"))
            if path.is_file() and not any(part in PRIVATE for part in path.relative_to(root).parts)}


def json_paths(a, b, where: str = "") -> list[str]:
    """The paths at which two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for key in sorted(set(a) | set(b))
                for p in json_paths(a.get(key), b.get(key), f"{where}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True))
                for p in json_paths(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where or '.'}: {json.dumps(a)[:60]} -> {json.dumps(b)[:60]}"]


def compare_tree(name: str, old: Path, new: Path, moved: dict[str, str]) -> list[str]:
    before, after = files_of(old), files_of(new)
    found = []
    for was, now in moved.items():  # a file the change relocated: same bytes, new place
        if was in before and now in after:
            if before.pop(was).read_bytes() != after.pop(now).read_bytes():
                found.append(f"{name}/{was} -> {now}: moved and differs")
    found += [f"{name}/{p}: only in base" for p in sorted(set(before) - set(after))]
    found += [f"{name}/{p}: only in head" for p in sorted(set(after) - set(before))]
    for path in sorted(set(before) & set(after)):
        a, b = before[path].read_bytes(), after[path].read_bytes()
        if a == b:
            continue
        found.append(f"{name}/{path}: differs")
        if path.endswith(".json"):
            found += [f"    {p}" for p in json_paths(json.loads(a), json.loads(b))[:20]]
    return found


def compare(base: dict, head: dict, old: Path, new: Path, moved: dict[str, str]) -> list[str]:
    """Per manifest: the stages' output digests (but of stages a moved file leaves or
    enters: their files are compared one by one) and every file."""
    relocated = {path.split("/")[0] for pair in moved.items() for path in pair}
    found = []
    for name in sorted(set(base) | set(head)):
        stages_a, stages_b = base.get(name, {}), head.get(name, {})
        for stage in sorted(set(stages_a) | set(stages_b)):
            a, b = stages_a.get(stage, {}), stages_b.get(stage, {})
            if a.get("digest") != b.get("digest") and stage not in relocated:
                found.append(f"{name}.{stage}: output digest {str(a.get('digest'))[:12]} -> "
                             f"{str(b.get('digest'))[:12]}")
        found += compare_tree(name, old / "build" / name, new / "build" / name, moved)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD~1", help="git revision (default HEAD~1)")
    parser.add_argument("--head", default=None, help="git revision (default: working tree)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="build under this directory and keep it (default: a temp dir)")
    parser.add_argument("--moved", action="append", default=[], metavar="OLD=NEW",
                        help="a file the change relocates, relative to build/<name>/ (e.g. "
                             "train/float.onnx=onnx/float.onnx): compared at its two places")
    parser.add_argument("manifests", nargs="*", help="manifest paths (default: all examples)")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="eb-compare-"))
    try:
        sides = {}
        for side, rev in (("base", args.base), ("head", args.head)):
            tree = work / side
            label = checkout(rev, tree)
            print(f"{side}: {label}: building in {tree} ...", file=sys.stderr, flush=True)
            sides[side] = (tree, build(tree, args.manifests))
        (old, base), (new, head) = sides["base"], sides["head"]
        if not base or not head:
            print("a build produced no result; nothing compared", file=sys.stderr)
            return 1
        moved = dict(pair.split("=", 1) for pair in args.moved)
        found = compare(base, head, old, new, moved)
        stages = sum(len(s) for s in head.values())
        if found:
            print("\n".join(found))
            print(f"DIFFERENT: {len(found)} difference(s) in {len(head)} manifests")
            return 1
        print(f"IDENTICAL: {len(head)} manifests, {stages} stages, every output digest and "
              f"every file under build/*/ equal")
        return 0
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
