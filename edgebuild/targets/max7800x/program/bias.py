"""Bias memory: one 8-bit value per output channel, where the placement put the layer's slot.

The placement decides every slot (placement.biasmemory, the vendor's rule: depthwise layers'
parts in every quadrant they read with first, then first-fit decreasing; with the weight
values, all-zero biases left out and equal ones stored once), so maps.txt and the report show
what this image holds. This module only writes the values: an ordinary layer's after the
slot's lead bytes (its first output processor's place in its memory instance, and MAX78000's
zero before a streaming first layer's bias), a depthwise layer's in each quadrant's part in
the order placement.biasmemory.depthwise_order gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgebuild.targets.max7800x.placement.biasmemory import depthwise_order
from edgebuild.targets.max7800x.placement.records import BiasSlot
from edgebuild.targets.max7800x.program.geometry import Geometry


@dataclass(frozen=True)
class LayerBias:
    """What the registers need of a layer's slot: quadrant and offset, or for a depthwise
    layer the offset in each quadrant (None: unused)."""

    group: int
    offset: int
    offsets: tuple[int | None, ...] | None = None


def register_view(slot: BiasSlot | None) -> LayerBias | None:
    if slot is None:
        return None
    if not slot.parts:
        return LayerBias(slot.group, slot.offset)
    offsets: list[int | None] = [None] * 4
    for q, offset, _ in slot.parts:
        offsets[q] = offset
    return LayerBias(-1, -1, tuple(offsets))


def image(layers: Sequence[Geometry], biases: Sequence[np.ndarray | None],
          slots: Sequence[BiasSlot | None]) -> dict[int, list[int]]:
    """quadrant -> its bytes: each stored bias's values (the int8 values in `biases`) in its
    slot, zeros elsewhere, up to the last byte any slot takes."""
    used: dict[int, int] = {}
    for slot in slots:
        for q, offset, length in slot.quadrants() if slot is not None else ():
            used[q] = max(used.get(q, 0), offset + length)
    out = {q: [0] * n for q, n in used.items() if n}
    for g, bias, slot in zip(layers, biases, slots, strict=True):
        if slot is None or bias is None:
            continue
        if slot.parts:
            order = depthwise_order(g.processors, g.out_channels, g.broadcast)
            for q, offset, _ in slot.parts:
                for k, channel in enumerate(order[q]):
                    if channel is not None:
                        out[q][offset + k] = int(bias[channel]) & 0xFF
            continue
        start = slot.offset + slot.lead
        for k, value in enumerate(bias):
            out[slot.group][start + k] = int(value) & 0xFF
    return out
