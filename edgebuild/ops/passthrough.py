"""passthrough: the identity. A MAX7800x network description can hold layers that only copy
data (to re-format it with `write_gap`, or to move it between processors); importing such a
network keeps them as named layers so their placement survives. Deployed C treats it as a
view of its input (no copy), like `flatten`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from edgebuild.ops.onnxcode import view
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
    one,
)
from edgebuild.ops.view import VIEW_C

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Passthrough(LayerBase):
    op: Literal["passthrough"]


def forward(layer: Passthrough, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    return inputs[0]


def reference(layer: Passthrough, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    return inputs[0]


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 4, 4), (
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
    {"name": "same", "op": "passthrough"},
))


OPERATOR = Operator("passthrough", Passthrough, "one", Role.view, one, no_params, no_macs,
                    example=EXAMPLE,
                    torch=Torch(forward), reference=reference, c=VIEW_C,
                    onnx=Onnx(view))
