"""Bias memory: each layer with a bias holds one byte per output channel in one quadrant's
bias memory.

One rule places biases for the manifest's validation, maps.txt, the report and the
accelerator program alike (`BiasMemory`; the program only writes the values where it says),
the vendor's synthesis tool's:
- a depthwise layer's bias goes first: every quadrant it reads with holds the biases of
  its own channels (the hardware adds them per processor), each quadrant's part starting
  at a multiple of 4, in the order broadcast mode fetches them (`depthwise_order`);
- the others by first-fit decreasing (`fit`): a flattening layer first (on devices whose
  profile says `flatten_first`), then layers allowed in one quadrant only, then by length,
  longest first (ties keep network order); each goes to the allowed quadrant with the
  fewest bytes used so far, at the end of what that quadrant holds. A layer whose output
  starts at processor p within its memory instance reserves p x passes leading bytes (the
  hardware reads the bias of output processor k at offset + k), and a streaming first
  layer on MAX78000 one more, a zero the vendor's tool puts first to work around a fault
  of that part (`stream_gap`).
With the weight values (`Sharing`: the plan stage and the program), a bias that is all
zeros is not stored and one equal to an earlier layer's uses that layer's slot; without
them (`check`) every bias is placed, so that map can only be larger than the program's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from edgebuild.targets.max7800x import advice
from edgebuild.targets.max7800x.hwlayer import HwLayer, pixels
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.kernelmemory import passes, per_pass
from edgebuild.targets.max7800x.placement.maps import bits
from edgebuild.targets.max7800x.placement.records import BiasSlot
from edgebuild.targets.max7800x.placement.sharing import Sharing

INSTANCE = 4  # processors per data memory instance (the lead bytes' unit)
QUADRANT = 16  # processors per quadrant


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


def _broadcast_order(p: int) -> int:
    """The processor whose bias slot `p` of a quadrant holds in broadcast mode: the hardware
    reads the four 8-bit memories of a quadrant in parallel, so slot p holds the bias of
    processor 4 x (p % 4) + p // 4 of that quadrant."""
    return (p & ~(QUADRANT - 1)) + (p % 4) * 4 + (p % QUADRANT) // 4


def _moved_gap(processors: int) -> int:
    """Without broadcast, the first quadrant's processors as the bias bytes count them: its
    leading unused processors moved to the end of the quadrant (the channels are written
    to other processors anyway, so only their order within the quadrant counts)."""
    first = (processors & -processors).bit_length() - 1
    mask = 0xFFFF << (first & ~(QUADRANT - 1))
    return processors & ~mask | (processors & mask) >> first % QUADRANT


def depthwise_order(processors: int, out_channels: int, broadcast: bool = True
                    ) -> dict[int, list[int | None]]:
    """Per quadrant a depthwise layer reads with, the output channel whose bias each byte
    of its part holds (None: a byte left zero, a processor without a channel). Pass by
    pass, every processor slot from the first used quadrant's start to the last one takes
    a byte; trailing empty bytes of the last quadrant are given back. In broadcast mode
    (output processors = input processors) each quadrant reads its four 8-bit memories in
    parallel, so its slots span whole quadrants in that fetch order (_broadcast_order);
    otherwise they follow the processors (_moved_gap) up to the last one used."""
    procs = processors if broadcast else _moved_gap(processors)
    first = (procs & -procs).bit_length() - 1 & ~(QUADRANT - 1)
    last = procs.bit_length() - 1
    if broadcast:
        last = (last + QUADRANT & ~(QUADRANT - 1)) - 1
    used = [p for p in range(first, last + 1) if procs >> p & 1]
    per = per_pass(out_channels)
    channel = {p: k for k, p in enumerate(used)}
    order: dict[int, list[int | None]] = {}
    group = 0
    for e in range(passes(out_channels)):
        for p in range(first, last + 1):
            group = p // QUADRANT
            k = channel.get(_broadcast_order(p) if broadcast else p)
            order.setdefault(group, []).append(
                None if k is None or k >= per or e * per + k >= out_channels else e * per + k)
    while order[group] and order[group][-1] is None:
        order[group].pop()
    return {q: part for q, part in order.items() if processors >> QUADRANT * q & 0xFFFF}


