"""flatten: (C, ...) -> (C * ...,), channel-major order (C, then H, then W). A view: every
deployed tensor is stored channels first and contiguous, so the C has no code for it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from edgebuild.core.geometry import Shape
from edgebuild.ops.operator import (
    Accelerator,
    LayerBase,
    Operator,
    Role,
    Torch,
    Train,
    TrainKernel,
    no_macs,
    no_params,
)
from edgebuild.ops.view import VIEW_C


class Flatten(LayerBase):
    op: Literal["flatten"]


def out_shape(layer: Flatten, shapes: Sequence[Shape]) -> Shape:
    return (math.prod(shapes[0]),)


def forward(layer: Flatten, module: Any, inputs: Sequence[Any], mode: Any) -> Any:
    return inputs[0].flatten(1)


def reference(layer: Flatten, quant: Any, inputs: Sequence[Any], rounding: str) -> Any:
    return inputs[0].reshape(len(inputs[0]), -1)


OPERATOR = Operator("flatten", Flatten, "one", Role.view, out_shape, no_params, no_macs,
                    torch=Torch(forward), reference=reference, c=VIEW_C,
                    accelerator=Accelerator("flatten", view="flatten"),
    train=Train(TrainKernel.view))
