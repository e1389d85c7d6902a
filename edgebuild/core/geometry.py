"""Shapes and sliding windows: the arithmetic every operator, planner and code generator
shares, written once.

Tensor layout (every stage after `validate`): channels first, no batch dimension — `(C,)`
for flat features, `(C, L)` for 1-D signals, `(C, H, W)` for images.

The C kernels compute on a plane. A 1-D signal `(C, L)` is the same bytes as `(C, 1, L)` and
as `(C, L, 1)`: it runs as one row (`1 x L`), or — when it is tiled through L1, so that tiles
of output rows are spans of time — as one column (`L x 1`). `Plane` is a convolution's or a
pooling window's geometry on that plane, `plane` lays any layer out in one orientation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

Shape = tuple[int, ...]
IntPair = int | tuple[int, int]


class ShapeError(ValueError):
    """A layer cannot accept the shapes it is given; the message names what is wrong."""


class PoolWindow(Protocol):
    """A pooling window as the manifest gives it (a fused `pool:` or a pool layer). Read
    only: the manifest's records are frozen."""

    @property
    def size(self) -> IntPair: ...

    @property
    def stride(self) -> IntPair | None: ...


def pair(value: IntPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (value[0], value[1])


def single(value: IntPair, what: str) -> int:
    """A 1-D layer's window field: one integer."""
    if not isinstance(value, int):
        raise ShapeError(f"{what} must be a single integer for a 1-D layer")
    return value


def window_out(size: int, kernel: int, stride: int, pad: int = 0, dilation: int = 1) -> int:
    """Output length of a sliding window (floor mode, like PyTorch)."""
    span = dilation * (kernel - 1) + 1
    if size + 2 * pad < span:
        raise ShapeError(f"window of {span} is larger than the padded input length {size + 2 * pad}")
    return (size + 2 * pad - span) // stride + 1


def window_sizes(window: PoolWindow, dims: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sizes, strides) of a pooling window over the last `dims` axes (stride defaults to
    the size)."""
    if dims == 2:
        sizes: tuple[int, ...] = pair(window.size)
        strides = sizes if window.stride is None else pair(window.stride)
    else:
        sizes = (single(window.size, "pool.size"),)
        strides = sizes if window.stride is None else (single(window.stride, "pool.stride"),)
    return sizes, strides


def pooled(shape: Shape, window: PoolWindow | None, dims: int) -> Shape:
    """Shape after a (fused or standalone) pooling window over the last `dims` axes."""
    if window is None:
        return shape
    sizes, strides = window_sizes(window, dims)
    spatial = tuple(window_out(n, k, s) for n, k, s in zip(shape[1:], sizes, strides, strict=True))
    return (shape[0], *spatial)


def expect_rank(shape: Shape, rank: int, op: str) -> None:
    names = {1: "(features)", 2: "(channels, length)", 3: "(channels, height, width)"}
    if len(shape) != rank:
        raise ShapeError(f"{op} expects an input of shape {names[rank]}, got {list(shape)}")


def spatial(shape: Shape, vertical: bool = False) -> tuple[int, int]:
    """(height, width) of a channels-first shape on the plane (see the module docstring)."""
    if len(shape) == 3:
        return shape[1], shape[2]
    if len(shape) == 1:
        return 1, 1
    return (shape[1], 1) if vertical else (1, shape[1])


@dataclass(frozen=True)
class Plane:
    """A convolution or pooling window laid on the plane: what every C kernel's parameter
    struct, the L1 tiler and the training kernels read. A pooling window treats channels
    independently (`groups` = channels, no padding)."""

    in_c: int
    in_h: int
    in_w: int
    out_c: int
    out_h: int
    out_w: int
    k_h: int = 1
    k_w: int = 1
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dil_h: int = 1
    dil_w: int = 1
    groups: int = 1


def _lay(values: tuple[int, ...], other: int, vertical: bool) -> tuple[int, int]:
    """A per-axis field on the plane: 2-D as is; 1-D on one axis, `other` on the other."""
    if len(values) == 2:
        return values[0], values[1]
    return (values[0], other) if vertical else (other, values[0])


def plane(in_shape: Shape, out_shape: Shape, kernel: tuple[int, ...] = (1,),
          stride: tuple[int, ...] = (1,), pad: tuple[int, ...] = (0,),
          dilation: tuple[int, ...] = (1,), groups: int = 1, vertical: bool = False) -> Plane:
    """The Plane of a window with per-axis `kernel`, `stride`, `pad`, `dilation` (one value
    per spatial axis of `in_shape`: one for 1-D, two for 2-D)."""
    (in_h, in_w), (out_h, out_w) = spatial(in_shape, vertical), spatial(out_shape, vertical)
    k, s, p, d = (_lay(v, o, vertical) for v, o in ((kernel, 1), (stride, 1), (pad, 0),
                                                    (dilation, 1)))
    return Plane(in_shape[0], in_h, in_w, out_shape[0], out_h, out_w, k[0], k[1], s[0], s[1],
                 p[0], p[1], d[0], d[1], groups)


def pool_plane(window: PoolWindow, in_shape: Shape, vertical: bool = False) -> Plane:
    """The Plane of a pooling window over `in_shape` (channels independent)."""
    dims = len(in_shape) - 1
    sizes, strides = window_sizes(window, dims)
    return plane(in_shape, pooled(in_shape, window, dims), sizes, strides,
                 groups=in_shape[0], vertical=vertical)


@dataclass(frozen=True)
class Window(Plane):
    """A layer as the L1 tiler (memory.tiling) sees it: its plane and what its working set
    holds — weights or not (a pool), a wide (int32) output, a bias, a linear layer's whole
    input staged once per slot, a transposed convolution's own stride and pad. `split`: on a
    target with the split kernels (columns built once, then weights streamed: the optimized
    Cortex-M4 kernels), the pass runs in the split L1 layout (eb_tiling.h), as its op's C
    emitter decides. `banded`: on such a target a depthwise 3x3 pass (one input channel too)
    runs banded instead: its L1 is the depthwise kernel's padded copy of one channel's rows
    (memory.tiling.banded_l1); `pooled`: its input is a fused 2x2 stride-2 max pool's
    output, which that copy pools on the way (a banded pool Window: that pool, no pass of
    its own there)."""

    weights: bool = True
    wide: bool = False
    bias: bool = False
    linear: bool = False
    transposed: bool = False
    split: bool = False
    banded: bool = False
    pooled: bool = False
