"""Training throughput: edgebuild's training loop vs a plain PyTorch loop (issues 3, 29).

Same model (the digits example, or with --model kws a keyword-spotting CNN of 2,100 clips
of 49x10 with batchnorm: conv 3x3, depthwise 3x3, pointwise, global average, linear;
including the hardware clamp, expressed as an nn.Sequential for the plain loop), same
data, optimizer, batch size, thread count and seed. Reports samples/second of each over
several epochs (best of --repeats) and the ratio; exit status 1 below the target (0.9 for
digits, 0.8 for kws: issue 29).

    python benchmarks/train_throughput.py [--model digits|kws] [--epochs 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent


def clamp() -> nn.Module:
    """The hardware clamp edgebuild trains with: Q7 range [-1, 127/128]."""
    return nn.Hardtanh(-1.0, 127 / 128)


def plain_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), clamp(),
        nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), clamp(),
        nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), clamp(),
        nn.Flatten(), nn.Linear(32 * 2 * 2, 10))


KWS_LAYERS = """\
    - {name: conv1, op: conv2d, out: 32, kernel: 3, pad: 1}
    - {name: bn1, op: batchnorm, act: relu}
    - {name: dw, op: conv2d, out: 32, groups: 32, kernel: 3, pad: 1}
    - {name: bn2, op: batchnorm, act: relu}
    - {name: pw, op: conv2d, out: 64, kernel: 1}
    - {name: bn3, op: batchnorm, act: relu}
    - {name: gap, op: pool2d, mode: avg, size: [49, 10]}
    - {name: fc, op: linear, out: 12, flatten: true, wide: true}
"""


def plain_kws() -> nn.Module:
    """KWS_LAYERS as the plain loop writes them: batchnorm (then ReLU and the clamp) after
    each convolution, as edgebuild trains a layer a batchnorm folds into."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), clamp(),
        nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.BatchNorm2d(32), nn.ReLU(), clamp(),
        nn.Conv2d(32, 64, 1), nn.BatchNorm2d(64), nn.ReLU(), clamp(),
        nn.AvgPool2d((49, 10)), nn.Flatten(), nn.Linear(64, 12))


def kws_manifest():
    """The KWS model as a checked manifest (random data: throughput depends on shapes)."""
    import tempfile

    from edgebuild.pipeline import validation

    folder = Path(tempfile.mkdtemp(prefix="edgebuild-kws-"))
    np.savez(folder / "d.npz", x=np.zeros((24, 1, 49, 10), np.float32), y=np.arange(24) % 12)
    (folder / "kws.yaml").write_text(
        "name: kws\ndataset: {format: npz, path: d.npz}\nmodel:\n  input: [1, 49, 10]\n"
        f"  layers:\n{KWS_LAYERS}train: {{batch: 64, optimizer: {{adam: {{lr: 0.003}}}}}}\n"
        "target: {device: cortex-m4, memory: {l1: 16KiB, l2: 512KiB, flash: 1MiB}}\n")
    return validation.load(folder / "kws.yaml").manifest


def plain_epoch(net, x, y, opt, batch, generator):
    net.train()
    order = torch.randperm(len(y), generator=generator)
    for start in range(0, len(order), batch):
        index = order[start:start + batch]
        loss = F.cross_entropy(net(x[index]), y[index])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def timed(run_epochs) -> float:
    start = time.perf_counter()
    run_epochs()
    return time.perf_counter() - start


def main() -> int:
    from edgebuild.core.numerics import np_quantize_inputs as quantize
    from edgebuild.ops.operator import Mode
    from edgebuild.pipeline import validation
    from edgebuild.train import loop as training
    from edgebuild.train import network

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", choices=("digits", "kws"), default="digits")
    args = parser.parse_args()
    kws = args.model == "kws"
    manifest = kws_manifest() if kws else validation.load(
        REPO / "manifests" / "digits.yaml").manifest
    rng = np.random.default_rng(0)
    shape, count, classes = ((1, 49, 10), 2100, 12) if kws else ((1, 8, 8), 1300, 10)
    x_int = quantize(rng.uniform(-1, 1, size=(count, *shape)))
    data = training.Split(torch.as_tensor(x_int / 128.0, dtype=torch.float32),
                          torch.as_tensor(rng.integers(0, classes, count)))
    batch = manifest.train.batch
    samples = args.epochs * len(data.y)

    def ours():
        training.deterministic(1)
        net = network.Net(manifest.model.input, manifest.model.layers, Mode("float"))
        opt = training.make_optimizer(net.parameters(), manifest.train.optimizer)
        for epoch in range(args.epochs):
            training._epoch(net, data, opt, batch, torch.Generator().manual_seed(epoch), "bench")

    def plain():
        training.deterministic(1)
        net = plain_kws() if kws else plain_model()
        opt = torch.optim.Adam(net.parameters(), lr=0.003, fused=True)  # as edgebuild's
        for epoch in range(args.epochs):
            plain_epoch(net, data.x, data.y, opt, batch, torch.Generator().manual_seed(epoch))

    best_ours = min(timed(ours) for _ in range(args.repeats))
    best_plain = min(timed(plain) for _ in range(args.repeats))
    ratio = best_plain / best_ours
    print(f"edgebuild loop: {samples / best_ours:10.0f} samples/s")
    print(f"plain PyTorch:  {samples / best_plain:10.0f} samples/s")
    target = 0.80 if kws else 0.90
    print(f"edgebuild throughput / plain = {ratio:.3f} (target >= {target:.2f})")
    return 0 if ratio >= target else 1


if __name__ == "__main__":
    sys.exit(main())
