"""Do the torch stages give the same bytes on another x86-64 CPU?  Builds them (and `plan`,
which `ondevice` reads) twice: natively and under qemu-user emulating another processor
(`qemu-x86_64 -cpu EPYC-Rome`: another vendor, other caches, other instruction sets), and
compares every output file.

    python benchmarks/cross_cpu.py [--cpu EPYC-Rome] [--epochs 1] [MANIFEST ...]

Needs Debian's `qemu-user`. Emulation is ~25x slower than the host, so by default every
`epochs` in the examples is cut to 1 (`--epochs 0` keeps them): one epoch runs every
operator and optimizer step the full training runs. Exit 1 on the first stage whose bytes
differ, naming its files; exit 0 with one line per stage otherwise.

Why: edgebuild.lock promises a stage's output bytes for its key on any x86-64 machine
(edgebuild/build/kernels.py pins torch's kernels to the baseline). A lock written on an AMD EPYC
failed on an Intel Xeon because torch.optim.Adam's sqrt went through MKL's vector math,
which rounds by CPU; this script found it (train/loop.py now takes the fused Adam).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ("validate", "data", "train", "qat", "quantize", "evaluate", "plan", "ondevice")


def build(manifest: Path, out: Path) -> dict[str, dict[str, str]]:
    """Realize the torch stages of `manifest` in this process; {stage: {file: sha256}}."""
    from edgebuild.build import kernels

    kernels.pin()
    from edgebuild.build import builder
    from edgebuild.pipeline import validation
    from edgebuild.pipeline.stages import STAGES as ALL

    checked = validation.load_all(manifest)[0]
    digests: dict[str, dict[str, str]] = {}
    for stage in STAGES:
        if not ALL[stage].applies(checked):  # no dataset, or imported integer weights
            digests[stage] = {}
            continue
        builder.realize(checked, stage, out / "build", out / "cache")
        folder = out / "build" / stage
        digests[stage] = {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
                          for f in sorted(folder.rglob("*")) if f.is_file()}
    return digests


def shortened(manifest: Path, epochs: int, into: Path) -> Path:
    """A copy of `manifest` (with the files beside it) whose every `epochs:` is `epochs`."""
    copy = into / manifest.name
    text = manifest.read_text()
    if epochs:
        text = re.sub(r"\bepochs: *\d+", f"epochs: {epochs}", text)
    copy.write_text(text)
    for sibling in manifest.parent.iterdir():
        if sibling.is_dir() and not (into / sibling.name).exists():
            os.symlink(sibling, into / sibling.name)
    return copy


def run(manifest: Path, out: Path, emulate: str | None) -> dict[str, dict[str, str]]:
    """`build` in a child: natively, or under qemu-x86_64 -cpu `emulate`."""
    python = os.path.realpath(sys.executable)
    prefix = ["qemu-x86_64", "-cpu", emulate] if emulate else []
    import site

    path = os.pathsep.join([str(REPO), *site.getsitepackages()])
    code = ("import json, sys; sys.path[:0] = sys.argv[3].split(':'); "
            "from cross_cpu import build; from pathlib import Path; "
            "print(json.dumps(build(Path(sys.argv[1]), Path(sys.argv[2]))))")
    result = subprocess.run([*prefix, python, "-c", code, str(manifest), str(out), path],
                            capture_output=True, text=True, cwd=Path(__file__).parent,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})
    if result.returncode != 0:
        sys.exit(f"{manifest.name} ({emulate or 'native'}) failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifests", nargs="*", type=Path)
    parser.add_argument("--cpu", default="EPYC-Rome", help="qemu-x86_64 -cpu model")
    parser.add_argument("--epochs", type=int, default=1, help="0 keeps the manifests' epochs")
    args = parser.parse_args()
    if shutil.which("qemu-x86_64") is None:
        sys.exit("qemu-x86_64 not found: apt-get install qemu-user")
    manifests = args.manifests or sorted((REPO / "manifests").glob("*.yaml"))
    differ = 0
    for manifest in manifests:
        with tempfile.TemporaryDirectory() as tmp:
            copy = shortened(manifest.resolve(), args.epochs, Path(tmp))
            native = run(copy, Path(tmp) / "native", None)
            emulated = run(copy, Path(tmp) / "emulated", args.cpu)
        for stage in STAGES:
            bad = sorted(f for f in set(native[stage]) | set(emulated[stage])
                         if native[stage].get(f) != emulated[stage].get(f))
            print(f"{manifest.stem:18s} {stage:9s} {'differs: ' + ', '.join(bad) if bad else 'same'}",
                  flush=True)
            differ += bool(bad)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
