"""linear: fully connected layer over a flat feature vector."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from edgebuild.ops.conv import reference_compute, torch_compute, validate_wide
from edgebuild.ops.operator import Activation, Count, LayerBase, Operator, ShapeError


class Linear(LayerBase):
    op: Literal["linear"]
    out: Count = Field(description="output features")
    flatten: bool = Field(default=False, description="flatten a (C, ...) input first")
    bias: bool = True
    act: Activation = Activation.none
    wide: bool = Field(default=False, description="int32 output; only on the last layer")


def _features(layer: Linear, shape) -> int:
    if len(shape) != 1 and not layer.flatten:
        raise ShapeError(f"linear needs a flat input but gets {list(shape)}; "
                         "add `flatten: true` to this layer")
    return math.prod(shape)


def out_shape(layer: Linear, shapes):
    _features(layer, shapes[0])
    validate_wide(layer)
    return (layer.out,)


def param_count(layer: Linear, shapes):
    return layer.out * _features(layer, shapes[0]) + (layer.out if layer.bias else 0)


def macs(layer: Linear, shapes, out):
    return layer.out * _features(layer, shapes[0])


def torch_module(layer: Linear, shapes):
    import torch.nn as nn

    return nn.Linear(math.prod(shapes[0]), layer.out, bias=layer.bias)


def forward(layer: Linear, module, inputs, mode):
    import torch.nn.functional as F

    x = inputs[0].flatten(1)
    return torch_compute(layer, module, x, mode, F.linear)


def reference(layer: Linear, quant, inputs, rounding):
    import numpy as np

    x = inputs[0].reshape(len(inputs[0]), -1).astype(np.int64)
    acc = x @ quant.weight.astype(np.int64).T
    return reference_compute(layer, quant, acc, rounding)


OPERATOR = Operator("linear", Linear, "one", out_shape, param_count, macs,
                    forward, reference, torch_module)
