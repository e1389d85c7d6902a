"""The operators: one module per op holding every fact about it (ops/operator.py lists the
facets) and its example model, registered explicitly here. Adding an op = its module, its
C kernel, its tests, and its name here three times: the import, the registry and mypy's
`Layer` union (tests/test_typing.py names what to add).

`ops` owns the manifest fields of every layer, the operator records and what several ops
share (conv: convolution arithmetic; pool: the pooling rule; c: the C kernel interface;
view: views). May import: core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

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
    global_pool,
    linear,
    passthrough,
    pool,
    reshape,
    softmax,
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
        global_pool.OPERATOR,
        flatten.OPERATOR,
        reshape.OPERATOR,
        softmax.OPERATOR,
        passthrough.OPERATOR,
        add.OPERATOR,
        concat.OPERATOR,
        buffer.OPERATOR,
        batchnorm.OPERATOR,
        dropout.OPERATOR,
    )
}

if TYPE_CHECKING:
    # mypy cannot evaluate the union built from the registry below: the same layer records,
    # listed (tests/test_typing.py checks that they agree).
    Layer = Annotated[
        conv1d.Conv1d | conv2d.Conv2d | conv_transpose2d.ConvTranspose2d | linear.Linear
        | pool.Pool1d | pool.Pool2d | global_pool.GlobalPool | flatten.Flatten | reshape.Reshape
        | softmax.Softmax | passthrough.Passthrough | add.Add | concat.Concat | buffer.Buffer
        | batchnorm.BatchNorm | dropout.Dropout,
        Field(discriminator="op"),
    ]
else:
    Layer = Annotated[
        Union[tuple(op.params for op in OPS.values())],  # noqa: UP007 - built from the registry
        Field(discriminator="op"),
    ]
