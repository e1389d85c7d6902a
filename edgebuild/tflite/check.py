"""`edgebuild check` of a model in TFLite's number format: the weights file (tflite.quant's
keys) against the layers, every value inside what the C kernels take, and every op one the
format computes. Problems are (path suffix below `model.weights`, message) pairs, as
model.imported gives them for edgebuild's own format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from edgebuild.ops import OPS
from edgebuild.ops.operator import ComputeLayer, Role

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer
    from edgebuild.model.graph import Graph

Problem = tuple[tuple[str | int, ...], str]
INT8 = (-128, 127)
SHIFTS = (-31, 30)
MULTIPLIERS = (0, (1 << 31) - 1)


def check(path: Path, layers: tuple[Layer, ...], graph: Graph | None) -> list[Problem]:
    from edgebuild.core import arrays

    try:
        source = arrays.load(path)
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, arrays.PickledData) else exc
        return [((), f"cannot read the TFLite weights {path}: {reason}")]
    assert graph is not None
    nodes = {node.name: node for node in graph.nodes}
    problems: list[Problem] = []
    for key in ("input.scale", "input.zero_points"):
        if key not in source:
            problems.append(((), f"{path.name} has no {key}"))
    for layer in layers:
        if OPS[layer.op].role is Role.view:
            continue
        problems += [((), f"layer {layer.name!r}: {message}")
                     for message in _layer(source, layer, nodes[layer.name])]
    known = {layer.name for layer in layers} | {"input"}
    extra = sorted({key.rsplit(".", 1)[0] for key in source} - known)
    if extra:
        problems.append(((), f"{path.name} has values for {', '.join(extra)}, which the model "
                             "does not have (layers bind by name)"))
    return problems


def _layer(source: dict[str, NDArray[Any]], layer: Layer, node: Any) -> list[str]:
    import numpy as np

    name = layer.name
    needed = ["zero_points", "range", "scale"]
    if OPS[layer.op].computes:
        needed += ["weight", "multiplier", "shift"]
    if layer.op == "add":
        needed += ["multiplier", "shift", "left_shift"]
    if layer.op == "softmax":
        needed += ["multiplier", "left_shift", "diff_min"]
    missing = [f"{name}.{key}" for key in needed if f"{name}.{key}" not in source]
    if missing:
        return [f"the weights file has no {', '.join(missing)}"]
    problems = []
    zero_points = source[f"{name}.zero_points"].reshape(-1)
    if zero_points.size != len(node.in_shapes) + 1:
        problems.append(f"{zero_points.size} zero points; it needs {len(node.in_shapes) + 1} "
                        "(one per input, then the output's)")
    problems += _within(zero_points, INT8, "zero points")
    problems += _within(source[f"{name}.range"].reshape(-1), INT8, "activation range")
    if source[f"{name}.range"].size != 2 or \
            source[f"{name}.range"].reshape(-1)[0] > source[f"{name}.range"].reshape(-1)[-1]:
        problems.append("the activation range is [min, max] with min <= max")
    problems += _op_values(source, layer, node)
    if not np.isfinite(source[f"{name}.scale"]).all():
        problems.append("its output scale is not a finite number")
    return problems


def _op_values(source: dict[str, NDArray[Any]], layer: Layer, node: Any) -> list[str]:
    """The integers one kind of layer has beyond zero points and clamps."""
    name = layer.name
    if OPS[layer.op].computes:
        return _compute(source, layer, node)
    if layer.op == "add":
        return _lengths(source, name, 3, "(input 1, input 2, output)") + \
            _within(source[f"{name}.left_shift"].reshape(-1), (0, 24), "left shift")
    if layer.op == "softmax":
        return _within(source[f"{name}.multiplier"].reshape(-1), MULTIPLIERS, "multiplier") + \
            _within(source[f"{name}.left_shift"].reshape(-1), (0, 31), "left shift") + \
            _within(source[f"{name}.diff_min"].reshape(-1), (-(1 << 31), 0), "diff_min")
    return []


def _compute(source: dict[str, NDArray[Any]], layer: Layer, node: Any) -> list[str]:
    from edgebuild.model.imported import expected_shape

    name = layer.name
    compute = cast(ComputeLayer, layer)  # a compute op's record (its operator computes)
    out = compute.out
    weight = source[f"{name}.weight"]
    shape = expected_shape(layer, node.in_shapes[0])
    problems = []
    if tuple(weight.shape) != shape:
        problems.append(f"weights have shape {list(weight.shape)}, the layer needs {list(shape)}")
    problems += _within(weight.reshape(-1), INT8, "weights")
    bias = source.get(f"{name}.bias")
    if compute.bias != (bias is not None):
        problems.append("`bias:` in the manifest and the weights file disagree")
    elif bias is not None and bias.size != out:
        problems.append(f"{bias.size} biases for {out} output channels")
    problems += _lengths(source, name, out, "(one per output channel)")
    return problems


def _lengths(source: dict[str, NDArray[Any]], name: str, count: int, what: str) -> list[str]:
    multiplier, shift = source[f"{name}.multiplier"].reshape(-1), source[f"{name}.shift"].reshape(-1)
    if multiplier.size != count or shift.size != count:
        return [f"{multiplier.size} multipliers and {shift.size} shifts; it needs {count} "
                f"{what}"]
    return _within(multiplier, MULTIPLIERS, "multipliers") + _within(shift, SHIFTS, "shifts")


def _within(values: NDArray[Any], bounds: tuple[int, int], what: str) -> list[str]:
    if values.size and (values.dtype.kind not in "iu" or int(values.min()) < bounds[0]
                        or int(values.max()) > bounds[1]):
        return [f"{what} must be integers in {bounds[0]}..{bounds[1]}"]
    return []
