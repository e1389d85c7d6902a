"""Bias memory: each layer with a bias holds one byte per output channel in one quadrant's
bias memory.

One rule places biases for the manifest's validation, maps.txt, the report and the
accelerator program alike (`fit`), the vendor's synthesis tool's first-fit decreasing:
a flattening layer first, then layers allowed in one quadrant only, then by length,
longest first (ties keep network order); each goes to the allowed quadrant with the fewest
bytes used so far, at the end of what that quadrant holds. A layer whose output starts at
processor p within its memory instance reserves p x passes leading bytes (the hardware reads
the bias of output processor k at offset + k). The program leaves out a bias that is all
zeros (it stores nothing); the placement, which runs before the weights exist, counts
every bias, so its map can only be larger than the program's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from edgebuild.targets.max7800x.hwlayer import HwLayer, pixels
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.maps import bits
from edgebuild.targets.max7800x.placement.records import BiasSlot

INSTANCE = 4  # processors per data memory instance (the lead bytes' unit)


@dataclass(frozen=True)
class BiasDemand:
    """One layer's bias as the fit sees it: its position in network order, the quadrants
    it may go to, its bytes (lead bytes included) and whether it flattens its input."""

    index: int
    allowed: tuple[int, ...]
    length: int
    flatten: bool


def lead_bytes(output_processors: int, out_channels: int, processors: int = 64) -> int:
    """Bytes before a layer's first bias: its first output processor's place in its memory
    instance, once per output pass."""
    first = (output_processors & -output_processors).bit_length() - 1
    return first % INSTANCE * math.ceil(out_channels / processors)


def fit(demands: Sequence[BiasDemand], size: int, start: Mapping[int, int] | None = None
        ) -> tuple[dict[int, tuple[int, int]], BiasDemand | None]:
    """({index: (quadrant, offset)}, the first demand that did not fit or None); `start`:
    bytes per quadrant already taken (the program's depthwise biases)."""
    order = sorted(demands, key=lambda d: -1 if d.flatten else 0 if len(d.allowed) == 1
                   else size - d.length)
    used: dict[int, int] = {q: n for q, n in (start or {}).items() if n}
    slots: dict[int, tuple[int, int]] = {}
    for d in order:
        group = min(d.allowed, key=lambda q: (used.get(q, 0), d.allowed.index(q)))
        if used.get(group, 0) + d.length > size:
            return slots, d
        slots[d.index] = (group, used.get(group, 0))
        used[group] = used.get(group, 0) + d.length
    return slots, None


class BiasMemory:
    """Every layer's bias slot (`biases`, by layer name)."""

    def __init__(self, ctx: Context, procs: dict[str, int], outs: dict[str, int]):
        self.layers, self.profile = ctx.layers, ctx.profile
        self.given, self.path, self.problem = ctx.given, ctx.path, ctx.problem
        self.procs, self.outs = procs, outs

    def run(self) -> None:
        """`fit` over every layer with a bias, in the quadrants the network uses (those
        its layers read with, and the last layer's output's)."""
        self.biases: dict[str, BiasSlot] = {}
        used_maps = [self.procs[layer.name] for layer in self.layers]
        used_maps.append(self.outs[self.layers[-1].name])
        available = sorted({self.profile.quadrant_of(p) for m in used_maps for p in bits(m)})
        demands = []
        for i, layer in enumerate(self.layers):
            allowed = self._bias_groups(layer, available) if layer.has_bias else None
            if allowed is not None:
                outs = self.outs[layer.name]
                demands.append(BiasDemand(
                    i, tuple(allowed), layer.out_channels + lead_bytes(
                        outs, layer.out_channels, self.profile.processors),
                    layer.flatten and pixels(layer.in_shape) > 1))
        slots, short = fit(demands, self.profile.bias_memory.bytes)
        if short is not None:
            self._short(self.layers[short.index], short)
        for i, (group, offset) in slots.items():
            layer = self.layers[i]
            self.biases[layer.name] = BiasSlot(group, offset, layer.out_channels)

    def _bias_groups(self, layer: HwLayer, available: list[int]) -> list[int] | None:
        given = self.given(layer.name, "bias_group")
        if given is None:
            return available
        groups = [given] if isinstance(given, int) else list(given)
        shown = groups[0] if isinstance(given, int) else groups
        wrong = [g for g in groups if g not in available]
        if wrong or not groups:
            self.problem(("placement", layer.name, "bias_group"), f"layer {layer.name!r}: "
                         f"bias_group {shown} must name quadrants the network uses "
                         f"(available: {_listing(available)})")
            return None
        return groups

    def _short(self, layer: HwLayer, demand: BiasDemand) -> None:
        size = self.profile.bias_memory.bytes
        self.problem(self.path(layer, "bias_group"), f"layer {layer.name!r}: bias memory "
                     f"runs out: {demand.length} bias bytes do not fit in quadrant"
                     f"{'s' if len(demand.allowed) > 1 else ''} "
                     f"{_listing(demand.allowed)} ({self.profile.name} has {size} bytes "
                     "per quadrant)")


def _listing(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)
