"""L1 tiles of the training passes: how each convolution and pooling pass of a training step
(forward, input gradient, weight gradient) runs within `target.memory.l1`.

A pass whose whole working set (every operand of the whole batch) fits L1 runs untiled,
on its L2 buffers: on the Cortex-M4, whose SRAM is one memory, staging it whole would copy
every byte twice for no reuse. A pass that does not fit runs tile by tile through the L1
buffer of the generated code (templates/train/eb_train_tiles.h: a tile is one sample, a
block of output channels and a block of output rows; its input window is every input row
the block's taps read). This module sizes the tiles with the byte formulas of that header,
per operand region:
- conv forward: x window, w, b, y block; input gradient: dy block, w, dx window (read and
  written back); weight gradient: dy block, x window and dw (with dw), db (with db);
- pool forward: x window, y block; backward: x window (max only), dy block, dx window.

Among the tiles that fit, the cheapest wins: the floats staged in and out over the pass
(a copy is about one instruction per float) plus `TILE_COST` per tile (the kernel's
set-up); for every channel count the most rows that fit (rows only add halo and restaged
weights when fewer). `l1_bytes` is the largest tile's working set (the whole pass's when
untiled), `traffic` the bytes moved between L2 and L1 over the pass, and `lower_bound`
what any tiling moves at least: every operand byte once each way it goes (the untiled
pass's traffic). A pass whose smallest tile (one row, the fewest channels) does not fit
raises TilingError, naming the layer, the pass and the bytes it needs.

Elementwise passes (activations, adds, concatenations, losses, the optimizer) read each
element once and write it once: like the inference plan's adds they stream between L2
buffers and are not tiled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgebuild.core.geometry import Plane

FLOAT = 4
TILE_COST = 300  # instructions a tile costs beyond its copies: calls, the kernel's set-up


class TilingError(ValueError):
    """A training pass cannot fit L1 even in its smallest tile; the message says which."""


@dataclass(frozen=True)
class Operands:
    """A pass's operand regions in L1 and how often each moves over L2 <-> L1 (a gradient
    read and written back moves twice) -- per side of the convolution."""

    inputs: int  # regions of the input side (x, dx) ...
    input_moves: int
    outputs: int  # ... of the output side (y, dy) ...
    output_moves: int
    weights: int  # ... weights (w, dw) ...
    weight_moves: int
    bias: int  # ... and bias (b, db)
    bias_moves: int


@dataclass(frozen=True)
class Pass:
    """How one pass runs: untiled (tiles = 1, whole) or `tiles` tiles of `rows` x `channels`
    per sample (memory.json `passes`; the generated code's ebt_tile)."""

    layer: str
    phase: str  # forward / input / weight (a conv's), pool_forward / pool_input
    kernel: str  # conv / pool
    tiled: bool
    rows: int  # output rows per tile
    channels: int  # output channels per tile
    tiles: int
    l1_bytes: int  # the largest tile's working set (the whole pass's when untiled)
    traffic: int  # bytes between L2 and L1 over the pass
    lower_bound: int  # bytes any tiling moves at least

    @property
    def symbol(self) -> str:
        """The generated code's ebt_tile of this pass."""
        return f"T_{self.layer}_{self.phase}"

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pass:
        return cls(**data)


def conv_operands(phase: str, bias: bool, weights: bool = True) -> Operands:
    """The operands of a convolution pass (eb_train_tiles.h's L1 layout)."""
    b = int(bias)
    if phase == "forward":
        return Operands(1, 1, 1, 1, 1, 1, b, b)
    if phase == "input":
        return Operands(1, 2, 1, 1, 1, 1, 0, 0)
    w = int(weights)
    return Operands(w, w, 1, 1, w, 2 * w, b, 2 * b)


def pool_operands(phase: str, mode: str) -> Operands:
    if phase == "pool_forward":
        return Operands(1, 1, 1, 1, 0, 0, 0, 0)
    maximum = int(mode == "max")
    return Operands(1 + maximum, 2 + maximum, 1, 1, 0, 0, 0, 0)


@dataclass(frozen=True)
class Geometry:
    """A pass's plane as the tiles see it: `m` output channels per group (1 for a pool),
    `per` input channels of one group, `taps` weights per output channel, `reach` input
    rows one output row reads (dil*(k - 1) + 1)."""

    plane: Plane
    n: int
    m: int
    per: int
    taps: int
    reach: int
    pad: int

    @classmethod
    def conv(cls, plane: Plane, n: int) -> Geometry:
        per = plane.in_c // plane.groups
        return cls(plane, n, plane.out_c // plane.groups, per, per * plane.k_h * plane.k_w,
                   plane.dil_h * (plane.k_h - 1) + 1, plane.pad_h)

    @classmethod
    def pool(cls, plane: Plane, n: int) -> Geometry:
        return cls(plane, n, 1, 1, 0, plane.k_h, 0)

    @property
    def grouped(self) -> bool:
        """Channel tiles keep to groups; a pool's plane has a group per channel."""
        return self.plane.groups > 1

    def inputs_of(self, channels: int) -> int:
        """Input channels a tile of `channels` output channels reads."""
        if not self.grouped:
            return self.plane.in_c
        return channels // self.m * self.per if channels % self.m == 0 else self.per

    def channel_counts(self) -> list[int]:
        """Channel tiles to try: whole groups or a part of one when grouped, else any
        count -- the divisors and powers of two of out_c."""
        out_c = self.plane.out_c
        if self.grouped:
            groups = out_c // self.m
            wholes = {self.m * k for k in _divisors(groups) | _powers(groups)}
            return sorted(wholes | _divisors(self.m))
        return sorted(_divisors(out_c) | _powers(out_c))

    def windows(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """(output rows, input window rows) of each row tile of `rows` rows."""
        p = self.plane
        starts = np.arange(0, p.out_h, rows)
        counts = np.minimum(rows, p.out_h - starts)
        top = starts * p.stride_h - self.pad
        last = np.minimum(p.in_h - 1, top + (counts - 1) * p.stride_h + self.reach - 1)
        first = np.maximum(0, top)
        return counts, np.maximum(0, last - first + 1)

    def tile(self, rows: int, channels: int, ops: Operands) -> tuple[int, int, int]:
        """(largest tile's floats, floats moved, tiles) of tiles of rows x channels."""
        p = self.plane
        counts, windows = self.windows(rows)
        largest, moved, tiles = 0, 0, 0
        full, rest = divmod(p.out_c, channels)
        for c, times in ((channels, full), (rest, 1 if rest else 0)):
            if not times:
                continue
            cin = self.inputs_of(c)
            inputs, outputs = cin * windows * p.in_w, c * counts * p.out_w
            sizes = (ops.inputs * inputs + ops.outputs * outputs + ops.weights * c * self.taps
                     + ops.bias * c)
            largest = max(largest, int(sizes.max()))
            moved += times * int((ops.input_moves * inputs + ops.output_moves * outputs).sum()
                                 + len(counts) * (ops.weight_moves * c * self.taps
                                                  + ops.bias_moves * c))
            tiles += times * len(counts)
        return largest, self.n * moved, self.n * tiles

    def whole(self, ops: Operands) -> tuple[int, int]:
        """(floats of the whole pass, floats it moves once each) untiled."""
        p = self.plane
        inputs, outputs = self.n * p.in_c * p.in_h * p.in_w, self.n * p.out_c * p.out_h * p.out_w
        weights, bias = p.out_c * self.taps, p.out_c
        size = (ops.inputs * inputs + ops.outputs * outputs + ops.weights * weights
                + ops.bias * bias)
        moved = (ops.input_moves * inputs + ops.output_moves * outputs
                 + ops.weight_moves * weights + ops.bias_moves * bias)
        return size, moved


def _divisors(n: int) -> set[int]:
    return {d for d in range(1, math.isqrt(n) + 1) if n % d == 0} | {
        n // d for d in range(1, math.isqrt(n) + 1) if n % d == 0}


def _powers(n: int) -> set[int]:
    return {1 << k for k in range(n.bit_length()) if 1 << k <= n}


_PHASES = {"forward": "forward pass", "input": "input gradient", "weight": "weight gradient",
           "pool_forward": "pooling", "pool_input": "pooling's input gradient"}


def plan(layer: str, phase: str, kernel: str, geometry: Geometry, ops: Operands,
         l1: int) -> Pass:
    """The pass untiled when it fits `l1` bytes, else its cheapest tiling."""
    size, moved = geometry.whole(ops)
    lower = FLOAT * moved
    p = geometry.plane
    if FLOAT * size <= l1:
        return Pass(layer, phase, kernel, False, p.out_h, p.out_c, 1, FLOAT * size, lower, lower)
    best: tuple[int, int, Pass] | None = None
    for channels in geometry.channel_counts():
        rows = _most_rows(geometry, channels, ops, l1)
        if rows == 0:
            continue
        largest, floats, tiles = geometry.tile(rows, channels, ops)
        cost = floats + TILE_COST * tiles
        found = Pass(layer, phase, kernel, True, rows, channels, tiles, FLOAT * largest,
                     FLOAT * floats, lower)
        if best is None or (cost, tiles) < best[:2]:
            best = (cost, tiles, found)
    if best is None:
        smallest = min(geometry.channel_counts())
        need = FLOAT * geometry.tile(1, smallest, ops)[0]
        raise TilingError(
            f"layer '{layer}': its {_PHASES[phase]} needs {need} bytes of L1 for its smallest "
            f"tile (1 output row of {smallest} channel{'s' * (smallest > 1)}), more than "
            f"target.memory.l1 = {l1}; raise target.memory.l1 or train fewer layers "
            f"(ondevice.trainable)")
    return best[2]


def _most_rows(geometry: Geometry, channels: int, ops: Operands, l1: int) -> int:
    """The most output rows per tile of `channels` channels that fit `l1` (0: none)."""
    lo, hi = 0, geometry.plane.out_h
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if FLOAT * geometry.tile(mid, channels, ops)[0] <= l1:
            lo = mid
        else:
            hi = mid - 1
    return lo
