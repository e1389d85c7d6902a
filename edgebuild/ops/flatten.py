"""flatten: (C, ...) -> (C * ...,), channel-major order (C, then H, then W)."""

from __future__ import annotations

import math
from typing import Literal

from edgebuild.ops.operator import LayerBase, Operator, no_macs, no_params


class Flatten(LayerBase):
    op: Literal["flatten"]


def out_shape(layer: Flatten, shapes):
    return (math.prod(shapes[0]),)


def forward(layer: Flatten, module, inputs, mode):
    return inputs[0].flatten(1)


def reference(layer: Flatten, quant, inputs, rounding):
    return inputs[0].reshape(len(inputs[0]), -1)


OPERATOR = Operator("flatten", Flatten, "one", out_shape, no_params, no_macs, forward, reference)
