"""batchnorm: per-channel normalization, folded into the preceding conv/linear before quantization."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.ops.base import LayerBase, Operator, no_macs, one


class BatchNorm(LayerBase):
    op: Literal["batchnorm"]
    eps: float = Field(default=1e-5, gt=0, le=1)
    momentum: float = Field(default=0.1, gt=0, le=1)


def param_count(layer: BatchNorm, shapes):
    return 2 * shapes[0][0]  # scale and shift; running statistics are buffers


OPERATOR = Operator("batchnorm", BatchNorm, "one", lambda layer, shapes: one(shapes),
                    param_count, no_macs)
