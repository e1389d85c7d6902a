"""The figures of report.html (matplotlib PNGs, Agg backend), each drawn from report.json's
data: the confusion matrix, MACs per layer, L1 tiles per layer, and a MAX7800x build's
data and kernel memory.

Figures are for reading, so each is drawn at the scale its data needs, with its numbers
written on it: a model of a few hundred bytes in a 32 KiB data memory instance is drawn
zoomed to the addresses it uses (a to-scale map looks empty), with the used bytes and
their share of the instance written next to each bar.

Deterministic: PNG metadata is pinned (train.plots.METADATA: no Software entry, no
timestamp) and nothing depends on time or order of a set, so two clean builds write the
same bytes. Training curves are the train and qat stages' own figures (train/plots.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypedDict

from edgebuild.report.headline import share_of
from edgebuild.train.plots import METADATA

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
ERRORS_FULL = 0.5  # share of a true class predicted as one other class drawn in full red
TICK_CHARS = 16  # a class name longer than this is cut in the confusion matrix's ticks


class TileRow(TypedDict):
    """What `tiles` reads of a report's tile row (report.json `tiles`)."""

    layer: str
    tiled: bool
    l1_bytes: int
    bytes_in: int
    bytes_out: int


class Region(TypedDict):
    """What `data_memory` reads of a placed tensor's words in one memory instance."""

    tensor: str
    instance: int
    start: int
    end: int
    first_step: int
    last_step: int


class KernelSlot(TypedDict):
    """What `kernel_memory` reads of a layer's kernel words in one processor."""

    processor: int
    layer: str
    start: int
    words: int


def _pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: ModuleType, fig: Figure, path: Path, tight: bool = False) -> None:
    """`tight`: crop to what is drawn, legends outside the axes included."""
    fig.savefig(path, dpi=DPI, metadata=METADATA, bbox_inches="tight" if tight else None)
    plt.close(fig)


def _colors(plt: ModuleType, names: Sequence[str]) -> dict[str, Any]:
    """Distinct colours: tab10's up to ten names (tab20's neighbours look alike), then
    tab20's."""
    palette, size = (plt.cm.tab10, 10) if len(names) <= 10 else (plt.cm.tab20, 20)
    return {name: palette(k % size) for k, name in enumerate(names)}


# ---- confusion matrix -------------------------------------------------------------------

def confusion(matrix: Sequence[Sequence[int]], labels: Sequence[str], path: Path) -> None:
    """Rows: true class, columns: predicted; each non-zero cell shows its count. Colour is
    the share of the true class (a rare class's errors show as much as a common one's):
    correct predictions blue, errors red — at least a visible pink however few, full red
    from ERRORS_FULL of the class on. Cells,
    counts and labels shrink with the class count, down to a size still legible at 40
    classes; report.html shows the image at its own size, never scaled down."""
    plt = _pyplot()
    n = max(len(labels), 1)
    cell = min(0.6, max(0.36, 6.0 / n))  # inches per cell
    side = max(5.0, n * cell + 1.9)  # at least room for the title
    fig, ax = plt.subplots(figsize=(side, side))
    totals = [max(sum(row), 1) for row in matrix]
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if value:
                share = value / totals[i]
                _confusion_cell(ax, plt, (i, j), value, share if i == j else
                                0.3 + 0.7 * min(1.0, share / ERRORS_FULL), cell)
    _confusion_axes(ax, labels, cell)
    ax.set_title(f"{sum(map(sum, matrix)):,} test samples (blue: correct, red: errors)",
                 fontsize=10)
    fig.tight_layout()
    _save(plt, fig, path)


def _confusion_cell(ax: Axes, plt: ModuleType, at: tuple[int, int], value: int,
                    level: float, cell: float) -> None:
    """One non-zero cell, shaded by `level` (0..1), its count on top: white on the dark
    cells, black on the light ones, about a third of the cell high."""
    i, j = at
    color = (plt.cm.Blues if i == j else plt.cm.Reds)(0.15 + 0.85 * level)
    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=color, linewidth=0))
    ax.text(j, i, f"{value:,}", ha="center", va="center", fontsize=min(14.0, cell * 72 * 0.33),
            color="white" if level > 0.55 else "black")


