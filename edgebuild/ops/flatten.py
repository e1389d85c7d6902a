"""flatten: (C, ...) -> (C * ...,), channel-major order (C, then H, then W). A view: every
deployed tensor is stored channels first and contiguous, so the C has no code for it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from edgebuild.core.geometry import Shape
from edgebuild.ops.onnxcode import OnnxCode, OnnxStep
from edgebuild.ops.operator import (
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Torch,
    no_macs,
    no_params,
)
from edgebuild.ops.view import VIEW_C

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Flatten(LayerBase):
    op: Literal["flatten"]


def out_shape(layer: Flatten, shapes: Sequence[Shape]) -> Shape:
    return (math.prod(shapes[0]),)


def forward(layer: Flatten, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return inputs[0].flatten(1)


def reference(layer: Flatten, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    return inputs[0].reshape(len(inputs[0]), -1)


def onnx_emit(step: OnnxStep[Flatten]) -> OnnxCode:
    return step.start().then("Flatten", axis=1).named(step.output)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 4, 4), (
    {"name": "flat", "op": "flatten"},
    {"name": "fc", "op": "linear", "out": 10},
))


OPERATOR = Operator("flatten", Flatten, "one", Role.view, out_shape, no_params, no_macs,
                    example=EXAMPLE,
                    torch=Torch(forward), reference=reference, c=VIEW_C,
                    onnx=Onnx(onnx_emit))
