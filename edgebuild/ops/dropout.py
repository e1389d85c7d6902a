"""dropout: active in float training only; the identity in every deployed form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape
from edgebuild.ops.operator import (
    LayerBase,
    Operator,
    Role,
    Torch,
    Unsupported,
    no_macs,
    no_params,
    one,
)


class Dropout(LayerBase):
    op: Literal["dropout"]
    p: float = Field(default=0.5, ge=0, lt=1)


def torch_module(layer: Dropout, shapes: Sequence[Shape]) -> Any:
    import torch.nn as nn

    return nn.Dropout(layer.p)


def forward(layer: Dropout, module: Any, inputs: Sequence[Any], mode: Any) -> Any:
    return module(inputs[0]) if mode.kind == "float" else inputs[0]


def reference(layer: Dropout, quant: Any, inputs: Sequence[Any], rounding: str) -> Any:
    return inputs[0]


_GONE = Unsupported("dropout is removed after training (the identity at inference), so it "
                    "never runs on its own")

OPERATOR = Operator("dropout", Dropout, "one", Role.dropped, one, no_params, no_macs,
                    torch=Torch(forward, torch_module), reference=reference, c=_GONE,
                    train=_GONE, accelerator=_GONE)
