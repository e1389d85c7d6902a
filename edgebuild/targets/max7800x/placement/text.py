"""A placement as text for people: the processor table, then the kernel, data and bias
memory maps (`maps.txt` of a build).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from edgebuild.targets.max7800x.placement.maps import bits, spans
from edgebuild.targets.max7800x.placement.regions import Region, byte_range

# What the text reads of a records.Placement, which this module cannot import (records
# imports it): its read-only fields, as protocols.


class _KernelSlot(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def words(self) -> int: ...


class _BiasSlot(Protocol):
    @property
    def group(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def length(self) -> int: ...

    def quadrants(self) -> tuple[tuple[int, int, int], ...]: ...


class _Plan(Protocol):
    """A records.LayerPlan."""

    @property
    def name(self) -> str: ...

    @property
    def op(self) -> str: ...

    @property
    def processors(self) -> int: ...

    @property
    def output_processors(self) -> int: ...

    @property
    def in_offset(self) -> int: ...

    @property
    def out_offset(self) -> int: ...

    @property
    def write_gap(self) -> int: ...

    @property
    def read_gap(self) -> int: ...

    @property
    def in_passes(self) -> int: ...

    @property
    def out_passes(self) -> int: ...

    @property
    def kernel(self) -> _KernelSlot | None: ...

    @property
    def bias(self) -> _BiasSlot | None: ...

    @property
    def overwrites_input(self) -> bool: ...


class Placed(Protocol):
    """A records.Placement."""

    @property
    def device(self) -> str: ...

    @property
    def layers(self) -> Sequence[_Plan]: ...

    @property
    def data(self) -> Sequence[Region]: ...

    @property
    def instance_bytes(self) -> int: ...

    @property
    def kernel_words(self) -> Sequence[int]: ...

    @property
    def processors_per_quadrant(self) -> int: ...

    @property
    def bias_bytes(self) -> int: ...

    def kernel_map(self) -> list[tuple[int, str, int, int]]: ...

    def bias_map(self) -> list[tuple[int, str, int, int]]: ...

    def shared(self) -> list[tuple[str, str, str]]: ...

    @property
    def weights_known(self) -> bool: ...


def maps_text(placement: Placed) -> str:
    """The text of a `records.Placement`."""
    return "\n\n".join((_table(placement), _kernel_text(placement), _data_text(placement),
                         _bias_text(placement), _sharing_text(placement)))


def _sharing_text(placement: Placed) -> str:
    """Which layers run with another layer's stored weights, or that this placement was
    made without the weight values (the vendor's tool stores equal tensors once and leaves
    out all-zero biases: the program can take less than this)."""
    if not placement.weights_known:
        return ("weights not known yet (before quantize): every layer's kernels and bias "
                "are placed as its own; equal tensors are stored once and all-zero biases "
                "not at all once they are (the plan stage's maps)")
    lines = [f"  {name} runs with {first}'s {what}" for name, what, first in placement.shared()]
    return "\n".join(["stored once (equal weights)", *lines] if lines else
                     ["stored once (equal weights): none"])


def _table(placement: Placed) -> str:
    rows = [("layer", "op", "processors", "output", "in_offset", "out_offset", "gap",
             "passes", "kernel words", "bias")]
    for plan in placement.layers:
        kernel = "-" if plan.kernel is None else \
            f"{plan.kernel.start}..{plan.kernel.start + plan.kernel.words - 1}"
        bias = "-" if plan.bias is None else " ".join(
            f"q{q} {offset}..{offset + length - 1}" for q, offset, length in
            plan.bias.quadrants())
        rows.append((plan.name, plan.op, spans(bits(plan.processors)),
                     spans(bits(plan.output_processors)), f"0x{plan.in_offset:04x}",
                     f"0x{plan.out_offset:04x}",
                     str(plan.write_gap) + (f" r{plan.read_gap}" if plan.read_gap else ""),
                     f"{plan.in_passes}/{plan.out_passes}", kernel, bias))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    return f"placement on {placement.device}\n" + "\n".join(lines)


def _kernel_text(placement: Placed) -> str:
    slots: dict[int, list[str]] = {}
    for p, name, start, words in placement.kernel_map():
        slots.setdefault(p, []).append(f"{name} {start}..{start + words - 1}")
    lines = ["kernel memory (words per processor)"]
    quadrant = None
    for processors, listing in _runs(slots):
        q = processors[0] // placement.processors_per_quadrant
        if q != quadrant:
            lines.append(f"  quadrant {q}")
            quadrant = q
        label = "processor" if len(processors) == 1 else "processors"
        lines.append(f"    {label} {spans(processors)} "
                     f"(of {placement.kernel_words[processors[0]]}): {', '.join(listing)}")
    return "\n".join(lines)


def _data_text(placement: Placed) -> str:
    lines = [f"data memory ({placement.instance_bytes} bytes per instance)"]
    for instance in sorted({r.instance for r in placement.data}):
        lines.append(f"  instance {instance}")
        for r in (r for r in placement.data if r.instance == instance):
            gap = "" if r.stride == r.width else f", every {r.stride} bytes"
            last = "end" if r.last >= len(placement.layers) else str(r.last)
            lines.append(f"    {byte_range(r.start, r.end)} {r.tensor} "
                         f"(steps {r.first}..{last}{gap})")
    overwriting = [plan.name for plan in placement.layers if plan.overwrites_input]
    if overwriting:
        lines.append(f"  written over input already read: {', '.join(overwriting)}")
    return "\n".join(lines)


def _bias_text(placement: Placed) -> str:
    lines = [f"bias memory ({placement.bias_bytes} bytes per quadrant)"]
    for group in sorted({g for g, *_ in placement.bias_map()}):
        listing = ", ".join(f"{name} {offset}..{offset + length - 1}" for g, name, offset,
                            length in placement.bias_map() if g == group)
        lines.append(f"  quadrant {group}: {listing}")
    return "\n".join(lines)


def _runs(slots: dict[int, list[str]]) -> list[tuple[list[int], list[str]]]:
    """Consecutive processors with the same kernel slots, grouped."""
    runs: list[tuple[list[int], list[str]]] = []
    for p in sorted(slots):
        if runs and runs[-1][1] == slots[p] and runs[-1][0][-1] == p - 1:
            runs[-1][0].append(p)
        else:
            runs.append(([p], slots[p]))
    return runs
