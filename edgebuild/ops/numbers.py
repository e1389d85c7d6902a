"""Number formats as plugins: how an op computes in each integer format edgebuild deploys.

edgebuild's own format (power-of-two scales, no zero points: core.numerics) is the
operator records' own `reference`, `c` and `windows` facets. Another format — TFLite's
int8 (zero points, per-channel fixed-point multipliers: edgebuild.tflite) — keeps its
integer reference and C emitter per op in its own table (ops.extension.Extensions), and
registers it here by name; `model.format` in a manifest picks one. The build asks this
module, never a format's table directly, so a format is one module and one line in
FORMATS.

A format's reference takes (layer, the format's per-layer record, inputs, rounding); its C
emitter a CStep whose `numbers` holds that record.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.ops import OPS
from edgebuild.ops.operator import C, Role, Unsupported

if TYPE_CHECKING:
    from edgebuild.core.geometry import Shape, Window
    from edgebuild.ops.extension import Extensions
    from edgebuild.ops.operator import Ints

OWN = "edgebuild"
# format name -> the module whose FORMAT is its table (imported on first use)
FORMATS = {"tflite": "edgebuild.tflite.operators"}
NAMES = (OWN, *FORMATS)

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


def untiled(layer: Any, in_shapes: Sequence[Shape], out_shape: Shape
            ) -> tuple[tuple[str, Window], ...]:
    """No windowed pass: the layer runs whole between arena tensors."""
    return ()


def table(name: str) -> Extensions[FormatOp]:
    module = importlib.import_module(FORMATS[name])
    found: Extensions[FormatOp] = module.FORMAT
    return found


def records(name: str, arrays: dict[str, Any], layers: Sequence[str]) -> dict[str, Any]:
    """The format's per-layer records of `layers` from its weights file's arrays (the
    layers that have one: views have none)."""
    module = importlib.import_module(FORMATS[name])
    found: dict[str, Any] = module.records(arrays, layers)
    return found


def _view(op: str) -> bool:
    """Views compute nothing: every format reads their bytes the same way."""
    return OPS[op].role is Role.view


def reference(op: str, name: str = OWN) -> Reference | Unsupported:
    if name == OWN or _view(op):
        return OPS[op].reference
    found = table(name).for_op(op)
    return found if isinstance(found, Unsupported) else found.reference


def c(op: str, name: str = OWN) -> C | Unsupported:
    if name == OWN or _view(op):
        return OPS[op].c
    found = table(name).for_op(op)
    return found if isinstance(found, Unsupported) else found.c


def windows(op: str, name: str = OWN) -> Windows:
    if name == OWN:
        return OPS[op].windows
    found = table(name).get(op)
    return untiled if found is None or found.windows is None else found.windows
