"""The edgebuild model being built from a network description: its record, how one layer
is added to it (checked like a manifest layer), and layer names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgebuild.core.fields import C_KEYWORDS
from edgebuild.targets.max7800x.network.hardware import HardwareLayer, LayerDocument
from edgebuild.targets.max7800x.network.spec import Reporter, Spec

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer

NAME_LIMIT = 48


def identifier(text: str, used: set[str], limit: int = NAME_LIMIT) -> str:
    """A valid, unused edgebuild layer name made from `text`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "l"
    if not name[0].isalpha():
        name = "l" + name
    name = name[:limit]
    if name in C_KEYWORDS or name == "input":
        name = name[: limit - 1] + "_"
    base, n = name, 2
    while name in used:
        suffix = f"_{n}"
        name = base[: limit - len(suffix)] + suffix
        n += 1
    used.add(name)
    return name


@dataclass
class Built:
    """What the import has made so far: edgebuild layers (and the spec position each comes
    from), their output shapes, hardware layers and placement entries, integer weights,
    and notes for the warnings."""

    layers: list[LayerDocument] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)  # spec position of every layer
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    hardware: list[HardwareLayer] = field(default_factory=list)
    placement: dict[str, dict[str, Any]] = field(default_factory=dict)  # manifest entries
    weights: dict[str, NDArray[np.integer[Any]]] = field(default_factory=dict)  # weights.npz
    from_maps: list[str] = field(default_factory=list)  # layers whose channels came from maps
    weight_bits: dict[str, int] = field(default_factory=dict)  # `quantization`, no checkpoint
    shifts_ignored: list[str] = field(default_factory=list)  # `output_shift`, no checkpoint


def previous(built: Built) -> str:
    """What a layer without `inputs` reads: the layer before it (or the model input)."""
    return built.layers[-1]["name"] if built.layers else "input"


def first_input(linked: dict[str, Any], built: Built) -> str:
    """The first input of a layer whose `inputs` are `linked` (empty: the previous layer)."""
    return (linked.get("inputs") or [previous(built)])[0]


def emit(built: Built, report: Reporter, spec: Spec, p: int, layer: LayerDocument) -> bool:
    """Append one layer made for spec position `p` after checking it (edgebuild's layer
    record and shape rule); False after reporting why it is not a valid edgebuild layer."""
    from pydantic import TypeAdapter, ValidationError

    from edgebuild.core.geometry import ShapeError
    from edgebuild.ops import OPS, Layer

    try:
        record: Layer = TypeAdapter(Layer).validate_python(layer)
    except ValidationError as exc:
        for error in exc.errors():
            where = ".".join(str(x) for x in error["loc"][1:])
            report.layer_error(spec, None, f"gives edgebuild {layer['op']} layer "
                               f"{layer['name']!r} an invalid {where or 'record'}: "
                               f"{error['msg'].removeprefix('Value error, ')}")
        return False
    inputs = list(layer.get("inputs") or [previous(built)])
    shapes = [built.shapes[name] for name in inputs]
    try:
        if OPS[record.op].arity == "one" and len(shapes) != 1:
            raise ShapeError(f"takes one input, got {len(shapes)}")
        out = tuple(OPS[record.op].out_shape(record, shapes))
        if any(d < 1 for d in out):
            raise ShapeError(f"output shape {list(out)} has an empty dimension")
    except ShapeError as exc:
        described = " + ".join(str(list(s)) for s in shapes)
        report.layer_error(spec, None, f"edgebuild {record.op} layer {layer['name']!r} "
                           f"on input {described}: {exc}")
        return False
    built.layers.append(layer)
    built.origin.append(p)
    built.shapes[layer["name"]] = out
    return True
