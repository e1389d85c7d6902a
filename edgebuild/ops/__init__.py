"""The operator registry: `op:` name -> Operator. Adding an op = a module + one line here."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from edgebuild.ops import (
    add,
    batchnorm,
    buffer,
    concat,
    conv1d,
    conv2d,
    conv_transpose2d,
    dropout,
    flatten,
    linear,
    passthrough,
    pool,
    reshape,
)
from edgebuild.ops.operator import Operator

OPS: dict[str, Operator] = {
    op.name: op
    for op in (
        conv1d.OPERATOR,
        conv2d.OPERATOR,
        conv_transpose2d.OPERATOR,
        linear.OPERATOR,
        pool.OPERATOR_1D,
        pool.OPERATOR_2D,
        flatten.OPERATOR,
        reshape.OPERATOR,
        passthrough.OPERATOR,
        add.OPERATOR,
        concat.OPERATOR,
        buffer.OPERATOR,
        batchnorm.OPERATOR,
        dropout.OPERATOR,
    )
}

Layer = Annotated[
    Union[tuple(op.params for op in OPS.values())],  # noqa: UP007 - built from the registry
    Field(discriminator="op"),
]
