"""conv1d: 1-D convolution over (channels, length), optional fused input pooling."""

from __future__ import annotations

from typing import Literal

from edgebuild.ops.conv import (
    ConvFields,
    check_groups,
    conv_macs,
    conv_params,
    reference_compute,
    reference_conv,
    torch_compute,
    validate_wide,
)
from edgebuild.ops.operator import Operator, Pad, Small, expect_rank, pooled, window_out
from edgebuild.ops.pooling import reference_pool, torch_pool


class Conv1d(ConvFields):
    op: Literal["conv1d"]
    kernel: Small = 3
    stride: Small = 1
    pad: Pad = 0
    dilation: Small = 1


def out_shape(layer: Conv1d, shapes):
    expect_rank(shapes[0], 2, "conv1d")
    channels, length = pooled(shapes[0], layer.pool, 1)
    check_groups(layer, channels)
    validate_wide(layer)
    return (layer.out, window_out(length, layer.kernel, layer.stride, layer.pad, layer.dilation))


def param_count(layer: Conv1d, shapes):
    return conv_params(layer, shapes[0][0], layer.kernel)


def macs(layer: Conv1d, shapes, out):
    return conv_macs(layer, shapes[0][0], layer.kernel, out[1])


def torch_module(layer: Conv1d, shapes):
    import torch.nn as nn

    return nn.Conv1d(shapes[0][0], layer.out, layer.kernel, groups=layer.groups, bias=layer.bias)


def forward(layer: Conv1d, module, inputs, mode):
    import torch.nn.functional as F

    x = torch_pool(inputs[0], layer.pool, 1, mode)
    return torch_compute(layer, module, x, mode, lambda x, w, b: F.conv1d(
        x, w, b, layer.stride, layer.pad, layer.dilation, layer.groups))


def reference(layer: Conv1d, quant, inputs, rounding):
    x = reference_pool(inputs[0], layer.pool, 1, rounding)
    acc = reference_conv(x, quant.weight, layer.groups, (layer.kernel,), (layer.stride,),
                         (layer.pad,), (layer.dilation,))
    return reference_compute(layer, quant, acc, rounding)


OPERATOR = Operator("conv1d", Conv1d, "one", out_shape, param_count, macs,
                    forward, reference, torch_module)
