"""conv2d: 2-D convolution over (channels, height, width), optional fused input pooling;
`groups` makes it grouped or depthwise (groups = input channels)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape, expect_rank, pair, pooled, window_out
from edgebuild.ops import conv
from edgebuild.ops.operator import (
    Example,
    Mode,
    Operator,
    PadPair,
    Pair,
    Role,
    Torch,
)
from edgebuild.ops.pool import reference_pool, torch_pool

if TYPE_CHECKING:
    import torch

    from edgebuild.core.numerics import QuantParams
    from edgebuild.ops.operator import Ints


class Conv2d(conv.ConvFields):
    op: Literal["conv2d"]
    kernel: Pair = 3
    stride: Pair = 1
    pad: PadPair = 0
    pad_end: PadPair | None = Field(
        default=None, description="padding after (bottom, right) when it differs from `pad`, "
        "as TensorFlow's SAME padding with an odd total; only in TFLite's number format")
    dilation: Pair = 1


def axes(layer: Conv2d) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, pad, dilation), each (h, w)."""
    return tuple(pair(v) for v in (layer.kernel, layer.stride, layer.pad, layer.dilation))


def pad_end(layer: Conv2d) -> tuple[int, int]:
    """The padding after each axis (bottom, right): `pad_end`, else `pad`."""
    return pair(layer.pad if layer.pad_end is None else layer.pad_end)


def out_shape(layer: Conv2d, shapes: Sequence[Shape]) -> Shape:
    expect_rank(shapes[0], 3, "conv2d")
    channels, height, width = pooled(shapes[0], layer.pool, 2)
    conv.check_groups(layer, channels)
    conv.validate_wide(layer)
    kernel, stride, pad, dilation = axes(layer)
    # Padding on both sides is `pad` + `pad_end`: window_out takes it as twice one side,
    # so the odd total of an asymmetric pair adds its half to the size.
    return (layer.out, *(window_out(size + end - start, k, s, start, d) for size, k, s, start, d, end
                         in zip((height, width), kernel, stride, pad, dilation, pad_end(layer),
                                strict=True)))


def param_count(layer: Conv2d, shapes: Sequence[Shape]) -> int:
    kh, kw = pair(layer.kernel)
    return conv.conv_params_count(layer, shapes[0][0], kh * kw)


def macs(layer: Conv2d, shapes: Sequence[Shape], out: Shape) -> int:
    kh, kw = pair(layer.kernel)
    return conv.conv_macs(layer, shapes[0][0], kh * kw, out[1] * out[2])


def torch_module(layer: Conv2d, shapes: Sequence[Shape]) -> torch.nn.Conv2d:
    import torch.nn as nn

    return nn.Conv2d(shapes[0][0], layer.out, pair(layer.kernel), groups=layer.groups,
                     bias=layer.bias)


def forward(layer: Conv2d, module: torch.nn.Conv2d, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    import torch.nn.functional as F

    x = torch_pool(inputs[0], layer.pool, 2, mode)
    return conv.torch_compute(layer, module, x, mode, lambda x, w, b: F.conv2d(
        x, w, b, pair(layer.stride), pair(layer.pad), pair(layer.dilation), layer.groups))


def reference(layer: Conv2d, quant: QuantParams, inputs: Sequence[Ints], rounding: str) -> Ints:
    x = reference_pool(inputs[0], layer.pool, 2, rounding)
    kernel, stride, pad, dilation = axes(layer)
    acc = conv.reference_conv(x, quant.weight, layer.groups, kernel, stride, pad, dilation)
    return conv.reference_compute(layer, quant, acc, rounding)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 6, 6), (
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1, "act": "relu"},
))


OPERATOR = Operator(
    "conv2d", Conv2d, "one", Role.compute, out_shape, param_count, macs,
    example=EXAMPLE,
    torch=Torch(forward, torch_module), reference=reference, c=conv.c_facet(axes),
    onnx=conv.onnx_facet(axes), weights=conv.weights_facet(axes), windows=conv.windows_facet(axes))
