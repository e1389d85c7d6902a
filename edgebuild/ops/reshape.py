"""reshape: the same values under another per-sample shape, e.g. a 1-D signal (C, L) read
as an image (C, H, W) with H x W = L (what a MAX7800x network description says with
`in_dim`).

Values keep their row-major order over the channels-first shape (as torch's `reshape` on
a batch), so the element count must not change. Every tensor edgebuild deploys is stored
channels first and contiguous, so in the generated C a reshape is a view of its input (no
copy, no buffer), like `flatten`. On a MAX7800x accelerator data sits per channel in the
processors' memories, so only reshapes that keep the channel count are views there (the
device rules in limits.py say so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape, ShapeError
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


class Reshape(LayerBase):
    op: Literal["reshape"]
    shape: tuple[Annotated[int, Field(strict=True, ge=1, le=65536)], ...] = Field(
        min_length=1, max_length=3,
        description="the new per-sample shape, channels first: [F], [C, L] or [C, H, W]")


def out_shape(layer: Reshape, shapes: Sequence[Shape]) -> Shape:
    source, target = tuple(shapes[0]), tuple(layer.shape)
    if math.prod(source) != math.prod(target):
        raise ShapeError(f"cannot reshape {list(source)} ({math.prod(source)} values) to "
                         f"{list(target)} ({math.prod(target)} values): the number of values "
                         "must stay the same")
    return target


def forward(layer: Reshape, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return inputs[0].reshape(len(inputs[0]), *layer.shape)


def reference(layer: Reshape, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    return inputs[0].reshape(len(inputs[0]), *layer.shape)


def onnx_emit(step: OnnxStep[Reshape]) -> OnnxCode:
    """Reshape to (-1, *shape): the batch stays first."""
    import numpy as np

    shape = np.array([-1, *step.layer.shape], dtype=np.int64)
    return step.start().then("Reshape", shape).named(step.output)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 16), (
    {"name": "r", "op": "reshape", "shape": [2, 4, 4]},
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
))


OPERATOR = Operator("reshape", Reshape, "one", Role.view, out_shape, no_params, no_macs,
                    example=EXAMPLE,
                    torch=Torch(forward), reference=reference, c=VIEW_C,
                    onnx=Onnx(onnx_emit))
