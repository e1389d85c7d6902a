"""The integer reference of TFLite's int8 number format: each op as TensorFlow's reference
kernels compute it (tensorflow/lite/kernels/internal/reference/integer_ops/), on
edgebuild's channels-first int64 batches. The C kernels (templates/kernels/eb_tfl.c) and
LiteRT's BUILTIN_REF kernels give the same integers (tests/test_tflite_*.py).

- convolution (dense, grouped, depthwise with any multiplier) and linear:
  acc = sum over the taps inside the input of (x - in_zp) * w, + bias;
  out = clamp(mbqm(acc, m[c], shift[c]) + out_zp, act_min, act_max), where a linear layer
  rounds once (arith.mbqm_single) and a convolution twice (arith.mbqm), as LiteRT does. Taps in the padding
  add nothing (TFLite skips them): the same as padding x - in_zp with zeros.
- average pooling: the exact sum divided by the window size, halves away from zero,
  clamped; max pooling: the maximum, clamped;
- add: each input moved to a common scale with 20 bits of headroom
  ((x - zp) * 2^20, rounded by its multiplier), summed, rescaled to the output;
- softmax: gemmlowp's fixed-point exp and reciprocal (tflite.arith.softmax) over channels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.core.geometry import pair
from edgebuild.formats.tflite import arith
from edgebuild.formats.tflite.quant import TflQuant
from edgebuild.ops import conv
from edgebuild.ops import pool as pooling

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.ops.conv2d import Conv2d
    from edgebuild.ops.linear import Linear
    from edgebuild.ops.pool import Pool2d

    Ints = NDArray[np.int64]


def requantize(acc: Ints, q: TflQuant, axis: int = 1, single: bool = False) -> Ints:
    """mbqm per output channel (axis `axis`), + output zero point, clamped; `single`: rounded
    once (arith.mbqm_single, fully connected layers)."""
    assert q.multiplier is not None and q.shift is not None
    shape = [1] * acc.ndim
    shape[axis] = -1
    rule = arith.mbqm_single if single else arith.mbqm
    scaled = rule(arith.wrap32(acc), q.multiplier.reshape(shape), q.shift.reshape(shape))
    return np.clip(scaled + q.out_zp, q.act_min, q.act_max)


def add_bias(acc: Ints, q: TflQuant, axis: int = 1) -> Ints:
    if q.bias is None:
        return acc
    shape = [1] * acc.ndim
    shape[axis] = -1
    return acc + q.bias.reshape(shape)


def conv2d(layer: Conv2d, q: TflQuant, inputs: Sequence[Ints]) -> Ints:
    from edgebuild.ops import conv2d as ops_conv2d

    assert q.weight is not None
    kernel, stride, pad, dilation = ops_conv2d.axes(layer)
    end = ops_conv2d.pad_end(layer)
    x = inputs[0].astype(np.int64) - q.in_zp[0]
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], end[0]), (pad[1], end[1])))
    acc = conv.reference_conv(x, q.weight, layer.groups, kernel, stride, (0, 0), dilation)
    return requantize(add_bias(acc, q), q)


def linear(layer: Linear, q: TflQuant, inputs: Sequence[Ints]) -> Ints:
    assert q.weight is not None
    x = inputs[0].reshape(len(inputs[0]), -1).astype(np.int64) - q.in_zp[0]
    return requantize(add_bias(x @ q.weight.T, q), q, single=True)


def pool2d(layer: Pool2d, q: TflQuant, inputs: Sequence[Ints]) -> Ints:
    """Max, or the sum over the window's values inside the input divided by their number
    (TFLite's: padding counts for nothing; halves away from zero)."""
    size = pair(layer.size)
    stride = pair(layer.stride if layer.stride is not None else layer.size)
    start, end = pooling.pads(layer)
    x = inputs[0].astype(np.int64)
    widths = [(0, 0), (0, 0), (start[0], end[0]), (start[1], end[1])]
    axes = (-2, -1)
    if str(getattr(layer.mode, "value", layer.mode)) == "max":
        padded = np.pad(x, widths, constant_values=np.iinfo(np.int64).min // 2)
        out = pooling.windows(padded, size, stride).max(axis=axes)
    else:
        total = pooling.windows(np.pad(x, widths), size, stride).sum(axis=axes)
        inside = np.pad(np.ones((1, 1, *x.shape[2:]), np.int64), widths)
        count = pooling.windows(inside, size, stride).sum(axis=axes)
        # C's integer division truncates: (sum +- count/2) / count rounds halves away from 0.
        out = np.where(total > 0, (total + count // 2) // count,
                       -((-total + count // 2) // count))
    return np.clip(out, q.act_min, q.act_max)


def add(layer: Any, q: TflQuant, inputs: Sequence[Ints]) -> Ints:
    assert q.multiplier is not None and q.shift is not None
    scaled = [arith.mbqm(arith.wrap32((x.astype(np.int64) - zp) * (1 << q.left_shift)), m, s)
              for x, zp, m, s in zip(inputs, q.in_zp, q.multiplier[:2], q.shift[:2], strict=True)]
    total = arith.wrap32(scaled[0] + scaled[1])
    out = arith.mbqm(total, q.multiplier[2], q.shift[2]) + q.out_zp
    return np.clip(out, q.act_min, q.act_max)


def softmax(layer: Any, q: TflQuant, inputs: Sequence[Ints]) -> Ints:
    """Over the channels (axis 1), as TFLite's over the last axis of NHWC."""
    assert q.multiplier is not None
    x = np.moveaxis(inputs[0].astype(np.int64), 1, -1)
    out = arith.softmax(x, int(q.multiplier[0]), q.left_shift, q.diff_min)
    return np.moveaxis(out, -1, 1)
