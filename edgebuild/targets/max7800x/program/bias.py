"""Bias memory: one 8-bit value per output channel, in the bias memory of one quadrant.

The quadrant and offset come from the placement's rule (placement.biasmemory.fit, the
vendor's first-fit decreasing, shared with validation and maps.txt), over the biases that
are stored: a bias that is all zeros is not stored at all. A flattening layer goes first
where the device requires its bias first in a quadrant (MAX78000; on MAX78002 it is sorted
like any other: `flatten_first`). A bias equal to an earlier layer's (program.duplicates,
the vendor's deduplication) is stored once: the duplicate takes no bytes and its registers
point at the original's quadrant and offset.

A depthwise layer's bias is different: every quadrant it reads with holds the biases of its
own channels (the hardware adds them per processor), so its bytes are spread over those
quadrants, in the order the processors fetch them (broadcast mode or not), before the other
layers are fitted (the vendor's tool allocates them first; `depthwise`).

A streaming first layer's bias on MAX78000 starts one byte into its slot, behind a zero
(`stream_gap`): the vendor's tool works around a fault of that part this way, and the slot is
one byte longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgebuild.targets.max7800x.placement.biasmemory import BiasDemand, fit, lead_bytes
from edgebuild.targets.max7800x.program.geometry import Geometry
from edgebuild.targets.max7800x.program.kernels import ffs

INSTANCE = 4


@dataclass(frozen=True)
class LayerBias:
    group: int
    offset: int
    offsets: tuple[int | None, ...] | None = None  # depthwise: per quadrant (None: unused)


QUADRANT = 16  # processors per quadrant
UNSET = None  # a bias byte a processor without a channel skips (stays 0)


def _broadcast_order(p: int) -> int:
    """The channel whose bias processor slot `p` of a quadrant holds in broadcast mode: the
    hardware reads the four 8-bit memories of a quadrant in parallel, so slot p holds the
    bias of processor 4 x (p % 4) + p // 4 of that quadrant."""
    return (p & ~(QUADRANT - 1)) + (p % 4) * 4 + (p % QUADRANT) // 4


def _moved_gap(processors: int) -> int:
    """Without broadcast, the first quadrant's processors as the bias bytes count them: its
    leading unused processors moved to the end of the quadrant (the channels are written
    to other processors anyway, so only their order within the quadrant counts)."""
    first = ffs(processors)
    mask = 0xFFFF << (first & ~(QUADRANT - 1))
    return processors & ~mask | (processors & mask) >> first % QUADRANT


def depthwise(g: Geometry, bias: np.ndarray, memory: dict[int, list[int | None]]
              ) -> LayerBias:
    """Append a depthwise layer's biases to each quadrant's bytes (`memory`, appended in
    place) and return where they start in each quadrant. Every processor slot of the used
    quadrants, pass by pass, takes a byte (those without a channel a zero); trailing empty
    bytes of the last quadrant are given back. In broadcast mode each quadrant reads its
    four 8-bit memories in parallel: its slots start at a multiple of 4, span whole
    quadrants and hold the channels in that fetch order (_broadcast_order). Otherwise the
    slots follow the processors (_moved_gap), from the first quadrant's start when the layer
    reads more than one quadrant."""
    offsets: list[int | None] = [None] * 4
    quadrants = [q for q in range(4) if g.processors >> QUADRANT * q & 0xFFFF]
    for q in quadrants:
        used = memory.setdefault(q, [])
        if g.broadcast:
            used += [UNSET] * (-len(used) % INSTANCE)
        offsets[q] = len(used)
    processors = g.processors if g.broadcast else _moved_gap(g.processors)
    first, last = ffs(processors), processors.bit_length() - 1
    if g.broadcast:
        last = (last + QUADRANT & ~(QUADRANT - 1)) - 1
    if g.broadcast or len(quadrants) > 1:
        first &= ~(QUADRANT - 1)
    columns = _passes(g, bias, processors, first, last)
    group = 0
    for row in columns:
        for p in range(first, last + 1):
            group = p // QUADRANT
            src = (_broadcast_order(p) if g.broadcast else p) - first
            memory.setdefault(group, []).append(row[src] if src < len(row) else UNSET)
    while memory[group] and memory[group][-1] is UNSET:
        memory[group].pop()
    return LayerBias(-1, -1, tuple(offsets))


