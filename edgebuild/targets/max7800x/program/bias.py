"""Bias memory: one 8-bit value per output channel, in the bias memory of one quadrant.

The quadrant is chosen like the vendor's synthesis tool does (a first-fit-decreasing bin
packing): a flattening layer first (MAX78000 requires its bias first in a quadrant; on
MAX78002 it is sorted like any other), then layers allowed in one quadrant only, then by length,
longest first (ties keep network order); each goes to the allowed quadrant with the fewest
bytes used so far, at the end of what that quadrant holds. A layer whose output starts at
processor p within its memory instance reserves p x passes leading bytes (the hardware reads
the bias of output processor k at offset + k). A bias that is all zeros is not stored at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgebuild.targets.max7800x.program.geometry import Geometry
from edgebuild.targets.max7800x.program.kernels import ffs

INSTANCE = 4


@dataclass(frozen=True)
class LayerBias:
    group: int
    offset: int


def place(layers: list[Geometry], biases: list[np.ndarray | None], groups: list[int],
          pinned: list[int | None], size: int, flatten_first: bool = True
          ) -> tuple[dict[int, list[int]], list[LayerBias | None]]:
    """(quadrant -> bytes, each layer's bias slot or None). `biases` are the int8 values,
    `groups` the quadrants the network uses, `pinned` a layer's manifest `bias_group`."""
    wanted = []
    for i, (g, bias) in enumerate(zip(layers, biases, strict=True)):
        if bias is None or not np.any(bias != 0):
            continue
        given = pinned[i]
        allowed = groups if given is None else [given]
        lead = ffs(g.output_processors) % INSTANCE * g.out_expand
        wanted.append((i, allowed, g.out_channels + lead, g.flatten and flatten_first))
    wanted.sort(key=lambda e: -1 if e[3] else 0 if len(e[1]) == 1 else size - e[2])
    used = dict.fromkeys(range(4), 0)
    slots: list[LayerBias | None] = [None] * len(layers)
    for i, allowed, length, _ in wanted:
        group = min(allowed, key=lambda q: (used[q], allowed.index(q)))
        if used[group] + length > size:
            raise ValueError(f"layer {layers[i].name!r}: bias memory exhausted")
        slots[i] = LayerBias(group, used[group])
        used[group] += length
    return _image(layers, biases, slots, used), slots


def _image(layers: list[Geometry], biases: list[np.ndarray | None],
           slots: list[LayerBias | None], used: dict[int, int]) -> dict[int, list[int]]:
    image = {q: [0] * n for q, n in used.items() if n}
    for g, bias, slot in zip(layers, biases, slots, strict=True):
        if slot is None or bias is None:
            continue
        start = slot.offset + ffs(g.output_processors) % INSTANCE * g.out_expand
        for k, value in enumerate(bias):
            image[slot.group][start + k] = int(value) & 0xFF
    return image
