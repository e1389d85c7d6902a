"""The ONNX exports of the examples against what they export (issue 19, item 8).

Builds the example manifests through `quantize` in a temporary project, then runs each
build's float.onnx, qat.onnx and int8.onnx with onnxruntime on the test split (a model
without a dataset: its known-answer inputs) and prints: the float model's largest
difference from the PyTorch network, how many output values of the fake-quant model
differ from the fake-quant network (float32, as QAT trains) and how many of the integer
model differ from the integer reference. Exit status 1 when a fake-quant or integer value
differs or a float difference reaches 1e-5.

    python benchmarks/onnx_exports.py [--keep DIR] [MANIFEST.yaml ...]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from edgebuild.pipeline.validation import Checked

REPO = Path(__file__).resolve().parent.parent


def build(project: Path, manifests: list[Path]) -> None:
    command = [sys.executable, "-m", "edgebuild", "build", "--until", "onnx",
               *map(str, manifests)]
    result = subprocess.run(command, cwd=project, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-3000:]}")


def session_run(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input": x})[0]


def inputs(checked, build_dir: Path) -> np.ndarray:
    from edgebuild.core import arrays
    from edgebuild.model import knownanswer

    data = build_dir / "data" / "data.npz"
    if data.is_file():
        return arrays.load(data)["x_test"]
    known = knownanswer.load(checked)
    assert known is not None
    return known[0]


def float_diff(manifest, build_dir: Path, x: np.ndarray) -> float:
    import torch

    from edgebuild.core import arrays
    from edgebuild.ops.operator import Mode
    from edgebuild.train import network

    net = network.Net(manifest.model.input, manifest.model.layers,
                      Mode("float", clamp=manifest.train.clamp_activations))
    network.load_numpy(net, arrays.load(build_dir / "train" / "float.npz"))
    real = (x / 128.0).astype(np.float32)
    with torch.no_grad():
        expected = net.eval()(torch.as_tensor(real)).numpy()
    return float(np.abs(session_run(build_dir / "onnx" / "float.onnx", real) - expected).max())


def qat_mismatches(manifest, build_dir: Path, x: np.ndarray) -> int:
    import torch

    from edgebuild.core import arrays
    from edgebuild.model import folding, policy
    from edgebuild.ops.operator import Mode
    from edgebuild.targets import numbers
    from edgebuild.train import network

    layers, _ = folding.fold_layers(manifest.model.layers)
    policies = policy.resolve(manifest.qat, layers,
                              numbers.device_numbers(manifest.target.device.value))
    net = network.Net(manifest.model.input, layers,
                      Mode("qat", numbers.training_rounding(manifest), policy=policies))
    network.load_numpy(net, arrays.load(build_dir / "qat" / "folded.npz"))
    real = (x / 128.0).astype(np.float32)
    with torch.no_grad():
        expected = net.eval()(torch.as_tensor(real)).numpy()
    return int(np.sum(session_run(build_dir / "onnx" / "qat.onnx", real) != expected))


def int8_mismatches(manifest, build_dir: Path, x: np.ndarray) -> tuple[int, int]:
    from edgebuild.model import quantized

    model = quantized.load(build_dir / "quantize", manifest)
    expected = quantized.run_batched(model, x).reshape(len(x), -1)
    got = session_run(build_dir / "onnx" / "int8.onnx", x.astype(np.int8))
    return int(np.sum(got != expected)), int(expected.size)


def measure(project: Path, checked: Checked) -> tuple[str, str, str, str, bool]:
    manifest = checked.manifest
    build_dir = project / "build" / checked.name
    x = inputs(checked, build_dir)
    ok = True
    diff = qat = "-"
    if (build_dir / "onnx" / "float.onnx").is_file():
        value = float_diff(manifest, build_dir, x)
        diff, ok = f"{value:.2e}", value < 1e-5
    if (build_dir / "onnx" / "qat.onnx").is_file():
        count = qat_mismatches(manifest, build_dir, x)
        qat, ok = str(count), ok and count == 0
    wrong, total = int8_mismatches(manifest, build_dir, x)
    return f"{len(x)}", diff, qat, f"{wrong} of {total}", ok and wrong == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build in this directory and keep it")
    parser.add_argument("manifests", nargs="*", help="example manifests (default: all)")
    args = parser.parse_args()
    project = Path(args.keep or tempfile.mkdtemp(prefix="edgebuild-onnx-"))
    shutil.copytree(REPO / "manifests", project / "manifests", dirs_exist_ok=True)
    names = [Path(m).name for m in args.manifests] or \
        sorted(p.name for p in (REPO / "manifests").glob("*.yaml"))
    paths = [project / "manifests" / name for name in names]
    build(project, paths)
    print(f"{'manifest':<22} {'samples':>7} {'float max|diff|':>15} {'qat values differ':>17} "
          f"{'int8 values differ':>20}")
    failed = False
    from edgebuild.pipeline import validation

    for checked in (c for path in paths for c in validation.load_all(path)):  # every target
        samples, diff, qat, wrong, ok = measure(project, checked)
        failed |= not ok
        print(f"{checked.name:<22} {samples:>7} {diff:>15} {qat:>17} {wrong:>20}")
    if not args.keep:
        shutil.rmtree(project, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
