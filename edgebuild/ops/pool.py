"""pool1d / pool2d: max or average pooling — standalone, and the rule every pooling fused
into a convolution's input (`pool:`) and the global pooling of ops.global_pool follow too.

Integer rule: max pooling is exact; average pooling divides the integer sum by the window
size with the rounding mode's pooling rule (half_up, floor, or a device's trunc), see
numerics.np_divide_round. The torch fake-quant path rounds avg * 128 the same way, which is
exact in float64.

A standalone pool's window may be as large as the C kernel's int16 fields hold (32767 per
axis, MAX_WINDOW values in all: eb_pool2d's int32 sum and rounding, 2 x sum + count, stay in
range); a convolution's fused `pool:` keeps the smaller limit of ops.operator.Pair. A device
with smaller pooling hardware says so at `check` (targets.max7800x.limits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal, Protocol

from pydantic import Field

from edgebuild.core import numerics
from edgebuild.core.geometry import (
    IntPair,
    Shape,
    ShapeError,
    Window,
    expect_rank,
    pair,
    pool_plane,
    pooled,
    window_out,
    window_sizes,
)
from edgebuild.ops.c import CCode, CStep, pool_call, pool_params
from edgebuild.ops.onnxcode import (
    INT8,
    INT64,
    Attribute,
    Form,
    OnnxCode,
    OnnxStep,
    divide_round,
    round_float,
)
from edgebuild.ops.operator import (
    C,
    Example,
    G,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    PadPair,
    PoolMode,
    Role,
    Torch,
    no_macs,
    no_params,
)

if TYPE_CHECKING:
    import torch
    from numpy.typing import NDArray

    from edgebuild.ops.operator import Ints

# The C kernel's eb_pool_params hold sizes and strides as int16 (eb_kernels.h).
AXIS_LIMIT = 32767
# Values in one window of eb_pool2d: its int32 rounding 2 x sum + count stays below 2^31
# (|sum| <= 128 x count). A larger average is a global_pool's (64-bit where it must be).
MAX_WINDOW = 1 << 23

Size = Annotated[int, Field(strict=True, ge=1, le=AXIS_LIMIT)]
SizePair = Size | tuple[Size, Size]


class Pool1d(LayerBase):
    op: Literal["pool1d"]
    mode: PoolMode
    size: Size
    stride: Size | None = Field(default=None, description="defaults to size")


class Pool2d(LayerBase):
    op: Literal["pool2d"]
    mode: PoolMode
    size: SizePair
    stride: SizePair | None = Field(default=None, description="defaults to size")
    pad: PadPair = Field(
        default=0, description="padding before (top, left), as TensorFlow's SAME padding: a "
        "window counts the input's values only; only in TFLite's number format")
    pad_end: PadPair | None = Field(
        default=None, description="padding after (bottom, right) when it differs from `pad`; "
        "only in TFLite's number format")


class PoolingWindow(Protocol):
    """What the pooling rule reads of a window: a fused `pool:` (FusedPool), a pool
    layer's (`window`) or a global pool's (ops.global_pool)."""

    @property
    def mode(self) -> PoolMode: ...

    @property
    def size(self) -> IntPair: ...

    @property
    def stride(self) -> IntPair | None: ...


@dataclass(frozen=True)
class Pooling:
    """A pooling window built in code (not read from a manifest, so not validated against
    the fused pool's smaller limits)."""

    mode: PoolMode
    size: IntPair
    stride: IntPair | None = None


def window(layer: Pool1d | Pool2d) -> Pooling:
    return Pooling(layer.mode, layer.size, layer.stride)


def map_window(mode: PoolMode, in_shape: Shape) -> Pooling:
    """The window of a global pool over `in_shape`: its whole map, one window. Its stride
    moves it nowhere, so it is chosen square (the longest side) as pooling hardware with
    one stride for both axes (MAX7800x) takes it."""
    spatial = tuple(in_shape[1:])
    if len(spatial) == 1:
        return Pooling(mode, spatial[0])
    side = max(spatial[0], spatial[1])
    return Pooling(mode, (spatial[0], spatial[1]), (side, side))


class GlobalPooling(Protocol):
    """A global pool's layer record (ops.global_pool.GlobalPool; that module imports this
    one)."""

    @property
    def mode(self) -> PoolMode: ...


def pool_window(layer: Pool1d | Pool2d | GlobalPooling, in_shape: Shape) -> Pooling:
    """The window of a standalone pooling layer over `in_shape`: a pool layer's own, or a
    global pool's whole map (for code outside ops that handles both alike: the MAX7800x
    layer mapping and network description)."""
    if isinstance(layer, Pool1d | Pool2d):
        return window(layer)
    return map_window(layer.mode, in_shape)


# --- the pooling rule (shared with fused pooling) -------------------------------------------

def torch_pool(x: torch.Tensor, pool: PoolingWindow | None, dims: int,
               mode: Mode) -> torch.Tensor:
    import torch.nn.functional as F

    if pool is None:
        return x
    sizes, strides = window_sizes(pool, dims)
    if pool.mode.value == "max":
        fn = F.max_pool1d if dims == 1 else F.max_pool2d
        return fn(x, sizes, strides)
    average = F.avg_pool1d if dims == 1 else F.avg_pool2d
    out = average(x, sizes, strides)
    if mode.kind == "qat":
        out = numerics.torch_pool_round(out * numerics.ACT_SCALE, mode.rounding) / numerics.ACT_SCALE
    return out


def windows(x: NDArray[G], sizes: Sequence[int], strides: Sequence[int],
            dilation: Sequence[int] | None = None,
            pad: Sequence[int] | None = None) -> NDArray[G]:
    """View of x (N, C, *spatial) as (N, C, *out_spatial, *kernel) windows (int64 safe)."""
    import numpy as np

    dims = len(sizes)
    dilation = dilation or (1,) * dims
    if pad and any(pad):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    spans = tuple(d * (k - 1) + 1 for k, d in zip(sizes, dilation, strict=True))
    view = np.lib.stride_tricks.sliding_window_view(x, spans, axis=tuple(range(2, 2 + dims)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dilation)
    return view[index]


def reference_pool(x: Ints, pool: PoolingWindow | None, dims: int, rounding: str) -> Ints:
    if pool is None:
        return x
    sizes, strides = window_sizes(pool, dims)
    view = windows(x, sizes, strides)
    axes = tuple(range(-dims, 0))
    if pool.mode.value == "max":
        return view.max(axis=axes)
    count = 1
    for s in sizes:
        count *= s
    return numerics.np_divide_round(view.sum(axis=axes), count, rounding)


def onnx_pool(code: OnnxCode, pool: PoolingWindow | None, dims: int, form: Form, rounding: str,
              channels: int) -> OnnxCode:
    """The pooling rule in ONNX: MaxPool in every form (exact on int8); average pooling
    AveragePool in float, rounded to the 1/128 grid by the mode's pooling rule in the
    fake-quant form (as torch_pool), and in the integer form an exact sum (a depthwise
    ConvInteger of ones: onnxruntime has no integer AveragePool) divided with that rule."""
    if pool is None:
        return code
    import numpy as np

    sizes, strides = window_sizes(pool, dims)
    geometry: dict[str, Attribute] = {"kernel_shape": tuple(sizes), "strides": tuple(strides)}
    if pool.mode.value == "max":
        return code.then("MaxPool", **geometry)
    if form is not Form.int8:
        code = code.then("AveragePool", **geometry)
        if form is Form.float:
            return code
        code = round_float(code.then("Mul", np.array(numerics.ACT_SCALE, np.float32)),
                           numerics.pool_rounding(rounding))
        return code.then("Mul", np.array(1 / numerics.ACT_SCALE, np.float32))
    ones = np.ones((channels, 1, *sizes), dtype=np.int8)
    code = code.then("ConvInteger", ones, group=channels, **geometry).then("Cast", to=INT64)
    return divide_round(code, int(np.prod(sizes)), rounding).then("Cast", to=INT8)


# --- the pool1d / pool2d operators ----------------------------------------------------------

def _dims(layer: Pool1d | Pool2d) -> int:
    return 1 if layer.op == "pool1d" else 2


def pads(layer: Pool1d | Pool2d) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, left), (bottom, right)) padding of a pool2d (a pool1d has none)."""
    start = getattr(layer, "pad", 0)
    end = getattr(layer, "pad_end", None)
    return pair(start), pair(start if end is None else end)


def out_shape(layer: Pool1d | Pool2d, shapes: Sequence[Shape]) -> Shape:
    dims = _dims(layer)
    expect_rank(shapes[0], dims + 1, layer.op)
    sizes, strides = window_sizes(window(layer), dims)
    if math.prod(sizes) > MAX_WINDOW:
        raise ShapeError(f"a window of {math.prod(sizes)} values is more than a pool layer's "
                         f"{MAX_WINDOW}; a global_pool averages any number")
    start, end = pads(layer)
    if dims == 1 or not any(start + end):
        return pooled(shapes[0], window(layer), dims)
    if any(b >= k or e >= k for b, e, k in zip(start, end, sizes, strict=True)):
        raise ShapeError(f"padding {list(start)} before and {list(end)} after is not less than "
                         f"the window {list(sizes)}: a window would hold padding only")
    # padding on both sides: window_out takes `start` twice, so the size gains end - start
    return (shapes[0][0], *(window_out(n + e - b, k, s, b) for n, k, s, b, e in
                            zip(shapes[0][1:], sizes, strides, start, end, strict=True)))


def forward(layer: Pool1d | Pool2d, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return torch_pool(inputs[0], window(layer), _dims(layer), mode)


def reference(layer: Pool1d | Pool2d, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    return reference_pool(inputs[0], window(layer), _dims(layer), rounding)


def emit(step: CStep[Pool1d | Pool2d]) -> CCode:
    """eb_pool2d, whole or tiled (a tiled 1-D pool runs as a column, like a convolution)."""
    plane = pool_plane(window(step.layer), step.in_shapes[0], vertical=step.tile is not None)
    decl = pool_params(step.symbol("Q"), plane, step.layer.mode, step.rounding)
    return CCode((decl,)) + pool_call(step.symbol("Q"), step.symbol("T_TILE"), step.tile,
                                     step.double_buffer, step.inputs[0], step.output,
                                     step.optimized, step.layer.mode.value)


def onnx_emit(step: OnnxStep[Pool1d | Pool2d]) -> OnnxCode:
    return onnx_pool(step.start(), window(step.layer), _dims(step.layer), step.form,
                     step.rounding, step.in_shapes[0][0]).named(step.output)


def tile_windows(layer: Pool1d | Pool2d, in_shapes: Sequence[Shape],
                 out: Shape) -> tuple[tuple[str, Window], ...]:
    plane = pool_plane(window(layer), in_shapes[0], vertical=True)
    return (("tile", Window(**vars(plane), weights=False)),)



# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE_1D = Example((2, 16), (
    {"name": "p", "op": "pool1d", "mode": "max", "size": 2},
))
EXAMPLE_2D = Example((2, 6, 6), (
    {"name": "p", "op": "pool2d", "mode": "avg", "size": 2},
))


def _operator(name: str, params: type[LayerBase], example: Example) -> Operator:
    return Operator(
        name, params, "one", Role.data, out_shape, no_params, no_macs,
        example=example,
        torch=Torch(forward), reference=reference, c=C(emit), onnx=Onnx(onnx_emit),
        windows=tile_windows)


OPERATOR_1D = _operator("pool1d", Pool1d, EXAMPLE_1D)
OPERATOR_2D = _operator("pool2d", Pool2d, EXAMPLE_2D)
