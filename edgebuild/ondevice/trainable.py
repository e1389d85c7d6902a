"""Resolving the manifest's `ondevice` section: the trainable layers, the train graph,
its memory and whether it fits — the same answer at `check` time (before any training)
and in the `ondevice` stage."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from edgebuild.core.geometry import Shape
from edgebuild.manifest.ondevice import Ondevice, unsupported
from edgebuild.ondevice import backward
from edgebuild.ondevice import memory as training_memory
from edgebuild.ops.c import Activated
from edgebuild.ops.operator import ComputeLayer, LayerBase

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer, Manifest
    from edgebuild.model.quantized import QuantizedModel

# A path into the manifest document and what is wrong there.
Problem = tuple[tuple[str | int, ...], str]


@dataclass(frozen=True)
class Resolved:
    names: tuple[str, ...]
    scopes: dict[str, str]
    graph: backward.TrainGraph
    memory: training_memory.Summary
    choices: list[training_memory.Choice]
    buffers: list[training_memory.Buffer]  # what the generated code declares


def settings(spec: Ondevice, l1: int) -> training_memory.Settings:
    optimizer = spec.optimizer.settings
    slots = training_memory.optimizer_slots(spec.optimizer.kind, getattr(optimizer, "momentum", 0))
    return training_memory.Settings(spec.batch, slots, l1, spec.loss.value)


def resolve(spec: Ondevice, layers: tuple[LayerBase, ...], input_shape: Shape,
            l1: int) -> Resolved:
    """Raises training_memory.SelectionError / backward.TrainGraphError on bad input.
    `layers`: the deployed (folded) manifest layers."""
    # Layer records (folding's output); pipeline.validation passes them annotated LayerBase
    layers = cast("tuple[Layer, ...]", layers)
    scope_map = {name: scope.value for name, scope in spec.scope.items()}
    chosen = settings(spec, l1)
    names = training_memory.choose(spec.trainable, layers, input_shape, scope_map, chosen)
    graph, memory = training_memory.evaluate(layers, input_shape, names, scope_map, chosen)
    options = training_memory.choices(layers, input_shape, scope_map, chosen)
    found = training_memory.buffers(graph, chosen.batch, chosen.slots, math.prod(input_shape),
                                    chosen.loss)
    return Resolved(names, training_memory.scopes_for(names, scope_map), graph, memory, options,
                    found)


def problems(manifest: Manifest, layers: tuple[Layer, ...]) -> list[Problem]:
    """(manifest path, message) for every problem of the `ondevice` section."""
    spec = manifest.ondevice
    if spec is None:
        return []
    found: list[Problem] = [(("ondevice", "optimizer", *path), message)
                            for path, message in unsupported(spec.optimizer)]
    if manifest.dataset is None:
        found.append((("ondevice",), "on-device training needs a dataset to draw its "
                                     "training batches from; add a `dataset` section"))
    found += _names(spec, layers) + _scopes(spec, layers) + _loss(spec, layers)
    if found:
        return found
    return _resolution(manifest, layers)


def _names(spec: Ondevice, layers: tuple[Layer, ...]) -> list[Problem]:
    """Every layer name the section gives must exist."""
    names = {layer.name for layer in layers}
    hint = f"layers with weights: {', '.join(backward.weighted_layers(layers))}"
    found: list[Problem] = []
    if isinstance(spec.trainable, list):
        found += [(("ondevice", "trainable", i), f"no layer named '{name}'; {hint}")
                  for i, name in enumerate(spec.trainable) if name not in names]
    return found + [(("ondevice", "scope", name), f"no layer named '{name}'; {hint}")
                    for name in spec.scope if name not in names]


def _scopes(spec: Ondevice, layers: tuple[Layer, ...]) -> list[Problem]:
    """A scope names a trainable layer with weights (and a bias for `bias`)."""
    by_name = {layer.name: layer for layer in layers}
    weighted = backward.weighted_layers(layers)
    found: list[Problem] = []
    for name, scope in spec.scope.items():
        layer = by_name.get(name)
        if layer is None:
            continue
        if not backward.weighted(layer):
            found.append((("ondevice", "scope", name), (
                f"'{name}' ({layer.op}) has no weights; scope applies to layers with weights: "
                f"{', '.join(weighted)}")))
        # a layer with weights is a compute layer: ComputeLayer's fields
        elif scope.value == "bias" and not cast(ComputeLayer, layer).bias:
            found.append((("ondevice", "scope", name), (
                f"'{name}' has no bias (bias: false), so `bias` leaves nothing to train; "
                "use all")))
        elif isinstance(spec.trainable, list) and name not in spec.trainable:
            found.append((("ondevice", "scope", name), (
                f"'{name}' is not trained (trainable: {', '.join(spec.trainable)}); add it "
                "there or remove this entry")))
    return found


def _loss(spec: Ondevice, layers: tuple[Layer, ...]) -> list[Problem]:
    """cross_entropy reads raw class scores: the last layer has no activation."""
    out = layers[-1]
    if spec.loss.value == "cross_entropy" and \
            getattr(getattr(out, "act", None), "value", "none") != "none":
        return [(("ondevice", "loss"), (
            f"cross_entropy needs raw class scores, but the last layer '{out.name}' applies "
            f"{cast(Activated, out).act.value}; use `act: none` on it or loss: mse"))]
    return []


def _resolution(manifest: Manifest, layers: tuple[Layer, ...]) -> list[Problem]:
    spec = manifest.ondevice
    assert spec is not None  # problems() resolves a manifest's `ondevice` section
    memory = manifest.target.memory
    try:
        resolved = resolve(spec, layers, tuple(manifest.model.input), memory.l1)
    except training_memory.SelectionError as exc:
        return [(("ondevice", "trainable"), str(exc))]
    except backward.TrainTilingError as exc:
        return [(("target", "memory", "l1"), str(exc))]
    except backward.TrainGraphError as exc:
        return [(("ondevice", "trainable"), str(exc))]
    arena = inference_arena(layers, tuple(manifest.model.input))
    l2 = training_memory.l2_ram(resolved.memory)
    if l2 + arena > memory.l2:
        smallest = resolved.choices[0]
        return [(("ondevice", "trainable"), (
            f"training {', '.join(resolved.names)} needs {l2} bytes of L2 RAM besides the "
            f"{arena}-byte inference arena, {l2 + arena} in all, but target.memory.l2 is "
            f"{memory.l2}; training only {smallest.layers[0]} needs {smallest.ram} + {arena} "
            f"bytes"))]
    return []


def inference_arena(layers: tuple[Layer, ...], input_shape: Shape) -> int:
    """Bytes of the int8 inference arena the frozen prefix runs in (the plan stage's
    figure: the same planner on the same layers)."""
    from edgebuild.memory.plan import make_plan

    return make_plan(input_shape, layers, 0).arena_bytes


def dequantized(model: QuantizedModel, name: str
                ) -> tuple[NDArray[np.float32], NDArray[np.float32] | None]:
    """Float32 (weight, bias) of a deployed layer: the real values of its integers."""
    import numpy as np

    quant = model.params[name]
    shift = quant.shift
    weight = (quant.weight.astype(np.float64) * 2.0 ** shift).astype(np.float32)
    bias = None if quant.bias is None else (
        quant.bias.astype(np.float64) * 2.0 ** shift / 128.0).astype(np.float32)
    return weight, bias


def initial_parameters(model: QuantizedModel, graph: backward.TrainGraph
                       ) -> dict[str, NDArray[np.float32]]:
    """name.weight / name.bias -> float32 array in the training kernels' shapes."""
    values = {}
    for layer in graph.layers:
        if not layer.weighted:
            continue
        weight, bias = dequantized(model, layer.name)
        values[f"{layer.name}.weight"] = weight.reshape(layer.weight_shape)
        if bias is not None:
            values[f"{layer.name}.bias"] = bias
    return values
