"""Figures of training for people: loss and accuracy curves (matplotlib, Agg backend);
the report draws the rest (edgebuild/report/figures.py).

PNG metadata is pinned so identical data gives identical bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

METADATA = {"Software": None}


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves(epochs: Sequence[dict[str, float]], path: Path, title: str) -> None:
    plt = _pyplot()
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(9, 3.2))
    x = [row["epoch"] for row in epochs]
    for key, style in (("train_loss", "-"), ("val_loss", "--")):
        loss_ax.plot(x, [row[key] for row in epochs], style, label=key.replace("_", " "))
    for key, style in (("train_acc", "-"), ("val_acc", "--")):
        acc_ax.plot(x, [row[key] for row in epochs], style, label=key.replace("_", " "))
    loss_ax.set_xlabel("epoch")
    acc_ax.set_xlabel("epoch")
    loss_ax.set_title(f"{title}: loss")
    acc_ax.set_title(f"{title}: accuracy")
    loss_ax.legend()
    acc_ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=METADATA)
    plt.close(fig)


def training_losses(c: list[float], torch: list[float], path: Path) -> None:
    """On-device training: the C code's loss per step over PyTorch's (they should overlap)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    steps = list(range(1, len(torch) + 1))
    ax.plot(steps, torch, "-", linewidth=3, alpha=0.4, label="PyTorch")
    ax.plot(steps, c, "o", markersize=4, label="generated C")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("on-device training: loss per step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=METADATA)
    plt.close(fig)
