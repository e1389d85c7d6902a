"""dropout: active in float training only; the identity in every deployed form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape
from edgebuild.ops.onnxcode import view
from edgebuild.ops.operator import (
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Torch,
    Unsupported,
    no_macs,
    no_params,
    one,
)

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Dropout(LayerBase):
    op: Literal["dropout"]
    p: float = Field(default=0.5, ge=0, lt=1)


def torch_module(layer: Dropout, shapes: Sequence[Shape]) -> torch.nn.Dropout:
    import torch.nn as nn

    return nn.Dropout(layer.p)


def forward(layer: Dropout, module: torch.nn.Dropout, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return module(inputs[0]) if mode.kind == "float" else inputs[0]


def reference(layer: Dropout, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    return inputs[0]


_GONE = Unsupported("dropout is removed after training (the identity at inference), so it "
                    "never runs on its own")

# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 6, 6), (
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
    {"name": "drop", "op": "dropout", "p": 0.25},
))


OPERATOR = Operator("dropout", Dropout, "one", Role.dropped, one, no_params, no_macs,
                    example=EXAMPLE,
                    torch=Torch(forward, torch_module), reference=reference, c=_GONE,
                    onnx=Onnx(view))
