"""The network description's operation names and edgebuild's ops, both ways — read from the
target's own table of ops (operators.OPERATORS: `ai8x`, `exports_as`), so no table here
lists ops.

A description layer has at most one main operation with weights (conv1d, conv2d,
convtranspose2d, mlp/linear/fc); `none` (or `passthrough`) means none: the layer copies,
pools, adds (`eltwise`) or concatenates its inputs. Importing, a spec's `op` is the edgebuild
op of its main operation, or NO_OPERATION.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.ops import OPS
from edgebuild.ops.operator import Operator
from edgebuild.targets.max7800x.operators import OPERATORS, HardwareOp

if TYPE_CHECKING:
    from edgebuild.manifest import Layer

NO_OPERATION = "none"  # a spec without a main operation (the description's `none`)


def _facet(op: Operator) -> HardwareOp | None:
    return OPERATORS.get(op.name)


def description_ops() -> dict[str, Operator]:
    """Description `op` value (lower case) -> the edgebuild op it imports as."""
    return {name: OPS[op] for op, ext in OPERATORS.items() for name in ext.ai8x}


def imported_op(text: str) -> tuple[str, str | None]:
    """(spec op, eltwise) for a known description `op` value: a main operation's edgebuild
    op, or NO_OPERATION (with `add` as the element-wise operation for `Add`)."""
    op = description_ops()[text]
    facet = _facet(op)
    if facet is not None and facet.operation == "add":
        return NO_OPERATION, "add"
    return (op.name if op.computes else NO_OPERATION), None


def exported_op(layer: Layer) -> str:
    """The description `op` of a layer with weights (its facet's `exports_as`)."""
    facet = _facet(OPS[layer.op])
    assert facet is not None and facet.exports_as is not None, layer.op
    return facet.exports_as


def computes(op: str) -> bool:
    """A spec or layer op with weights (NO_OPERATION and description-only names have none)."""
    return op in OPS and OPS[op].computes


def operation(op: str) -> str | None:
    """The hardware operation of an edgebuild op (None: no such op, or not deployable)."""
    facet = _facet(OPS[op]) if op in OPS else None
    return None if facet is None else facet.operation


def reads_concat(op: str) -> bool:
    facet = _facet(OPS[op]) if op in OPS else None
    return facet is not None and facet.reads_concat


def inflight(op: str) -> bool:
    facet = _facet(OPS[op]) if op in OPS else None
    return facet is not None and facet.inflight


def fully_connected(op: str) -> bool:
    """A layer that flattens its own input (the description's `flatten`): linear."""
    facet = _facet(OPS[op]) if op in OPS else None
    return facet is not None and facet.flattens_input


def view(op: str) -> str | None:
    """How the device absorbs an op that is a view ("flatten", "in_dim"), or None."""
    facet = _facet(OPS[op]) if op in OPS else None
    return None if facet is None else facet.view
