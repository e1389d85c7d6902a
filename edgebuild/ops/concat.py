"""concat: join two or more earlier tensors along the channel axis."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.fields import Identifier
from edgebuild.core.geometry import Shape, ShapeError
from edgebuild.ops.c import CCode, CStep
from edgebuild.ops.onnxcode import OnnxCode, OnnxStep
from edgebuild.ops.operator import (
    C,
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

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Concat(LayerBase):
    op: Literal["concat"]
    inputs: tuple[Identifier, ...] = Field(min_length=2, description="joined along channels")


def out_shape(layer: Concat, shapes: Sequence[Shape]) -> Shape:
    rest = {tuple(s[1:]) for s in shapes}
    if len(rest) != 1 or len({len(s) for s in shapes}) != 1:
        raise ShapeError("concat joins channels, so all other dimensions must match; got "
                         + ", ".join(f"{name}={list(s)}" for name, s in zip(layer.inputs, shapes, strict=False)))
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def forward(layer: Concat, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    import torch

    return torch.cat(list(inputs), dim=1)


def reference(layer: Concat, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    import numpy as np

    return np.concatenate(inputs, axis=1)


def emit(step: CStep[Concat]) -> CCode:
    """One eb_copy per input: channels first, so each input is one contiguous block."""
    calls, offset = [], 0
    for source, shape in zip(step.inputs, step.in_shapes, strict=True):
        size = math.prod(shape)
        calls.append(f"eb_copy({size}, {source}, {step.output} + {offset});")
        offset += size
    return CCode(calls=tuple(calls))


def onnx_emit(step: OnnxStep[Concat]) -> OnnxCode:
    return step.start().then("Concat", *step.inputs[1:], axis=1).named(step.output)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 4, 4), (
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
    {"name": "cat", "op": "concat", "inputs": ["c", "input"]},
))


OPERATOR = Operator(
    "concat", Concat, "many", Role.data, out_shape, no_params, no_macs,
    example=EXAMPLE,
    torch=Torch(forward), reference=reference, c=C(emit), onnx=Onnx(onnx_emit), l2_traffic=True)
