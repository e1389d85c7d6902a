"""add: element-wise sum of two or more earlier tensors of one shape (residual connections)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.core import numerics
from edgebuild.core.fields import Identifier
from edgebuild.ops.operator import Activation, LayerBase, Operator, ShapeError, no_macs, no_params


class Add(LayerBase):
    op: Literal["add"]
    inputs: tuple[Identifier, ...] = Field(min_length=2, description="the tensors to sum")
    act: Activation = Activation.none


def out_shape(layer: Add, shapes):
    if any(s != shapes[0] for s in shapes):
        raise ShapeError("add needs inputs of one shape, got "
                         + ", ".join(f"{name}={list(s)}" for name, s in zip(layer.inputs, shapes, strict=False)))
    return shapes[0]


def forward(layer: Add, module, inputs, mode):
    """Sum on the 1/128 grid, activation, saturation (exact in every mode)."""
    total = inputs[0]
    for other in inputs[1:]:
        total = total + other
    if mode.kind == "qat":
        return numerics.torch_requantize(total, mode.rounding, layer.act.value)
    return numerics.torch_clamp_float(total, layer.act.value) if mode.clamp else \
        numerics.torch_activate(total, layer.act.value)


def reference(layer: Add, quant, inputs, rounding):
    total = inputs[0].astype("int64")
    for other in inputs[1:]:
        total = total + other
    return numerics.np_saturate(numerics.np_activate(total, layer.act.value))


OPERATOR = Operator("add", Add, "many", out_shape, no_params, no_macs, forward, reference)
