"""Training throughput: edgebuild's training loop vs a plain PyTorch loop (issue 3).

Same model (the digits example, including the hardware clamp, expressed as an
nn.Sequential for the plain loop), same data, optimizer, batch size, thread count and
seed. Reports samples/second of each over several epochs (best of --repeats) and the ratio;
exit status 1 when edgebuild is more than 10% slower.

    python benchmarks/train_throughput.py [--epochs 5] [--repeats 3]
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
    args = parser.parse_args()
    checked = validation.load(REPO / "manifests" / "digits.yaml")
    manifest = checked.manifest
    rng = np.random.default_rng(0)
    x_int = quantize(rng.uniform(-1, 1, size=(1300, 1, 8, 8)))
    data = training.Split(torch.as_tensor(x_int / 128.0, dtype=torch.float32),
                          torch.as_tensor(rng.integers(0, 10, 1300)))
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
        net = plain_model()
        opt = torch.optim.Adam(net.parameters(), lr=0.003)
        for epoch in range(args.epochs):
            plain_epoch(net, data.x, data.y, opt, batch, torch.Generator().manual_seed(epoch))

    best_ours = min(timed(ours) for _ in range(args.repeats))
    best_plain = min(timed(plain) for _ in range(args.repeats))
    ratio = best_plain / best_ours
    print(f"edgebuild loop: {samples / best_ours:10.0f} samples/s")
    print(f"plain PyTorch:  {samples / best_plain:10.0f} samples/s")
    print(f"edgebuild throughput / plain = {ratio:.3f} (target >= 0.90)")
    return 0 if ratio >= 0.90 else 1


if __name__ == "__main__":
    sys.exit(main())
