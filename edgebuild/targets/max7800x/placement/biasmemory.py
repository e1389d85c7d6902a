"""Bias memory: each layer with a bias holds one byte per output channel in one quadrant's
bias memory.
"""

from __future__ import annotations

from collections.abc import Iterable

from edgebuild.targets.max7800x.hwlayer import HwLayer
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.maps import bits
from edgebuild.targets.max7800x.placement.records import BiasSlot


class BiasMemory:
    """Every layer's bias slot (`biases`, by layer name)."""

    def __init__(self, ctx: Context, procs: dict[str, int]):
        self.layers, self.profile = ctx.layers, ctx.profile
        self.given, self.path, self.problem = ctx.given, ctx.path, ctx.problem
        self.procs = procs

    def run(self) -> None:
        """The manual's modified fit-first descending: layers pinned to one quadrant first,
        then the largest first, each into the allowed quadrant with the most free bytes."""
        self.biases: dict[str, BiasSlot] = {}
        available = sorted({self.profile.quadrant_of(p) for layer in self.layers
                            for p in bits(self.procs[layer.name])})
        self.bias_used = dict.fromkeys(range(self.profile.quadrants), 0)
        pinned: list[tuple[HwLayer, list[int], int]] = []
        rest: list[tuple[HwLayer, list[int], int]] = []
        for i, layer in enumerate(self.layers):
            if not layer.has_bias:
                continue
            allowed = self._bias_groups(layer, available)
            if allowed is None:
                continue
            (pinned if len(allowed) == 1 else rest).append((layer, allowed, i))
        rest.sort(key=lambda item: (-item[0].out_channels, item[2]))
        groups = {layer.name: self._bias_group(layer, allowed) for layer, allowed, _ in
                  pinned + rest}
        self._bias_offsets(groups)

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

    def _bias_group(self, layer: HwLayer, allowed: list[int]) -> int | None:
        size, length = self.profile.bias_memory.bytes, layer.out_channels
        best = min(allowed, key=lambda q: (self.bias_used[q], q))
        if self.bias_used[best] + length > size:
            free = ", ".join(f"{size - self.bias_used[q]} in quadrant {q}" for q in allowed)
            self.problem(self.path(layer, "bias_group"), f"layer {layer.name!r}: bias memory "
                         f"runs out: {length} bias bytes do not fit (free: {free}; "
                         f"{self.profile.name} has {size} bytes per quadrant)")
            return None
        self.bias_used[best] += length
        return best

    def _bias_offsets(self, groups: dict[str, int | None]) -> None:
        """Offsets in layer order within each quadrant: they depend only on the chosen
        quadrants, so pinning those (`bias_group`) reproduces the whole bias map."""
        used = dict.fromkeys(range(self.profile.quadrants), 0)
        for layer in self.layers:
            group = groups.get(layer.name)
            if group is not None:
                self.biases[layer.name] = BiasSlot(group, used[group], layer.out_channels)
                used[group] += layer.out_channels


def _listing(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)
