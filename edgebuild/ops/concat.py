"""concat: join two or more earlier tensors along the channel axis."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.core.fields import Identifier
from edgebuild.ops.operator import LayerBase, Operator, ShapeError, no_macs, no_params


class Concat(LayerBase):
    op: Literal["concat"]
    inputs: tuple[Identifier, ...] = Field(min_length=2, description="joined along channels")


def out_shape(layer: Concat, shapes):
    rest = {tuple(s[1:]) for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise ShapeError("concat joins channels, so all other dimensions must match; got "
                         + ", ".join(f"{name}={list(s)}" for name, s in zip(layer.inputs, shapes, strict=False)))
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def forward(layer: Concat, module, inputs, mode):
    import torch

    return torch.cat(inputs, dim=1)


def reference(layer: Concat, quant, inputs, rounding):
    import numpy as np

    return np.concatenate(inputs, axis=1)


OPERATOR = Operator("concat", Concat, "many", out_shape, no_params, no_macs, forward, reference)
