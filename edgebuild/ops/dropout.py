"""dropout: active in float training only; the identity in every deployed form."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.ops.operator import LayerBase, Operator, no_macs, no_params, one


class Dropout(LayerBase):
    op: Literal["dropout"]
    p: float = Field(default=0.5, ge=0, lt=1)


def torch_module(layer: Dropout, shapes):
    import torch.nn as nn

    return nn.Dropout(layer.p)


def forward(layer: Dropout, module, inputs, mode):
    return module(inputs[0]) if mode.kind == "float" else inputs[0]


def reference(layer: Dropout, quant, inputs, rounding):
    return inputs[0]


OPERATOR = Operator("dropout", Dropout, "one", lambda layer, shapes: one(shapes),
                    no_params, no_macs, forward, reference, torch_module)
