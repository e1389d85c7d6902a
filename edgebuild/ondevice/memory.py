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
- the int8 input batch, its labels, and the one-hot target of an MSE loss;
- the L1 buffer the tiled passes stage through (`l1`, ondevice.tiling): the largest tile
  of any pass that does not fit L1 whole; none when every pass fits.

The plan's L1 and L2 figures (`TrainingMemory`): the L1 peak is the largest working set of
any pass (a tile's, or a whole pass's that fits), the L2 bytes are every training buffer
but the L1 one plus the inference arena (next to the most of them a step needs at once,
ondevice.lifetime), and the traffic is what the passes move between the two, next to what
any tiling moves at least.

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
from edgebuild.ondevice.tiling import Pass

if TYPE_CHECKING:
    from edgebuild.manifest import Layer
    from edgebuild.manifest.ondevice import Budget, Last

FLOAT = 4


@dataclass(frozen=True)
class Buffer:
    name: str  # C symbol stem
    elements: int
    kind: str  # activation, gradient, weight, weight_gradient, optimizer, batch, frozen, l1
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
    staged = l1_buffer(graph)
    if staged:
        found.append(Buffer(L1_BUFFER, staged // FLOAT, "l1"))
    return found


L1_BUFFER = "ebt_l1"  # the generated code's L1 buffer (codegen.L1)


def l1_buffer(graph: backward.TrainGraph) -> int:
    """Bytes of the L1 buffer: the largest tile of a tiled pass (0: nothing is tiled)."""
    return max((p.l1_bytes for p in graph.passes if p.tiled), default=0)


class Summary(TypedDict):
    """Training memory in bytes: RAM (everything but the frozen weights), flash (the frozen
    weights) and bytes per buffer kind."""

    ram: int
    flash: int
    by_kind: dict[str, int]
    l1: L1Plan


def l2_ram(found: Summary) -> int:
    """The training buffers in L2: all but the frozen weights and the L1 buffer."""
    return found["ram"] - found["l1"]["l1_buffer"]


class L1Plan(TypedDict):
    """How the passes fit L1 (memory.json's `l1_*`, `traffic*` and `passes`)."""

    l1_peak: int
    l1_buffer: int
    traffic: int
    traffic_lower_bound: int
    passes: list[dict[str, Any]]


def summary(found: list[Buffer], graph: backward.TrainGraph) -> Summary:
    """Bytes per kind; `ram` is everything but the frozen (flash) weights."""
    kinds: dict[str, int] = {}
    for buffer in found:
        kinds[buffer.kind] = kinds.get(buffer.kind, 0) + buffer.bytes
    ram = sum(b.bytes for b in found if b.kind != "frozen")
    passes = graph.passes
    l1: L1Plan = {"l1_peak": max((p.l1_bytes for p in passes), default=0),
                  "l1_buffer": l1_buffer(graph),
                  "traffic": sum(p.traffic for p in passes),
                  "traffic_lower_bound": sum(p.lower_bound for p in passes),
                  "passes": [p.to_json() for p in passes]}
    return {"ram": ram, "flash": kinds.get("frozen", 0), "by_kind": dict(sorted(kinds.items())),
            "l1": l1}


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

    ram: int  # training buffers (the L1 one too), on top of the arena
    flash: int  # frozen float weights of the trainable part
    by_kind: dict[str, int]  # buffer kind -> bytes (see `buffers`), sorted by kind
    arena: int  # the inference arena (plan.json)
    total_ram: int
    trainable: tuple[str, ...]
    choices: tuple[Choice, ...]
    l1_budget: int  # target.memory.l1
    l1_peak: int  # the largest working set of any pass
    l1_buffer: int  # the L1 buffer of the generated code (by_kind l1)
    l2_budget: int  # target.memory.l2
    l2_bytes: int  # everything else: training buffers but the L1 one, and the arena
    l2_lower_bound: int  # the most of it needed at once (ondevice.lifetime)
    traffic: int  # bytes the passes move between L2 and L1 in one step
    traffic_lower_bound: int  # what any tiling of them moves at least
    passes: tuple[Pass, ...]

    @classmethod
    def of(cls, summary: Summary, arena: int, trainable: Sequence[str],
           choices: Sequence[Choice], l1: int, l2: int, l2_lower_bound: int) -> TrainingMemory:
        """From `summary` of the chosen buffers, the plan's arena, the budgets and the L2
        lower bound (ondevice.lifetime)."""
        plan = summary["l1"]
        return cls(summary["ram"], summary["flash"], dict(summary["by_kind"]), arena,
                   summary["ram"] + arena, tuple(trainable), tuple(choices), l1,
                   plan["l1_peak"], plan["l1_buffer"], l2,
                   l2_ram(summary) + arena, l2_lower_bound, plan["traffic"],
                   plan["traffic_lower_bound"],
                   tuple(Pass.from_json(p) for p in plan["passes"]))

    def to_json(self) -> dict[str, Any]:
        return {"ram": self.ram, "flash": self.flash, "by_kind": dict(self.by_kind),
                "arena": self.arena, "total_ram": self.total_ram,
                "trainable": list(self.trainable),
                "choices": [choice.to_json() for choice in self.choices],
                "l1_budget": self.l1_budget, "l1_peak": self.l1_peak,
                "l1_buffer": self.l1_buffer, "l2_budget": self.l2_budget,
                "l2_bytes": self.l2_bytes, "l2_lower_bound": self.l2_lower_bound,
                "traffic": self.traffic,
                "traffic_lower_bound": self.traffic_lower_bound,
                "passes": [p.to_json() for p in self.passes]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingMemory:
        return cls(data["ram"], data["flash"], dict(data["by_kind"]), data["arena"],
                   data["total_ram"], tuple(data["trainable"]),
                   tuple(Choice.from_json(c) for c in data["choices"]), data["l1_budget"],
                   data["l1_peak"], data["l1_buffer"], data["l2_budget"], data["l2_bytes"],
                   data["l2_lower_bound"], data["traffic"], data["traffic_lower_bound"],
                   tuple(Pass.from_json(p) for p in data["passes"]))

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
    return graph, summary(found, graph)


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
