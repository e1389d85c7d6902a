"""Pre-quantized weights named by `model.weights` (e.g. written by `edgebuild import-ai8x`).

File format (the quantize artifact's contract, one .npz): per compute layer `<name>.weight`
(integers of the layer's bit width, shape (out, in/groups, *kernel), (in, out/groups,
*kernel) for conv_transpose2d, or (out, features)),
`<name>.bits` and `<name>.scale_exp` (0-d integers, see numerics), and `<name>.bias`
(integers in accumulator units) when the layer has a bias. Layers bind by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from edgebuild.core.geometry import Shape
from edgebuild.ops import OPS
from edgebuild.ops.operator import ComputeLayer, Unsupported

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.core.numerics import Arithmetic
    from edgebuild.manifest import Layer
    from edgebuild.model.graph import Graph

Problem = tuple[tuple[str | int, ...], str]  # (path suffix below `model.weights`, message)


def expected_shape(layer: Layer, in_shape: Shape) -> Shape:
    """The weight tensor shape a layer needs (its op's stored layout)."""
    weights = OPS[layer.op].weights
    assert not isinstance(weights, Unsupported)
    return tuple(weights.shape(layer, tuple(in_shape)))


def check(path: Path, layers: tuple[Layer, ...], graph: Graph | None,
          numbers: Arithmetic | None) -> tuple[dict[str, int], list[Problem]]:
    """(bits per layer, problems as (path suffix, message)) for the weights file. `graph`:
    the folded layers' (graphs.build gives None only for layers with problems)."""
    from edgebuild.core import arrays, numerics

    try:
        source = arrays.load(path)
    except (OSError, ValueError) as exc:  # PickledData: its reason, never numpy's
        reason = exc.reason if isinstance(exc, arrays.PickledData) else exc
        return {}, [((), f"cannot read pre-quantized weights {path}: {reason}")]
    assert graph is not None  # the folded layers of a valid manifest build
    nodes = {node.name: node for node in graph.nodes}
    bits_of: dict[str, int] = {}
    problems: list[Problem] = []
    for layer in layers:
        if not OPS[layer.op].computes:
            continue
        name, node = layer.name, nodes[layer.name]
        missing = [f"{name}.{k}" for k in ("weight", "bits", "scale_exp") if f"{name}.{k}" not in source]
        if missing:
            problems.append(((), f"{path.name} has no {', '.join(missing)} for layer {name!r}"))
            continue
        weight, bits = source[f"{name}.weight"], int(source[f"{name}.bits"])
        scale_exp = int(source[f"{name}.scale_exp"])
        bits_of[name] = bits
        shape = expected_shape(layer, node.in_shapes[0])
        allowed_bits = numerics.WEIGHT_BITS if numbers is None else numbers.weight_bits
        low, high = numerics.weight_limits(bits) if bits in allowed_bits else (0, 0)
        limits = numerics.shift_limits(bits, None if numbers is None else numbers.total_shift)
        if tuple(weight.shape) != shape:
            problems.append(((), f"layer {name!r}: weights have shape {list(weight.shape)}, the "
                                 f"model needs {list(shape)}"))
        elif bits not in allowed_bits:
            problems.append(((), f"layer {name!r}: {bits}-bit weights; allowed: {allowed_bits}"))
        elif weight.size and (weight.min() < low or weight.max() > high):
            problems.append(((), f"layer {name!r}: weights {int(weight.min())}..{int(weight.max())} "
                                 f"do not fit {bits} bits ({low}..{high})"))
        if not limits[0] <= scale_exp <= limits[1]:
            problems.append(((), f"layer {name!r}: scale exponent {scale_exp} outside "
                                 f"{limits[0]}..{limits[1]} for {bits}-bit weights"))
        # A compute op's layer record (its operator says it computes) has ComputeLayer's fields.
        problems += _bias(path, cast(ComputeLayer, layer), source.get(f"{name}.bias"), numbers)
    extra = sorted({key.rsplit(".", 1)[0] for key in source} - {layer.name for layer in layers})
    if extra:
        problems.append(((), f"{path.name} has weights for {', '.join(extra)}, which the model "
                             "does not have (layers bind by name)"))
    return bits_of, problems


def _bias(path: Path, layer: ComputeLayer, bias: NDArray[Any] | None,
          numbers: Arithmetic | None) -> list[Problem]:
    name = layer.name
    if bias is None:
        return [((), f"layer {name!r} has `bias: true` but {path.name} has no {name}.bias; set "
                     "`bias: false`")] if layer.bias else []
    if not layer.bias:
        return [((), f"layer {name!r}: {path.name} has a bias but the layer says `bias: false`")]
    if tuple(bias.shape) != (layer.out,):
        return [((), f"layer {name!r}: bias has shape {list(bias.shape)}, needs [{layer.out}]")]
    if numbers is not None:
        step, limit = 1 << numbers.bias_scale_log2, 1 << (numbers.bias_bits - 1)
        if (bias % step).any() or (bias // step).min() < -limit or (bias // step).max() >= limit:
            return [((), f"layer {name!r}: the device's bias is a {numbers.bias_bits}-bit value "
                         f"times {step}; {path.name} holds other values")]
    return []
