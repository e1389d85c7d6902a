"""The L1 tiler: for each layer, tiles whose working set fits the L1 budget.

A layer whose whole working set (input + weights + bias + output) fits L1 is not tiled.
Otherwise it runs tile by tile through the C driver in templates/kernels/eb_tiling.c; a
tile is a block of output rows x output channels, and its L1 slot holds the input rows it
needs (the halo of the window, zero padding materialized), its weights, bias and output —
the byte formula below is the one documented in eb_tiling.h. With double buffering two
slots alternate. Among the tiles that fit, the one moving the fewest bytes between L2 and
L1 wins (then the fewest tiles). Add and concat stream between L2 tensors (no reuse).

A transposed convolution tiles the same way, but a block of output rows reads the input
rows that reach it through some tap: at most (rows - 1 + dil*(k - 1)) // stride + 1 of them
(`input_rows`), fewer at the borders (`transposed_span`); they are staged unpadded (its
kernel skips taps that fall outside the input), as eb_tiling.h documents.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgebuild.ops.operator import pair


def _a4(n: int) -> int:
    return (n + 3) // 4 * 4


@dataclass(frozen=True)
class Window:
    """The geometry of a conv or pool over (C, H, W); 1-D layers have H = 1."""

    in_c: int
    in_h: int
    in_w: int
    out_c: int
    out_h: int
    out_w: int
    k_h: int
    k_w: int
    stride_h: int
    pad_h: int
    pad_w: int
    dil_h: int
    groups: int  # conv groups (pool: channels are independent, like groups = channels)
    weights: bool  # conv (True) or pool (False)
    wide: bool
    bias: bool
    linear: bool = False  # the whole input is staged once per slot, not per tile
    transposed: bool = False  # a transposed convolution (stride_h, pad_h of its definition)

    @property
    def in_per_group(self) -> int:
        return self.in_c // self.groups

    @property
    def step(self) -> int:
        """Channel tiles are multiples of this: 1 for dense convs and pools."""
        return self.out_c // self.groups if self.weights and self.groups > 1 else 1

    def tile_inputs(self, channels: int) -> int:
        """Input channels a tile of `channels` output channels reads."""
        if not self.weights:
            return channels
        return self.in_c if self.groups == 1 else channels // self.step * self.in_per_group


@dataclass(frozen=True)
class Tile:
    layer: str
    rows: int
    channels: int
    tiles: int
    slot_bytes: int
    l1_bytes: int
    bytes_in: int  # L2 -> L1
    bytes_out: int  # L1 -> L2
    tiled: bool


def input_rows(w: Window, rows: int) -> int:
    """Input rows of a tile slot for `rows` output rows (the largest a tile can read)."""
    if w.transposed:
        return min(w.in_h, (rows - 1 + w.dil_h * (w.k_h - 1)) // w.stride_h + 1)
    k = w.dil_h * (w.k_h - 1) + 1 if w.weights else w.k_h
    return (rows - 1) * w.stride_h + k


def transposed_span(w: Window, y0: int, rows: int) -> tuple[int, int]:
    """(first, count): the input rows output rows [y0, y0 + rows) of a transposed convolution
    read. Output row y takes input row i through tap k when y + pad = i * stride + k * dil."""
    first = max(0, -(-(y0 + w.pad_h - w.dil_h * (w.k_h - 1)) // w.stride_h))
    last = min(w.in_h - 1, (y0 + rows - 1 + w.pad_h) // w.stride_h)
    return first, max(0, last - first + 1)


def slot_bytes(w: Window, rows: int, channels: int) -> int:
    """L1 bytes of one tile slot (eb_tiling.h layout; every region 4-byte aligned)."""
    if not w.weights:
        return _a4(channels * input_rows(w, rows) * w.in_w) + _a4(channels * rows * w.out_w)
    cin = w.tile_inputs(channels)
    data = _a4(cin * input_rows(w, rows) * (w.in_w + (0 if w.transposed else 2 * w.pad_w)))
    weight = _a4(channels * w.in_per_group * w.k_h * w.k_w)
    bias = 4 * channels if w.bias else 0
    out = _a4(channels * rows * w.out_w * (4 if w.wide else 1))
    return data + weight + bias + out


def traffic(w: Window, rows: int, channels: int, slots: int = 1) -> tuple[int, int, int]:
    """(tiles, bytes L2 -> L1, bytes L1 -> L2) as eb_tiling.c moves them: each tile's valid
    input rows; weights and bias once per slot that serves a channel tile; outputs once."""
    tiles, moved_in = 0, 0
    for c0 in range(0, w.out_c, channels):
        ct = min(channels, w.out_c - c0)
        cin = w.tile_inputs(ct)
        row_tiles = 0
        for y0 in range(0, w.out_h, rows):
            r = min(rows, w.out_h - y0)
            top = y0 * w.stride_h - (w.pad_h if w.weights else 0)
            valid = transposed_span(w, y0, r)[1] if w.transposed else \
                max(0, min(top + input_rows(w, r), w.in_h) - max(top, 0))
            moved_in += cin * valid * w.in_w
            row_tiles += 1
        if w.weights:
            moved_in += min(row_tiles, slots) * (ct * w.in_per_group * w.k_h * w.k_w +
                                                 (4 * ct if w.bias else 0))
        tiles += row_tiles
    if w.linear:  # the input stays staged in each slot across output tiles
        moved_in -= (tiles - min(tiles, slots)) * w.in_c
    out = w.out_c * w.out_h * w.out_w * (4 if w.wide else 1)
    return tiles, moved_in, out


def whole(w: Window) -> int:
    """Working set of the untiled layer (everything resident at once)."""
    weight = (w.out_c * w.in_per_group * w.k_h * w.k_w + (4 * w.out_c if w.bias else 0)
              if w.weights else 0)
    return w.in_c * w.in_h * w.in_w + weight + w.out_c * w.out_h * w.out_w * (4 if w.wide else 1)


def choose(name: str, w: Window, l1: int, double_buffer: bool) -> Tile | None:
    """The untiled layer if it fits, else the fitting tile moving the fewest bytes."""
    if whole(w) <= l1:
        _, moved_in, out = traffic(w, w.out_h, w.out_c)
        return Tile(name, w.out_h, w.out_c, 1, whole(w), whole(w), moved_in, out, False)
    slots = 2 if double_buffer else 1
    best = None
    for channels in range(w.step, w.out_c + 1, w.step):
        for rows in range(1, w.out_h + 1):
            need = slots * slot_bytes(w, rows, channels)
            if need > l1:
                break
            tiles, moved_in, out = traffic(w, rows, channels, slots)
            key = (moved_in + out, tiles)
            if best is None or key < best[0]:
                best = (key, Tile(name, rows, channels, tiles, slot_bytes(w, rows, channels),
                                  need, moved_in, out, True))
    return None if best is None else best[1]


def smallest_l1(w: Window, double_buffer: bool) -> int:
    return (2 if double_buffer else 1) * slot_bytes(w, 1, w.step)


def conv_window(layer, in_shape, out_shape) -> Window:
    """1-D layers are tiled along time: they run as one column (L x 1), see codegen.
    conv_transpose2d keeps its own stride and pad (see `transposed_span`)."""
    one_d = len(in_shape) == 2
    kh, kw = (layer.kernel, 1) if one_d else pair(layer.kernel)
    sh = layer.stride if one_d else pair(layer.stride)[0]
    ph, pw = (layer.pad, 0) if one_d else pair(layer.pad)
    dh = layer.dilation if one_d else pair(layer.dilation)[0]
    in_h, in_w = (in_shape[1], 1) if one_d else in_shape[1:]
    out_h, out_w = (out_shape[1], 1) if one_d else out_shape[1:]
    return Window(in_shape[0], in_h, in_w, layer.out, out_h, out_w, kh, kw, sh, ph, pw, dh,
                  layer.groups, True, bool(layer.wide), bool(layer.bias),
                  transposed=layer.op == "conv_transpose2d")


def pooled_shape(pool, shape) -> tuple[int, ...]:
    from edgebuild.ops.operator import pooled

    return pooled(tuple(shape), pool, len(shape) - 1)


def pool_window(pool, in_shape, out_shape) -> Window:
    from edgebuild.ops.pooling import geometry

    dims = len(in_shape) - 1
    sizes, strides = geometry(pool, dims)
    kh, kw = (sizes[0], 1) if dims == 1 else sizes
    sh = strides[0]
    in_h, in_w = (in_shape[1], 1) if dims == 1 else in_shape[1:]
    out_h, out_w = (out_shape[1], 1) if dims == 1 else out_shape[1:]
    return Window(in_shape[0], in_h, in_w, in_shape[0], out_h, out_w, kh, kw, sh, 0, 0, 1,
                  in_shape[0], False, False, False)


def linear_window(layer, in_shape) -> Window:
    """A linear layer: a dense 1x1 'conv' over one position (input [in_f] staged whole)."""
    features = math.prod(in_shape)
    return Window(features, 1, 1, layer.out, 1, 1, 1, 1, 1, 0, 0, 1, 1, True,
                  bool(layer.wide), bool(layer.bias), linear=True)
