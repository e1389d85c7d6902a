"""passthrough: the identity. A MAX7800x network description can hold layers that only copy
data (to re-format it with `write_gap`, or to move it between processors); importing such a
network keeps them as named layers so their placement survives. Deployed C treats it as a
view of its input (no copy), like `flatten`.
"""

from __future__ import annotations

from typing import Literal

from edgebuild.ops.operator import LayerBase, Operator, no_macs, no_params


class Passthrough(LayerBase):
    op: Literal["passthrough"]


def out_shape(layer: Passthrough, shapes):
    return tuple(shapes[0])


def forward(layer: Passthrough, module, inputs, mode):
    return inputs[0]


def reference(layer: Passthrough, quant, inputs, rounding):
    return inputs[0]


OPERATOR = Operator("passthrough", Passthrough, "one", out_shape, no_params, no_macs, forward,
                    reference)
