"""Memory of on-device training: the buffers the generated training code declares.

The generated C (edgebuild/traincode.py) allocates exactly `buffers(...)`, so the
estimate is the RAM the training code adds on top of the inference arena, not a guess:
- saved activations: every float tensor of the trainable part, for the whole batch
  (boundary tensors converted from int8, pre-activations, pooled inputs, outputs);
- activation gradients: the same for every tensor a gradient flows through;
- trainable weights (RAM, float32) and their gradients; frozen weights of the float part
  stay const in flash and are counted under `flash`;
- optimizer state: SGD momentum 1x the trainable parameters (none without momentum),
  Adam 2x (first and second moments);
- the int8 input batch, its labels, and the one-hot target of an MSE loss.

`choose` turns the manifest's `trainable` (names, last N, or a budget) into per-layer scopes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from edgebuild.core import boundedjson
from edgebuild.core.geometry import Shape
from edgebuild.ondevice import backward

if TYPE_CHECKING:
    from edgebuild.manifest import Layer
    from edgebuild.manifest.ondevice import Budget, Last

FLOAT = 4


@dataclass(frozen=True)
class Buffer:
    name: str  # C symbol stem
    elements: int
    kind: str  # activation, gradient, weight, weight_gradient, optimizer, batch, frozen
    bytes_per: int = FLOAT

    @property
    def bytes(self) -> int:
        return self.elements * self.bytes_per


def optimizer_slots(kind: str, momentum: float = 0.0) -> int:
    """State tensors per trainable tensor."""
    if kind == "adam":
        return 2
    return 1 if momentum > 0 else 0


def buffers(graph: backward.TrainGraph, batch: int, slots: int, input_size: int,
            loss: str) -> list[Buffer]:
    found = [Buffer(f"x_{name}", batch * size, "activation") for name, size in
             sorted(graph.tensors.items())]
    found += [Buffer(f"d_{name}", batch * graph.tensors[name], "gradient")
              for name in sorted(graph.needs_grad)]
    for name, shape in graph.parameters():
        count = math.prod(shape)
        found += [Buffer(f"p_{name}", count, "weight"), Buffer(f"g_{name}", count,
                                                               "weight_gradient")]
        found += [Buffer(f"s{slot}_{name}", count, "optimizer") for slot in range(slots)]
    for layer in graph.layers:
        if layer.weighted and layer.scope != "all":
            found.append(Buffer(f"c_{layer.name}.weight", math.prod(layer.weight_shape), "frozen"))
        if layer.weighted and layer.bias and layer.scope is None:
            found.append(Buffer(f"c_{layer.name}.bias", layer.weight_shape[0], "frozen"))
    found += [Buffer("batch_inputs", batch * input_size, "batch", 1),
              Buffer("batch_labels", batch, "batch")]
    if loss == "mse":
        found.append(Buffer("batch_target", batch * graph.output_size, "batch"))
    return found


class Summary(TypedDict):
    """Training memory in bytes: RAM (everything but the frozen weights), flash (the frozen
    weights) and bytes per buffer kind."""

    ram: int
    flash: int
    by_kind: dict[str, int]


def summary(found: list[Buffer]) -> Summary:
    """Bytes per kind; `ram` is everything but the frozen (flash) weights."""
    kinds: dict[str, int] = {}
    for buffer in found:
        kinds[buffer.kind] = kinds.get(buffer.kind, 0) + buffer.bytes
    ram = sum(b.bytes for b in found if b.kind != "frozen")
    return {"ram": ram, "flash": kinds.get("frozen", 0), "by_kind": dict(sorted(kinds.items()))}


@dataclass(frozen=True)
class Choice:
    """One way to choose the trainable layers, and what it needs."""

    layers: tuple[str, ...]
    ram: int

    def to_json(self) -> dict[str, Any]:
        return {"layers": list(self.layers), "ram": self.ram}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Choice:
        return cls(tuple(data["layers"]), data["ram"])


@dataclass(frozen=True)
class TrainingMemory:
    """What training the chosen layers needs on the device, next to the inference arena
    (`memory.json` of the `ondevice` stage, schema schemas/artifacts/memory.v1.schema.json),
    and what every "last N" choice would need (the report's table)."""

    ram: int  # training buffers, on top of the arena
    flash: int  # frozen float weights of the trainable part
    by_kind: dict[str, int]  # buffer kind -> bytes (see `buffers`), sorted by kind
    arena: int  # the inference arena (plan.json)
    total_ram: int
    trainable: tuple[str, ...]
    choices: tuple[Choice, ...]

    @classmethod
    def of(cls, summary: Summary, arena: int, trainable: Sequence[str],
           choices: Sequence[Choice]) -> TrainingMemory:
        """From `summary` of the chosen buffers and the plan's arena."""
        return cls(summary["ram"], summary["flash"], dict(summary["by_kind"]), arena,
                   summary["ram"] + arena, tuple(trainable), tuple(choices))

    def to_json(self) -> dict[str, Any]:
        return {"ram": self.ram, "flash": self.flash, "by_kind": dict(self.by_kind),
                "arena": self.arena, "total_ram": self.total_ram,
                "trainable": list(self.trainable),
                "choices": [choice.to_json() for choice in self.choices]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingMemory:
        return cls(data["ram"], data["flash"], dict(data["by_kind"]), data["arena"],
                   data["total_ram"], tuple(data["trainable"]),
                   tuple(Choice.from_json(c) for c in data["choices"]))

    @classmethod
    def load(cls, directory: Path) -> TrainingMemory:
        return cls.from_json(boundedjson.read(directory / "memory.json"))


def scopes_for(names: Iterable[str], scope_map: dict[str, str]) -> dict[str, str]:
    return {name: scope_map.get(name, "all") for name in names}


def evaluate(layers: tuple[Layer, ...], input_shape: Shape, names: Iterable[str],
             scope_map: dict[str, str], settings: Settings
             ) -> tuple[backward.TrainGraph, Summary]:
    """(train graph, memory summary) for training `names`."""
    graph = backward.build(layers, input_shape, scopes_for(names, scope_map), settings.batch,
                           settings.l1)
    found = buffers(graph, settings.batch, settings.slots, math.prod(input_shape), settings.loss)
    return graph, summary(found)


@dataclass(frozen=True)
class Settings:
    batch: int
    slots: int
    l1: int
    loss: str


def choices(layers: tuple[Layer, ...], input_shape: Shape, scope_map: dict[str, str],
            settings: Settings) -> list[Choice]:
    """Training the last 1, 2, ... layers with weights: the memory table of the report."""
    weighted = backward.weighted_layers(layers)
    found = []
    for count in range(1, len(weighted) + 1):
        names = tuple(weighted[-count:])
        _, memory = evaluate(layers, input_shape, names, scope_map, settings)
        found.append(Choice(names, memory["ram"]))
    return found


class SelectionError(ValueError):
    """The trainable layers cannot be chosen; the message says what would work."""


def choose(trainable: list[str] | Last | Budget, layers: tuple[Layer, ...],
           input_shape: Shape, scope_map: dict[str, str],
           settings: Settings) -> tuple[str, ...]:
    """Layer names from `ondevice.trainable` (a list, {last: N} or {budget: bytes})."""
    weighted = backward.weighted_layers(layers)
    if isinstance(trainable, list):
        return tuple(trainable)
    if hasattr(trainable, "last"):
        if trainable.last > len(weighted):
            raise SelectionError(f"last: {trainable.last} but the model has only "
                                 f"{len(weighted)} layers with weights ({', '.join(weighted)})")
        return tuple(weighted[-trainable.last:])
    options = choices(layers, input_shape, scope_map, settings)
    fitting = [c for c in options if c.ram <= trainable.budget]
    if not fitting:
        smallest = options[0]
        raise SelectionError(
            f"budget {trainable.budget} bytes is too small for even the last layer: training "
            f"{smallest.layers[0]} needs {smallest.ram} bytes")
    return fitting[-1].layers