def _tick(label: str) -> str:
    """A class name as a tick label: the dataset's own names can be long (`Ankle boot`,
    a sentence), and a long one would squeeze the matrix; cut to TICK_CHARS, the cut shown."""
    return label if len(label) <= TICK_CHARS else label[:TICK_CHARS - 1] + "\u2026"


def _confusion_axes(ax: Axes, labels: Sequence[str], cell: float) -> None:
    n = max(len(labels), 1)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_aspect("equal")
    size = max(7.0, min(11.0, cell * 72 * 0.3))
    ticks = [_tick(label) for label in labels]
    turn = n > 12 or max(map(len, ticks), default=0) > 3
    ax.set_xticks(range(len(ticks)), ticks, fontsize=size, rotation=90 if turn else 0)
    ax.set_yticks(range(len(ticks)), ticks, fontsize=size)
    ax.set_xticks([k - 0.5 for k in range(1, n)], minor=True)
    ax.set_yticks([k - 0.5 for k in range(1, n)], minor=True)
    ax.grid(which="minor", color="#dddddd", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")


# ---- per layer --------------------------------------------------------------------------

def layer_macs(layers: Sequence[dict[str, Any]], path: Path) -> None:
    """Multiply-accumulates and parameters per layer (report.json `layers`), each bar
    labelled with its count and share of the model; layers with neither are left out."""
    plt = _pyplot()
    rows = [layer for layer in layers if layer["macs"] or layer["params"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.35 * len(rows) + 1.4), sharey=True)
    names = [row["name"] for row in rows]
    for ax, key, title in zip(axes, ("macs", "params"), ("MACs per inference", "parameters"),
                              strict=True):
        values = [row[key] for row in rows]
        _labelled_bars(ax, names, values, sum(values) or 1)
        ax.set_title(f"{title} (total {sum(values):,})", fontsize=10)
    axes[0].invert_yaxis()
    fig.tight_layout()
    _save(plt, fig, path)


def layer_cycles(layers: Sequence[dict[str, Any]], path: Path) -> None:
    """Estimated Cortex-M4 cycles and flash for weights per layer (report.json
    `metrics.cortex_m4.layers`): where an inference's time and the flash go."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.35 * len(layers) + 1.4), sharey=True)
    names = [row["layer"] for row in layers]
    for ax, key, title in zip(axes, ("cycles", "weight_bytes"),
                              ("estimated M4 cycles per inference", "weight bytes (flash)"),
                              strict=True):
        values = [int(row[key] or 0) for row in layers]
        _labelled_bars(ax, names, values, sum(values) or 1)
        ax.set_title(f"{title} (total {sum(values):,})", fontsize=10)
    axes[0].invert_yaxis()
    fig.tight_layout()
    _save(plt, fig, path)


def _labelled_bars(ax: Axes, names: Sequence[str], values: Sequence[int], total: int) -> None:
    """Horizontal bars with `count (share%)` written after each; room kept for the text."""
    ax.barh(range(len(values)), values, color="tab:blue")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlim(0, max(values, default=1) * 1.45 or 1)
    for k, value in enumerate(values):
        ax.text(value, k, f" {value:,} ({share_of(value, total)})", va="center", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)


def tiles(rows: Sequence[TileRow], l1_budget: int, path: Path) -> None:
    """Per layer: L1 bytes in use (tile slots) against the budget, and L2<->L1 traffic."""
    plt = _pyplot()
    names = [row["layer"] for row in rows]
    fig, (l1_ax, traffic_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    l1_ax.bar(names, [row["l1_bytes"] for row in rows],
              color=["tab:orange" if row["tiled"] else "tab:blue" for row in rows])
    l1_ax.axhline(l1_budget, color="red", linestyle="--", label=f"L1 budget {l1_budget:,} B")
    l1_ax.set_title("L1 bytes per layer (orange: tiled)", fontsize=10)
    l1_ax.set_ylabel("bytes")
    l1_ax.legend(fontsize=8)
    traffic_ax.bar(names, [row["bytes_in"] for row in rows], label="L2 -> L1")
    traffic_ax.bar(names, [row["bytes_out"] for row in rows],
                   bottom=[row["bytes_in"] for row in rows], label="L1 -> L2")
    traffic_ax.set_title("L2 <-> L1 traffic per layer", fontsize=10)
    traffic_ax.set_ylabel("bytes")
    traffic_ax.legend(fontsize=8)
    for ax in (l1_ax, traffic_ax):
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    fig.tight_layout()
    _save(plt, fig, path)


# ---- MAX7800x memories ------------------------------------------------------------------

def data_memory(regions: Sequence[Region], used: Sequence[int], instance_bytes: int,
                device: str, path: Path) -> None:
    """A MAX7800x data memory: left, the bytes used in each instance (report.json
    `accelerator.occupancy`), zoomed to the largest and labelled with its share of the
    instance; right, the tensors' byte ranges, zoomed to the address windows in use (one
    panel each, empty address space left out). Tensors that share bytes at different
    steps are drawn one above the other within their instance's row."""
    plt = _pyplot()
    windows = _windows([(r["start"], r["end"]) for r in regions], instance_bytes)
    fig, axes = plt.subplots(
        1, 1 + len(windows), sharey=True, figsize=(11, 0.32 * len(used) + 1.9),
        gridspec_kw={"width_ratios": [1.3] + [2.6 / max(len(windows), 1)] * len(windows)})
    axes = list(axes) if len(windows) else [axes]
    _instance_use(axes[0], used, instance_bytes)
    tensors = list(dict.fromkeys(r["tensor"] for r in regions))
    colors = _colors(plt, tensors)
    for ax, window in zip(axes[1:], windows, strict=True):
        _address_window(ax, regions, window, colors)
    steps = {r["tensor"]: (r["first_step"], r["last_step"]) for r in regions}
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colors[name]) for name in tensors],
               labels=[f"{name} (steps {steps[name][0]}..{steps[name][1]})" for name in tensors],
               fontsize=8, loc="upper center", ncol=min(len(tensors), 4),
               bbox_to_anchor=(0.5, 0.0), frameon=False)
    fig.suptitle(f"{device} data memory: {sum(used):,} of {instance_bytes * len(used):,} bytes "
                 f"used ({instance_bytes:,} bytes per instance)", fontsize=10)
    fig.tight_layout()
    _save(plt, fig, path, tight=True)


