"""What a number format knows of one op (formats.numbers's plugins fill a table of these)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.ops.operator import C

if TYPE_CHECKING:
    from edgebuild.core.geometry import Shape, Window
    from edgebuild.ops.operator import Ints

Reference = Callable[[Any, Any, Sequence["Ints"], str], "Ints"]
Windows = Callable[[Any, Sequence["Shape"], "Shape"], tuple[tuple[str, "Window"], ...]]


@dataclass(frozen=True)
class FormatOp:
    """What a number format knows of one op: its integer reference and its C, and the
    windows its L1-tiled kernels cut (None: it has none, memory.plan leaves the layer
    untiled)."""

    reference: Reference
    c: C
    windows: Windows | None = None
