"""The datasets of benchmarks/accuracy.py's `datasets` mode: where their files are, the
1-NN Euclidean baseline on them, and the two manifests built for each.

Default: the manifest guide's model recipe for the shape (convolutions each followed by a
batchnorm and ReLU, max pooling, a linear classifier) with every training setting unset.
Tuned: the same model with its small-data advice (docs/guide/manifest.md) written out (`val: 0`,
standard per-channel normalization, batch 16, 150 float epochs and 15 QAT epochs; for
Fashion-MNIST 10 and 3 epochs of its 60,000 images).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FASHION = Path("/usr/share/datasets/fashion-mnist")


@dataclass(frozen=True)
class Dataset:
    name: str
    shape: tuple[int, ...]  # one sample, channels first
    classes: int
    source: str  # the manifest's dataset files (YAML lines, indented)
    ucr: bool

    def manifest(self, tuned: bool) -> str:
        extra = ("  split: {val: 0}\n  normalize: {method: standard, per_channel: true}\n"
                 if tuned and self.ucr else "")
        training = ""
        if tuned:
            training = ("train: {epochs: 150, batch: 16, optimizer: {adam: {lr: 0.003}}}\n"
                        "qat: {epochs: 15}\n" if self.ucr else
                        "train: {epochs: 10, optimizer: {adam: {lr: 0.003}}}\nqat: {epochs: 3}\n")
        return (f"name: {self.name}{'_tuned' if tuned else ''}\nseed: 1\ndataset:\n{self.source}"
                f"{extra}model:\n  input: {list(self.shape)}\n  layers:\n{self.layers()}"
                f"{training}target: {{device: cortex-m4, memory: {{l1: 16KiB, l2: 512KiB, "
                "flash: 1MiB}}\n")

    def layers(self) -> str:
        """Three convolution blocks; each pools by 4 (1-D) or 2 (2-D) while the map is long
        enough to stay at least 2 wide."""
        one_d = len(self.shape) == 2
        conv, pool = ("conv1d", "pool1d") if one_d else ("conv2d", "pool2d")
        widths = ((16, 7), (32, 5), (32, 3)) if one_d else ((16, 3), (32, 3), (32, 3))
        length, blocks = self.shape[-1], []
        for i, (out, kernel) in enumerate(widths, 1):
            blocks += [f"    - {{name: conv{i}, op: {conv}, out: {out}, kernel: {kernel}, "
                       f"pad: {kernel // 2}}}\n",
                       f"    - {{name: bn{i}, op: batchnorm, act: relu}}\n"]
            size = next((s for s in ((4, 2) if one_d else (2,)) if length // s >= 2), None)
            if size is not None:
                blocks.append(f"    - {{name: p{i}, op: {pool}, mode: max, size: {size}}}\n")
                length //= size
        blocks.append(f"    - {{name: fc, op: linear, out: {self.classes}, flatten: true, "
                      "wide: true}\n")
        return "".join(blocks)


def _ucr(name: str, folder: str, stem: str, shape: tuple[int, ...], classes: int) -> Dataset:
    path = f"datasets/data/{folder}/{stem}"
    source = (f"  format: ts\n  train: {{package: aeon, path: {path}_TRAIN.ts}}\n"
              f"  test: {{package: aeon, path: {path}_TEST.ts}}\n")
    return Dataset(name, shape, classes, source, True)


DATASETS = {d.name: d for d in (
    _ucr("acsf1", "ACSF1", "ACSF1", (1, 1460), 10),
    _ucr("osuleaf", "OSULeaf", "OSULeaf", (1, 427), 6),
    _ucr("pickup", "PickupGestureWiimoteZ", "PickupGestureWiimoteZ_eq", (1, 361), 10),
    _ucr("vowels", "JapaneseVowels", "JapaneseVowels_eq", (12, 25), 9),
    _ucr("basicmotions", "BasicMotions", "BasicMotions", (6, 100), 4),
    Dataset("fashion", (1, 28, 28), 10, (
        "  format: idx\n"
        f"  train_images: {FASHION}/train-images-idx3-ubyte.gz\n"
        f"  train_labels: {FASHION}/train-labels-idx1-ubyte.gz\n"
        f"  test_images: {FASHION}/t10k-images-idx3-ubyte.gz\n"
        f"  test_labels: {FASHION}/t10k-labels-idx1-ubyte.gz\n"), False),
)}


def one_nn(name: str) -> float:
    """1-NN Euclidean accuracy on the raw samples (UCR's and Fashion-MNIST's baseline)."""
    (xtr, ytr), (xte, yte) = _arrays(name)
    a, b = xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)
    right = 0
    for start in range(0, len(b), 500):  # distances in blocks: Fashion is 10,000 x 60,000
        part = b[start:start + 500]
        distances = (part * part).sum(1)[:, None] - 2 * part @ a.T + (a * a).sum(1)[None, :]
        right += int((ytr[distances.argmin(1)] == yte[start:start + 500]).sum())
    return right / len(b)


def _arrays(name: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    if name == "fashion":
        return _idx("train"), _idx("t10k")
    import aeon

    from edgebuild.data import ts

    dataset = DATASETS[name]
    path = dataset.source.split("path: ")[1].split("_TRAIN")[0]
    root = Path(os.path.dirname(aeon.__file__)) / path
    train = ts.read(Path(f"{root}_TRAIN.ts"))
    test = ts.read(Path(f"{root}_TEST.ts"))
    return (train[0], train[1]), (test[0], test[1])


def _idx(part: str) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(FASHION / f"{part}-images-idx3-ubyte.gz") as handle:
        images = np.frombuffer(handle.read(), np.uint8, offset=16).astype(np.float32)
    with gzip.open(FASHION / f"{part}-labels-idx1-ubyte.gz") as handle:
        labels = np.frombuffer(handle.read(), np.uint8, offset=8).astype(np.int64)
    return images.reshape(len(labels), -1), labels
