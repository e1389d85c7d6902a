"""Figures for people: training curves and the confusion matrix (matplotlib, Agg backend).

PNG metadata is pinned so identical data gives identical bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TypedDict

METADATA = {"Software": None}


class TileRow(TypedDict):
    """What `memory` reads of a report's tile row (report.json `tiles`)."""

    layer: str
    tiled: bool
    l1_bytes: int
    bytes_in: int
    bytes_out: int


class Region(TypedDict):
    """What `data_memory` reads of a placed tensor's byte range in one memory instance."""

    tensor: str
    instance: int
    start: int
    end: int


class DataMemory(TypedDict):
    """What `data_memory` reads of a MAX7800x placement (report.json `accelerator`)."""

    device: str
    data_memory: list[Region]


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


def confusion(matrix: Sequence[Sequence[int]], labels: list[str], path: Path) -> None:
    plt = _pyplot()
    size = max(3.0, 0.45 * len(labels) + 1.5)
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    peak = max((max(row) for row in matrix), default=0)
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if value:  # white on the dark cells, black on the light ones
                ax.text(j, i, str(int(value)), ha="center", va="center", fontsize=7,
                        color="white" if value > peak / 2 else "black")
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=METADATA)
    plt.close(fig)


def memory(rows: Sequence[TileRow], l1_budget: int, path: Path) -> None:
    """Per layer: L1 bytes in use (tile slots) against the budget, and L2<->L1 traffic."""
    plt = _pyplot()
    names = [row["layer"] for row in rows]
    fig, (l1_ax, traffic_ax) = plt.subplots(1, 2, figsize=(9, 3.2))
    l1_ax.bar(names, [row["l1_bytes"] for row in rows],
              color=["tab:orange" if row["tiled"] else "tab:blue" for row in rows])
    l1_ax.axhline(l1_budget, color="red", linestyle="--", label="L1 budget")
    l1_ax.set_title("L1 bytes per layer (orange: tiled)")
    l1_ax.legend()
    traffic_ax.bar(names, [row["bytes_in"] for row in rows], label="L2 -> L1")
    traffic_ax.bar(names, [row["bytes_out"] for row in rows],
                   bottom=[row["bytes_in"] for row in rows], label="L1 -> L2")
    traffic_ax.set_title("traffic per layer (bytes)")
    traffic_ax.legend()
    for ax in (l1_ax, traffic_ax):
        ax.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=METADATA)
    plt.close(fig)


def data_memory(placement: DataMemory, path: Path) -> None:
    """A MAX7800x data memory map: one row per memory instance, one bar per tensor's byte
    range in it (interleaved `write_gap` tensors are drawn over their whole span)."""
    plt = _pyplot()
    regions = placement["data_memory"]
    tensors = sorted({r["tensor"] for r in regions}, key=[r["tensor"] for r in regions].index)
    colors = {name: plt.cm.tab20(i % 20) for i, name in enumerate(tensors)}
    instances = sorted({r["instance"] for r in regions})
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(instances) + 1.6))
    for row, instance in enumerate(instances):
        for r in (r for r in regions if r["instance"] == instance):
            ax.barh(row, r["end"] - r["start"], left=r["start"], color=colors[r["tensor"]],
                    edgecolor="black", linewidth=0.3, alpha=0.8)
    ax.set_yticks(range(len(instances)), [f"mem {i}" for i in instances])
    ax.set_xlabel("byte offset in the instance")
    ax.set_title(f"{placement['device']} data memory: tensors by instance")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in tensors],
              labels=tensors, fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
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
