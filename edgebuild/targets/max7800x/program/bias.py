"""Bias memory: one 8-bit value per output channel, in the bias memory of one quadrant.

The quadrant and offset come from the placement's rule (placement.biasmemory.fit, the
vendor's first-fit decreasing, shared with validation and maps.txt), over the biases that
are stored: a bias that is all zeros is not stored at all. A flattening layer goes first
where the device requires its bias first in a quadrant (MAX78000; on MAX78002 it is sorted
like any other: `flatten_first`).

A streaming first layer's bias on MAX78000 starts one byte into its slot, behind a zero
(`stream_gap`): the vendor's tool works around a fault of that part this way, and the slot is
one byte longer.
"""

from __future__ import annotations

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


def place(layers: list[Geometry], biases: list[np.ndarray | None], groups: list[int],
          pinned: list[int | None], size: int, flatten_first: bool = True,
          stream_gap: bool = False) -> tuple[dict[int, list[int]], list[LayerBias | None]]:
    """(quadrant -> bytes, each layer's bias slot or None). `biases` are the int8 values,
    `groups` the quadrants the network uses, `pinned` a layer's manifest `bias_group`."""
    demands = []
    for i, (g, bias) in enumerate(zip(layers, biases, strict=True)):
        if bias is None or not np.any(bias != 0):
            continue
        given = pinned[i]
        allowed = tuple(groups) if given is None else (given,)
        demands.append(BiasDemand(i, allowed, g.out_channels + lead_bytes(
            g.output_processors, g.out_channels) + _gap(g, i, stream_gap),
            g.flatten and flatten_first))
    fitted, short = fit(demands, size)
    if short is not None:
        raise ValueError(f"layer {layers[short.index].name!r}: bias memory exhausted")
    slots: list[LayerBias | None] = [None] * len(layers)
    used = dict.fromkeys(range(4), 0)
    for d in demands:
        group, offset = fitted[d.index]
        slots[d.index] = LayerBias(group, offset)
        used[group] = max(used[group], offset + d.length)
    return _image(layers, biases, slots, used, stream_gap), slots


def _gap(g: Geometry, index: int, stream_gap: bool) -> int:
    """Bytes before the layer's bias values in its slot: 1 for a streaming first layer on a
    device with the stream bias fault."""
    return int(stream_gap and index == 0 and g.streaming)


def _image(layers: list[Geometry], biases: list[np.ndarray | None],
           slots: list[LayerBias | None], used: dict[int, int], stream_gap: bool
           ) -> dict[int, list[int]]:
    image = {q: [0] * n for q, n in used.items() if n}
    for i, (g, bias, slot) in enumerate(zip(layers, biases, slots, strict=True)):
        if slot is None or bias is None:
            continue
        start = slot.offset + ffs(g.output_processors) % INSTANCE * g.out_expand \
            + _gap(g, i, stream_gap)
        for k, value in enumerate(bias):
            image[slot.group][start + k] = int(value) & 0xFF
    return image
