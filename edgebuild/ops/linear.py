"""linear: fully connected layer over a flat feature vector."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from edgebuild.ops.base import Activation, Count, LayerBase, Operator, ShapeError


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
    return (layer.out,)


def param_count(layer: Linear, shapes):
    return layer.out * _features(layer, shapes[0]) + (layer.out if layer.bias else 0)


def macs(layer: Linear, shapes, out):
    return layer.out * _features(layer, shapes[0])


OPERATOR = Operator("linear", Linear, "one", out_shape, param_count, macs)
