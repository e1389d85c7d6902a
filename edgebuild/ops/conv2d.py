"""conv2d: 2-D convolution over (channels, height, width), optional fused input pooling."""

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
from edgebuild.ops.operator import Operator, PadPair, Pair, expect_rank, pair, pooled, window_out
from edgebuild.ops.pooling import reference_pool, torch_pool


class Conv2d(ConvFields):
    op: Literal["conv2d"]
    kernel: Pair = 3
    stride: Pair = 1
    pad: PadPair = 0
    dilation: Pair = 1


def out_shape(layer: Conv2d, shapes):
    expect_rank(shapes[0], 3, "conv2d")
    channels, height, width = pooled(shapes[0], layer.pool, 2)
    check_groups(layer, channels)
    validate_wide(layer)
    dims = zip((height, width), pair(layer.kernel), pair(layer.stride), pair(layer.pad),
               pair(layer.dilation), strict=True)
    return (layer.out, *(window_out(*d) for d in dims))


def param_count(layer: Conv2d, shapes):
    kh, kw = pair(layer.kernel)
    return conv_params(layer, shapes[0][0], kh * kw)


def macs(layer: Conv2d, shapes, out):
    kh, kw = pair(layer.kernel)
    return conv_macs(layer, shapes[0][0], kh * kw, out[1] * out[2])


def torch_module(layer: Conv2d, shapes):
    import torch.nn as nn

    return nn.Conv2d(shapes[0][0], layer.out, pair(layer.kernel), groups=layer.groups,
                     bias=layer.bias)


def forward(layer: Conv2d, module, inputs, mode):
    import torch.nn.functional as F

    x = torch_pool(inputs[0], layer.pool, 2, mode)
    return torch_compute(layer, module, x, mode, lambda x, w, b: F.conv2d(
        x, w, b, pair(layer.stride), pair(layer.pad), pair(layer.dilation), layer.groups))


def reference(layer: Conv2d, quant, inputs, rounding):
    x = reference_pool(inputs[0], layer.pool, 2, rounding)
    acc = reference_conv(x, quant.weight, layer.groups, pair(layer.kernel), pair(layer.stride),
                         pair(layer.pad), pair(layer.dilation))
    return reference_compute(layer, quant, acc, rounding)


OPERATOR = Operator("conv2d", Conv2d, "one", out_shape, param_count, macs,
                    forward, reference, torch_module)
