"""Number formats as plugins: how an op computes in each integer format edgebuild deploys.

edgebuild's own format (power-of-two scales, no zero points: core.numerics) is the
operator records' own `reference`, `c` and `windows` facets. Another format — TFLite's
int8 (zero points, per-channel fixed-point multipliers: edgebuild.tflite) — keeps its
integer reference and C emitter per op in its own table (ops.extension.Extensions), and
registers it here by name; `model.format` in a manifest picks one. The build asks this
module, never a format's table directly, so a format is one package (formats/<name>/) and
one line in FORMATS. May import: core, ops (and the formats' packages).

A format's reference takes (layer, the format's per-layer record, inputs, rounding); its C
emitter a CStep whose `numbers` holds that record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from edgebuild.formats.plugin import FormatOp, Reference, Windows
from edgebuild.formats.tflite import operators as tflite_format
from edgebuild.ops import OPS
from edgebuild.ops.operator import C, Role, Unsupported

if TYPE_CHECKING:
    from edgebuild.core.geometry import Shape, Window
    from edgebuild.ops.extension import Extensions

OWN = "edgebuild"
# format name -> its table, imported here by name so that every stage's code key follows
# the format's reference and C (build.definitions reads static imports only)
FORMATS: dict[str, Extensions[FormatOp]] = {"tflite": tflite_format.FORMAT}
NAMES = (OWN, *FORMATS)

def untiled(layer: Any, in_shapes: Sequence[Shape], out_shape: Shape
            ) -> tuple[tuple[str, Window], ...]:
    """No windowed pass: the layer runs whole between arena tensors."""
    return ()


def table(name: str) -> Extensions[FormatOp]:
    return FORMATS[name]


def records(name: str, arrays: dict[str, Any], layers: Sequence[str]) -> dict[str, Any]:
    """The format's per-layer records of `layers` from its weights file's arrays (the
    layers that have one: views have none)."""
    assert name == "tflite", name  # the one other format: its records
    return dict(tflite_format.records(arrays, layers))


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