def _passes(g: Geometry, bias: np.ndarray, processors: int, first: int, last: int
            ) -> list[list[int | None]]:
    """The biases pass by pass, one per processor slot from `first` to `last`: a gap in
    the processor map takes no channel."""
    thresh = g.out_expand_thresh
    padded: list[int | None] = [int(v) for v in bias]
    padded += [UNSET] * (g.out_expand * thresh - len(bias))
    columns: list[list[int | None]] = [padded[e * thresh:(e + 1) * thresh]
                                       for e in range(g.out_expand)]
    for proc in range(first, last + 1):
        if not processors >> proc & 1:
            for row in columns:
                row.insert(proc - first, UNSET)
    return columns


def place(layers: list[Geometry], biases: list[np.ndarray | None], groups: list[int],
          pinned: list[int | None], size: int, flatten_first: bool = True,
          shared: Sequence[int] | None = None, stream_gap: bool = False
          ) -> tuple[dict[int, list[int]], list[LayerBias | None]]:
    """(quadrant -> bytes, each layer's bias slot or None). `biases` are the int8 values,
    `groups` the quadrants the network uses, `pinned` a layer's manifest `bias_group`,
    `shared[i]` the layer whose stored bias layer i uses (itself unless a duplicate)."""
    shared = shared or range(len(layers))
    demands = []
    spread: dict[int, list[int | None]] = {}
    slots: list[LayerBias | None] = [None] * len(layers)
    for i, (g, bias) in enumerate(zip(layers, biases, strict=True)):
        if bias is not None and np.any(bias != 0) and g.depthwise and shared[i] == i:
            slots[i] = depthwise(g, bias, spread)
    for i, (g, bias) in enumerate(zip(layers, biases, strict=True)):
        if bias is None or not np.any(bias != 0) or g.depthwise or shared[i] != i:
            continue
        given = pinned[i]
        allowed = tuple(groups) if given is None else (given,)
        demands.append(BiasDemand(i, allowed, g.out_channels + lead_bytes(
            g.output_processors, g.out_channels) + _gap(g, i, stream_gap),
            g.flatten and flatten_first))
    used = {q: len(spread.get(q, ())) for q in range(4)}
    fitted, short = fit(demands, size, used)
    if short is not None or any(n > size for n in used.values()):
        name = layers[short.index].name if short is not None else "a depthwise layer"
        raise ValueError(f"layer {name!r}: bias memory exhausted")
    for d in demands:
        group, offset = fitted[d.index]
        slots[d.index] = LayerBias(group, offset)
        used[group] = max(used[group], offset + d.length)
    image = _image(layers, biases, slots, used, spread, stream_gap)
    return image, [slots[shared[i]] for i in range(len(layers))]


def _gap(g: Geometry, index: int, stream_gap: bool) -> int:
    """Bytes before the layer's bias values in its slot: 1 for a streaming first layer on a
    device with the stream bias fault."""
    return int(stream_gap and index == 0 and g.streaming)


def _image(layers: list[Geometry], biases: list[np.ndarray | None],
           slots: list[LayerBias | None], used: dict[int, int],
           spread: dict[int, list[int | None]], stream_gap: bool) -> dict[int, list[int]]:
    image = {q: [0] * n for q, n in used.items() if n}
    for q, values in spread.items():
        for k, value in enumerate(values):
            if value is not UNSET:
                image[q][k] = int(value) & 0xFF
    for i, (g, bias, slot) in enumerate(zip(layers, biases, slots, strict=True)):
        if slot is None or bias is None or slot.offsets is not None:
            continue
        start = slot.offset + ffs(g.output_processors) % INSTANCE * g.out_expand \
            + _gap(g, i, stream_gap)
        for k, value in enumerate(bias):
            image[slot.group][start + k] = int(value) & 0xFF
    return image
