"""The command outputs README.md shows, produced by running the commands, never typed.

    python docs/generate.py            rewrite README.md's generated blocks
    python docs/generate.py --check    exit 1 (and say which) where README.md differs

A generated block is the fenced block after a `<!-- generated: NAME -->` line:
  summary  the table a build of `manifests/` ends with: `edgebuild` run in this repository
           (it builds the examples first if they are not built; a no-op prints the table)
  check    `edgebuild check` on a manifest with three mistakes (the manifest is shown too)
  status   the quick start's `edgebuild status` after changing train.epochs (a digits
           project from `edgebuild init`, built once)
  locked   `edgebuild build --locked` after an edit the lock does not hold (the digits
           example, restored from the examples' cache)

The tests compare each block with a fresh run (tests/test_examples.py: summary, locked;
test_quickstart.py: status; test_readme.py: check), so the README cannot drift from what the tool prints. A build's `time`
cells are the one thing a rerun may change; `comparable` masks them in both.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n+```text\n)(.*?)(```)", re.S)

# `check` finds every mistake at once: three here, one per kind (a value, a name, a key)
BAD_MANIFEST = """\
name: digits
dataset: {format: sklearn-digits}
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu6}
    - {name: fc, op: lineer, out: 10, flatten: true}
train: {epoch: 30}
target: {device: cortex-m4, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""
QUICK_START_EDIT = ("epochs: 20", "epochs: 3")  # the quick start's "change train.epochs"


def edgebuild(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    script = shutil.which("edgebuild")
    command = [script] if script else [sys.executable, "-m", "edgebuild"]
    env = {k: v for k, v in os.environ.items() if k != "EDGEBUILD_CACHE"}
    result = subprocess.run(command + args, cwd=cwd, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=3600)
    if check and result.returncode != 0:
        raise RuntimeError(f"edgebuild {' '.join(args)} in {cwd}: exit {result.returncode}\n"
                           f"{result.stderr[-3000:]}")
    return result


def summary_of(stderr: str) -> str:
    """The table a build ends with: its lines from the header on."""
    start = re.search(r"^manifest +stages +time", stderr, re.M)
    if start is None:
        raise RuntimeError(f"no summary table in:\n{stderr[-2000:]}")
    return "$ edgebuild\n" + stderr[start.start():]


def summary(scratch: Path) -> str:
    del scratch  # the examples build where the README says they build: in this repository
    return summary_of(edgebuild(["build"], REPO).stderr)


def check(scratch: Path) -> str:
    (scratch / "edgebuild.yaml").write_text(BAD_MANIFEST)
    result = edgebuild(["check"], scratch, check=False)
    assert result.returncode == 2, result.stderr
    return ("$ cat edgebuild.yaml\n" + BAD_MANIFEST + "$ edgebuild check\n" + result.stderr
            + f"$ echo $?\n{result.returncode}\n")


def status_of(stdout: str) -> str:
    return "$ edgebuild status\n" + stdout


def status(scratch: Path) -> str:
    project = scratch / "kws"
    edgebuild(["init", str(project), "--no-git"], scratch)
    edgebuild(["build"], project)
    manifest = project / "edgebuild.yaml"
    text = manifest.read_text()
    assert QUICK_START_EDIT[0] in text, "edgebuild init's manifest changed: update the edit"
    manifest.write_text(text.replace(*QUICK_START_EDIT, 1))
    return status_of(edgebuild(["status"], project).stdout)


def locked(scratch: Path) -> str:
    """CI's `--locked` after an edit nobody relocked: digits, restored from the examples'
    cache (their build must exist), then train.epochs changed."""
    (scratch / "manifests").mkdir()
    manifest = scratch / "manifests" / "digits.yaml"
    shutil.copy(REPO / "manifests" / "digits.yaml", manifest)
    cache = ["--cache-dir", str(REPO / "cache")]
    edgebuild(["build", *cache], scratch)
    text = manifest.read_text()
    assert "epochs: 30" in text, "manifests/digits.yaml changed: update the edit"
    manifest.write_text(text.replace("epochs: 30", "epochs: 20", 1))
    result = edgebuild(["build", "--locked", *cache], scratch, check=False)
    assert result.returncode == 1, result.stderr
    return ("$ edgebuild build --locked    # after train.epochs: 30 -> 20, not relocked\n"
            + result.stderr + f"$ echo $?\n{result.returncode}\n")


GENERATORS: dict[str, Callable[[Path], str]] = {"summary": summary, "check": check,
                                                "status": status, "locked": locked}


def blocks(text: str) -> dict[str, str]:
    """{name: content} of README's generated blocks."""
    return {m.group(2): m.group(3) for m in BLOCK.finditer(text)}


def comparable(block: str) -> str:
    """`block` with a build's time cells masked: the one part of an output a rerun moves."""
    return re.sub(r"(?<=\s)\d+\.\ds(?=\s)", "#.#s", block)


def rewrite(text: str, fresh: dict[str, str]) -> str:
    return BLOCK.sub(lambda m: m.group(1) + fresh.get(m.group(2), m.group(3)) + m.group(4),
                     text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare, exit 1 on drift")
    parser.add_argument("names", nargs="*", help=f"blocks to make (default: all of "
                        f"{', '.join(GENERATORS)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(GENERATORS))
    if unknown:
        parser.error(f"no generated block {unknown}; there are {', '.join(GENERATORS)}")
    text = README.read_text()
    found = blocks(text)
    missing = sorted(set(GENERATORS) - set(found))
    if missing:
        print(f"README.md has no generated block {missing}", file=sys.stderr)
        return 1
    fresh: dict[str, str] = {}
    for name in args.names or GENERATORS:
        with tempfile.TemporaryDirectory() as scratch:
            fresh[name] = GENERATORS[name](Path(scratch))
    drifted = [name for name, block in fresh.items()
               if comparable(block) != comparable(found[name])]
    if args.check:
        for name in drifted:
            print(f"README.md's {name} block differs from what the tool prints now",
                  file=sys.stderr)
        return 1 if drifted else 0
    README.write_text(rewrite(text, fresh))
    print(f"README.md: {len(fresh)} block(s) made, {len(drifted)} changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
