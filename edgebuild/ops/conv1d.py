"""conv1d: 1-D convolution over (channels, length), optional fused input pooling; `groups`
makes it grouped or depthwise (groups = input channels)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from edgebuild.core.geometry import Shape, expect_rank, pooled, window_out
from edgebuild.ops import conv
from edgebuild.ops.operator import (
    Example,
    Mode,
    Operator,
    Pad,
    Role,
    Small,
    Torch,
)
from edgebuild.ops.pool import reference_pool, torch_pool

if TYPE_CHECKING:
    import torch

    from edgebuild.core.numerics import QuantParams
    from edgebuild.ops.operator import Ints


class Conv1d(conv.ConvFields):
    op: Literal["conv1d"]
    kernel: Small = 3
    stride: Small = 1
    pad: Pad = 0
    dilation: Small = 1


def axes(layer: Conv1d) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, pad, dilation), each of the one axis."""
    return (layer.kernel,), (layer.stride,), (layer.pad,), (layer.dilation,)


def out_shape(layer: Conv1d, shapes: Sequence[Shape]) -> Shape:
    expect_rank(shapes[0], 2, "conv1d")
    channels, length = pooled(shapes[0], layer.pool, 1)
    conv.check_groups(layer, channels)
    conv.validate_wide(layer)
    return (layer.out, window_out(length, layer.kernel, layer.stride, layer.pad, layer.dilation))


def param_count(layer: Conv1d, shapes: Sequence[Shape]) -> int:
    return conv.conv_params_count(layer, shapes[0][0], layer.kernel)


def macs(layer: Conv1d, shapes: Sequence[Shape], out: Shape) -> int:
    return conv.conv_macs(layer, shapes[0][0], layer.kernel, out[1])


def torch_module(layer: Conv1d, shapes: Sequence[Shape]) -> torch.nn.Conv1d:
    import torch.nn as nn

    return nn.Conv1d(shapes[0][0], layer.out, layer.kernel, groups=layer.groups, bias=layer.bias)


def forward(layer: Conv1d, module: torch.nn.Conv1d, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    import torch.nn.functional as F

    x = torch_pool(inputs[0], layer.pool, 1, mode)
    return conv.torch_compute(layer, module, x, mode, lambda x, w, b: F.conv1d(
        x, w, b, layer.stride, layer.pad, layer.dilation, layer.groups))


def reference(layer: Conv1d, quant: QuantParams, inputs: Sequence[Ints], rounding: str) -> Ints:
    x = reference_pool(inputs[0], layer.pool, 1, rounding)
    acc = conv.reference_conv(x, quant.weight, layer.groups, *axes(layer))
    return conv.reference_compute(layer, quant, acc, rounding)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 16), (
    {"name": "c", "op": "conv1d", "out": 4, "kernel": 3, "pad": 1, "act": "relu"},
))


OPERATOR = Operator(
    "conv1d", Conv1d, "one", Role.compute, out_shape, param_count, macs,
    example=EXAMPLE,
    torch=Torch(forward, torch_module), reference=reference, c=conv.c_facet(axes),
    onnx=conv.onnx_facet(axes), weights=conv.weights_facet(axes), windows=conv.windows_facet(axes))