class BiasMemory:
    """Every layer's bias slot (`biases`, by layer name)."""

    def __init__(self, ctx: Context, procs: dict[str, int], outs: dict[str, int],
                 sharing: Sharing | None = None):
        self.layers, self.profile = ctx.layers, ctx.profile
        self.given, self.path, self.problem = ctx.given, ctx.path, ctx.problem
        self.procs, self.outs, self.sharing = procs, outs, sharing

    def run(self) -> None:
        """The depthwise layers' parts, then `fit` over every other layer storing a bias,
        in the quadrants the network uses (those its layers read with, and the last
        layer's output's); a duplicate gets its original's slot."""
        self.biases: dict[str, BiasSlot] = {}
        used_maps = [self.procs[layer.name] for layer in self.layers]
        used_maps.append(self.outs[self.layers[-1].name])
        available = sorted({self.profile.quadrant_of(p) for m in used_maps for p in bits(m)})
        used: dict[int, int] = {}
        for i, layer in enumerate(self.layers):
            if self._stores(i) and layer.depthwise:
                self._depthwise(layer, used)
        demands = []
        for i, layer in enumerate(self.layers):
            allowed = self._bias_groups(layer, available) \
                if self._stores(i) and not layer.depthwise else None
            if allowed is not None:
                demands.append(BiasDemand(i, tuple(allowed), self._length(i, layer),
                                          self.profile.bias_memory.flatten_first
                                          and layer.flatten and pixels(layer.pooled_shape) > 1))
        slots, short = fit(demands, self.profile.bias_memory.bytes, used)
        if short is not None:
            self._short(self.layers[short.index], short)
        for d in demands:
            if d.index in slots:
                group, offset = slots[d.index]
                self.biases[self.layers[d.index].name] = BiasSlot(
                    group, offset, d.length, self._lead(d.index, self.layers[d.index]))
        self._duplicates()

    def _stores(self, i: int) -> bool:
        """Whether layer i stores a bias of its own."""
        if self.sharing is None:
            return self.layers[i].has_bias
        return self.sharing.biases[i] == i

    def _lead(self, i: int, layer: HwLayer) -> int:
        """Bytes of the slot before the first value: lead bytes, the streaming gap."""
        gap = self.profile.bias_memory.stream_gap \
            if i == 0 and self.given(layer.name, "streaming") else 0
        return lead_bytes(self.outs[layer.name], layer.out_channels,
                          self.profile.processors) + gap

    def _length(self, i: int, layer: HwLayer) -> int:
        return self._lead(i, layer) + layer.out_channels

    def _depthwise(self, layer: HwLayer, used: dict[int, int]) -> None:
        """A depthwise layer's part in each quadrant it reads with, appended to `used`."""
        if self.given(layer.name, "bias_group") is not None:
            self.problem(("placement", layer.name, "bias_group"), f"layer {layer.name!r} is "
                         "depthwise: its bias goes to every quadrant it reads with (each "
                         "holds its own channels'); remove bias_group")
        parts = []
        size = self.profile.bias_memory.bytes
        broadcast = self.procs[layer.name] == self.outs[layer.name]
        for q, order in depthwise_order(self.procs[layer.name], layer.out_channels,
                                        broadcast).items():
            align = INSTANCE if broadcast else 1
            offset = -(-used.get(q, 0) // align) * align
            used[q] = offset + len(order)
            parts.append((q, offset, len(order)))
            if used[q] > size:
                self.problem(self.path(layer), f"layer {layer.name!r}: bias memory runs "
                             f"out: its depthwise biases need {used[q]} bytes in quadrant "
                             f"{q} ({self.profile.name} has {size} bytes per quadrant)",
                             self._advice(used[q]))
        group, offset, length = parts[0]
        self.biases[layer.name] = BiasSlot(group, offset, length, 0, tuple(parts))

    def _duplicates(self) -> None:
        """A layer whose bias equals an earlier layer's uses that layer's slot."""
        if self.sharing is None:
            return
        for layer, source in zip(self.layers, self.sharing.biases, strict=True):
            original = self.biases.get(self.layers[source].name) if source is not None \
                else None
            if original is not None:
                self.biases[layer.name] = original

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
                     "per quadrant)", self._advice(size + 1))

    def _advice(self, need: int) -> str:
        """Less bias, elsewhere, or a device with larger bias memories."""
        return advice.bias_memory(advice.larger(self.profile.name, need,
                                                lambda other: other.bias_memory.bytes,
                                                "bias bytes per quadrant"))


def _listing(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)
