"""global_pool: max or average of each channel's whole map, of any size — (C, L) -> (C, 1),
(C, H, W) -> (C, 1, 1), as ONNX's GlobalAveragePool / GlobalMaxPool and PyTorch's
AdaptiveAvgPool(1) do — so that a classifier head needs no window size computed by hand.

An op of its own rather than a `size: global` of pool1d / pool2d: the window is a function
of the input shape, which every facet here receives, whereas a pool layer's `size` is a
number that code outside ops reads as it stands (the MAX7800x layer mapping and network
description, a convolution's fused `pool:`, which shares the window record). One op also
serves 1-D and 2-D maps.

Integer rule: pool.py's — the exact sum divided by the map size with the rounding mode's
pooling rule, or the exact maximum — so the reference, torch and ONNX reuse its pooling
functions with the whole map as the window. The C kernel is its own (eb_global_pool.c): a
channel's map is one contiguous run of n bytes, summed in 32-bit blocks into a 64-bit total,
so an average over any n neither overflows nor pays eb_pool2d's per-row loops; it runs from
L2 (each input byte is read once: an L1 tile would only add a copy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape, ShapeError, Window
from edgebuild.core.numerics import ACT_SCALE, pool_rounding
from edgebuild.ops.c import CCode, CStep, initializer, pool_mode_name, rounding_name
from edgebuild.ops.onnxcode import INT8, INT64, Form, OnnxCode, OnnxStep, divide_round, round_float
from edgebuild.ops.operator import (
    C,
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    PoolMode,
    Role,
    Torch,
    no_macs,
    no_params,
)
from edgebuild.ops.pool import map_window, reference_pool, torch_pool

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class GlobalPool(LayerBase):
    op: Literal["global_pool"]
    mode: PoolMode = Field(description="max or avg of each channel's whole map, of any size: "
                                       "(C, L) -> (C, 1), (C, H, W) -> (C, 1, 1)")


def out_shape(layer: GlobalPool, shapes: Sequence[Shape]) -> Shape:
    shape = tuple(shapes[0])
    if len(shape) not in (2, 3):
        raise ShapeError("global_pool expects an input of shape (channels, length) or "
                         f"(channels, height, width), got {list(shape)}")
    return (shape[0], *(1 for _ in shape[1:]))


def forward(layer: GlobalPool, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    """pool.torch_pool over the whole map: the fake-quant average rounds as a pool's."""
    x = inputs[0]
    dims = x.dim() - 2
    return torch_pool(x, map_window(layer.mode, (x.shape[1], *x.shape[2:])), dims, mode)


def reference(layer: GlobalPool, quant: None, inputs: Sequence[Ints], rounding: str) -> Ints:
    x = inputs[0]
    return reference_pool(x, map_window(layer.mode, x.shape[1:]), x.ndim - 2, rounding)


# --- C ------------------------------------------------------------------------------------

# The optimized global pool (eb_global_pool.h) by the name the layer calls use, or with
# -DEB_REFERENCE_KERNELS the reference one.
_MACROS = (4, """/* Global pooling: eb_global_pool_opt (word-wide sums and maxima, eb_global_pool.h);
 * -DEB_REFERENCE_KERNELS: the reference loop. */
#ifdef EB_REFERENCE_KERNELS
#define EB_GLOBAL_POOL(p, in, out) eb_global_pool(p, in, out)
#else
#define EB_GLOBAL_POOL(p, in, out) eb_global_pool_opt(p, in, out)
#endif

""")


def emit(step: CStep[GlobalPool]) -> CCode:
    """eb_global_pool (EB_GLOBAL_POOL with the optimized kernels) over the channels' maps:
    the kernel file is a path of its own (ops.c.PATH_FILES), copied only when used."""
    in_shape = step.in_shapes[0]
    decl = initializer("eb_global_pool_params", step.symbol("Q"), [
        ("c", in_shape[0]), ("n", math.prod(in_shape[1:])),
        ("mode", pool_mode_name(step.layer.mode)),
        ("rounding", rounding_name(pool_rounding(step.rounding)))])
    kernel = "EB_GLOBAL_POOL" if step.optimized else "eb_global_pool"
    return CCode((decl,), (f"{kernel}(&{step.symbol('Q')}, {step.inputs[0]}, {step.output});",),
                 (_MACROS,) if step.optimized else (), paths=frozenset({"global_pool"}))


# --- ONNX ---------------------------------------------------------------------------------

def onnx_emit(step: OnnxStep[GlobalPool]) -> OnnxCode:
    """GlobalMaxPool / GlobalAveragePool in the float form; in the fake-quant form the
    maximum as is, the average as ReduceSum then a division by the map size (IEEE-exact:
    the fake-quant network's float arithmetic) rounded to the 1/128 grid by the mode's
    pooling rule; in the integer form ReduceMax on int8 and the exact int64 ReduceSum
    divided with the pooling rule (numerics.np_divide_round)."""
    import numpy as np

    in_shape = step.in_shapes[0]
    axes = np.arange(2, len(in_shape) + 1, dtype=np.int64)
    count = math.prod(in_shape[1:])
    code = step.start()
    if step.layer.mode is PoolMode.max:
        return (code.then("ReduceMax", axes=tuple(int(a) for a in axes), keepdims=1)
                if step.form is Form.int8 else code.then("GlobalMaxPool")).named(step.output)
    if step.form is Form.float:
        return code.then("GlobalAveragePool").named(step.output)
    if step.form is Form.int8:
        code = code.then("Cast", to=INT64).then("ReduceSum", axes, keepdims=1)
        return divide_round(code, count, step.rounding).then("Cast", to=INT8).named(step.output)
    code = code.then("ReduceSum", axes, keepdims=1).then("Div", np.array(count, np.float32))
    code = round_float(code.then("Mul", np.array(ACT_SCALE, np.float32)),
                       pool_rounding(step.rounding))
    return code.then("Mul", np.array(1 / ACT_SCALE, np.float32)).named(step.output)


# --- memory, training --------------------------------------------------------------------

def no_windows(layer: GlobalPool, in_shapes: Sequence[Shape],
               out: Shape) -> tuple[tuple[str, Window], ...]:
    """None: the kernel reads each input byte once, straight from L2 (`l2_traffic`)."""
    return ()



# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((3, 5, 7), (
    {"name": "g", "op": "global_pool", "mode": "avg"},
))


OPERATOR = Operator(
    "global_pool", GlobalPool, "one", Role.data, out_shape, no_params, no_macs,
    example=EXAMPLE,
    torch=Torch(forward), reference=reference, c=C(emit), onnx=Onnx(onnx_emit),
    # the pooling hardware with the map as its window: targets.max7800x.limits holds it to
    # the device's pool sizes (16 x 16) and says how to shrink a larger map first
    windows=no_windows, l2_traffic=True)