def _instance_use(ax: Axes, used: Sequence[int], instance_bytes: int) -> None:
    rows = range(len(used))
    ax.barh(rows, used, color="tab:blue")
    ax.set_xlim(0, max(max(used, default=0) * 1.9, 1))
    for k, value in enumerate(used):
        label = f"{value:,} B ({share_of(value, instance_bytes)})" if value else "unused"
        ax.text(value, k, f" {label}", va="center", fontsize=7)
    ax.set_yticks(list(rows), [f"instance {k}" for k in rows], fontsize=8)
    ax.set_ylim(len(used) - 0.5, -0.5)
    ax.set_title("bytes used per instance", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)


def _windows(spans: Sequence[tuple[int, int]], instance_bytes: int) -> list[tuple[int, int]]:
    """The address windows worth drawing: spans merged where the gap between them is less
    than 1/16 of the instance, each window padded by a word on both sides."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start - merged[-1][1] < instance_bytes // 16:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(max(start - 4, 0), min(end + 4, instance_bytes)) for start, end in merged]


def _address_window(ax: Axes, regions: Sequence[Region], window: tuple[int, int],
                    colors: dict[str, Any]) -> None:
    low, high = window
    for instance in sorted({r["instance"] for r in regions}):
        inside = [r for r in regions if r["instance"] == instance
                  and r["start"] < high and r["end"] > low]
        for lane, r in enumerate(inside):
            height = 0.8 / len(inside)
            ax.barh(instance - 0.4 + height * (lane + 0.5), r["end"] - r["start"], height=height,
                    left=r["start"], color=colors[r["tensor"]], edgecolor="black", linewidth=0.3)
    ax.set_xlim(low, high)
    ax.set_xticks([low, high], [f"0x{low:04x}", f"0x{high:04x}"], fontsize=7)
    ax.set_title(f"bytes 0x{low:04x}..0x{high - 1:04x}", fontsize=9)


def kernel_memory(slots: Sequence[KernelSlot], processors: int, quadrants: int, capacity: int,
                  device: str, path: Path) -> None:
    """Kernel memory per processor as the device holds it: each layer's words drawn at the
    word they start at (the column the placement chose), so gaps the first-fit search left
    and layers sharing a column range show as they are; zoomed to the highest word used
    (the device's `capacity` in words, all processors, is in the title)."""
    plt = _pyplot()
    layers = list(dict.fromkeys(slot["layer"] for slot in slots))
    colors = _colors(plt, layers)
    fig, ax = plt.subplots(figsize=(11, 3.2))
    for name in layers:
        mine = [s for s in slots if s["layer"] == name]
        ax.bar([s["processor"] for s in mine], [s["words"] for s in mine],
               bottom=[s["start"] for s in mine], color=colors[name], label=name, width=0.85)
    top = max((s["start"] + s["words"] for s in slots), default=0)
    used = sum(s["words"] for s in slots)
    ax.set_ylim(0, max(top * 1.25, 1))
    ax.set_xlim(-0.7, processors - 0.3)
    step = processors // max(quadrants, 1)
    for first in range(step, processors, step):
        ax.axvline(first - 0.5, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlabel("processor (dotted lines: quadrants)")
    ax.set_ylabel(f"word (of {capacity // max(processors, 1):,} each)")
    ax.set_title(f"{device} kernel memory: {used:,} of {capacity:,} words used",
                 fontsize=10)
    ax.legend(fontsize=8, ncol=min(len(layers), 6), loc="upper right")
    fig.tight_layout()
    _save(plt, fig, path)


def processor_map(layers: Sequence[dict[str, Any]], processors: int, quadrants: int,
                  device: str, path: Path) -> None:
    """The processor map: a row per hardware layer, a column per processor; a cell says
    whether the processor reads the layer's input, writes its output, or both — the
    picture MAX7800x users otherwise draw by hand to see which processors (and so which
    data memory instances and kernel columns) each layer occupies."""
    import numpy as np

    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    grid = np.zeros((len(layers), processors), dtype=int)
    for row, layer in enumerate(layers):
        reads, writes = int(layer["processors"], 0), int(layer["output_processors"], 0)
        for p in range(processors):
            grid[row, p] = (reads >> p & 1) + 2 * (writes >> p & 1)
    palette = ["#f4f4f4", "#4c78a8", "#f58518", "#54a24b"]  # none, reads, writes, both
    colors = ListedColormap(palette)
    fig, ax = plt.subplots(figsize=(11, 0.9 + 0.32 * max(len(layers), 1)))
    ax.imshow(grid, cmap=colors, vmin=0, vmax=3, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(layers)), [layer["name"] for layer in layers], fontsize=8)
    step = processors // max(quadrants, 1)
    ax.set_xticks(range(0, processors, step // 2 or 1))
    for first in range(step, processors, step):
        ax.axvline(first - 0.5, color="#333333", linewidth=0.8, linestyle=":")
    ax.set_xlabel("processor (dotted lines: quadrants)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[i]) for i in (1, 2, 3)]
    ax.legend(handles, ["reads input", "writes output", "both"], fontsize=8, ncol=3,
              loc="lower right", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"{device} processor map", fontsize=10, loc="left")
    fig.tight_layout()
    _save(plt, fig, path)
