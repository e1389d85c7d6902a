"""softmax: exp(x) / sum(exp(x)) over the channels of each position — the last layer of
most classifiers TensorFlow exports (TFLite's SOFTMAX over the last NHWC axis is this over
the channels of a channels-first tensor).

Its integer form is TFLite's (gemmlowp's fixed-point exp and reciprocal, int8 out with
scale 1/256): it runs in TFLite's number format (`model.format: tflite`, tflite.operators).
edgebuild's own format keeps class scores as they are (argmax needs no softmax), so there
it has no integer form, and `check` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from edgebuild.core.geometry import Shape
from edgebuild.ops.operator import (
    Example,
    LayerBase,
    Mode,
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

INTEGER = ("softmax has an integer form only in TFLite's number format (`model.format: "
           "tflite`, a model `edgebuild import-tflite` wrote); in edgebuild's own format "
           "leave it out: the class scores of the layer before it rank the classes the same")


class Softmax(LayerBase):
    op: Literal["softmax"]


def forward(layer: Softmax, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return inputs[0].softmax(dim=1)


def out_shape(layer: Softmax, shapes: Sequence[Shape]) -> Shape:
    return one(layer, shapes)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((8,), (
    {"name": "fc", "op": "linear", "out": 4},
    {"name": "p", "op": "softmax"},
))


OPERATOR = Operator(
    "softmax", Softmax, "one", Role.data, out_shape, no_params, no_macs,
    example=EXAMPLE, torch=Torch(forward), reference=Unsupported(INTEGER),
    c=Unsupported(INTEGER), onnx=Unsupported(INTEGER))
