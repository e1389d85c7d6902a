"""Per-op extensions: what one target (or number format) knows about each op, kept in that
target's own table instead of in the operator record.

The operator record (ops/operator.py) holds what every build needs to know about an op.
What only one target needs — the MAX7800x accelerator's hardware operation, how its layer
record is made, how the vendor's network description names it — lives in the target, in
one `Extensions[T]` table: op name -> the target's own record `T` for that op. An op
missing from a table is not supported there, and `for_op` says why in a sentence a user
reads (the way TFLM picks an optimized kernel per target, or hls4ml registers a backend's
templates per layer: the layer itself knows nothing of them).

Every key must be a registered op (checked when the table is made), so a renamed or
removed op cannot leave a dead entry behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from edgebuild.ops import OPS
from edgebuild.ops.operator import FOLDED, Role, Unsupported

T = TypeVar("T")

DROPPED = "it is the identity once trained and is removed before deployment, so it never runs"


class Extensions(Generic[T]):
    """op name -> `T`, one target's record per op. `where` names the target in the reasons
    (`"the MAX7800x accelerator"`); `missing` is the reason for a deployed op the table
    leaves out (default: `where` has no implementation of it), `unsupported` an op's own
    reason where it has one."""

    def __init__(self, where: str, table: Mapping[str, T], missing: str | None = None,
                 unsupported: Mapping[str, str] | None = None):
        self._reasons = dict(unsupported or {})  # op -> why `where` cannot run it
        unknown = sorted((set(table) | set(self._reasons)) - set(OPS))
        if unknown:
            raise ValueError(f"extensions of {where}: {', '.join(unknown)} "
                             f"{'is no op' if len(unknown) == 1 else 'are no ops'} "
                             f"(ops: {', '.join(OPS)})")
        self.where = where
        self._table = dict(table)
        self._missing = missing or f"{where} has no implementation of it"

    def for_op(self, name: str) -> T | Unsupported:
        """The extension of op `name`, or why it has none (a whole sentence, no period)."""
        if name in self._table:
            return self._table[name]
        if name in self._reasons:
            return Unsupported(self._reasons[name])
        role = OPS[name].role if name in OPS else None
        if role is Role.folded:
            return Unsupported(FOLDED)
        if role is Role.dropped:
            return Unsupported(DROPPED)
        return Unsupported(self._missing)

    def get(self, name: str) -> T | None:
        """The extension of op `name`, or None (no such op, or none here)."""
        return self._table.get(name)

    def __getitem__(self, name: str) -> T:
        return self._table[name]

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._table.items())

    def values(self) -> Iterator[T]:
        return iter(self._table.values())
