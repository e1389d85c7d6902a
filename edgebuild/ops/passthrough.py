"""passthrough: the identity. A MAX7800x network description can hold layers that only copy
data (to re-format it with `write_gap`, or to move it between processors); importing such a
network keeps them as named layers so their placement survives. Deployed C treats it as a
view of its input (no copy), like `flatten`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

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
    one,
)
from edgebuild.ops.view import VIEW_C


class Passthrough(LayerBase):
    op: Literal["passthrough"]


def forward(layer: Passthrough, module: Any, inputs: Sequence[Any], mode: Any) -> Any:
    return inputs[0]


def reference(layer: Passthrough, quant: Any, inputs: Sequence[Any], rounding: str) -> Any:
    return inputs[0]


OPERATOR = Operator("passthrough", Passthrough, "one", Role.view, one, no_params, no_macs,
                    torch=Torch(forward), reference=reference, c=VIEW_C,
                    accelerator=Accelerator("passthrough", copies=True,
                                            reads_concat=True, ai8x=("none", "passthrough")),
    train=Train(TrainKernel.view))
