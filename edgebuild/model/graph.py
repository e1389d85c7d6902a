"""The typed graph every stage after `validate` speaks: named nodes with inferred shapes.

Layers bind by name, never by position: a layer's `inputs:` names earlier layers (or
`input`, the model input); without `inputs:` it reads the layer just before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast, overload

from edgebuild.core import boundedjson
from edgebuild.core.geometry import Shape, ShapeError
from edgebuild.ops import OPS
from edgebuild.ops.operator import ComputeLayer, G, Role

if TYPE_CHECKING:
    import torch
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer

INPUT = "input"


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    params: int
    macs: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "inputs": list(self.inputs),
                "in_shapes": [list(shape) for shape in self.in_shapes],
                "out_shape": list(self.out_shape), "params": self.params, "macs": self.macs}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Node:
        return cls(data["name"], data["op"], tuple(data["inputs"]),
                   tuple(tuple(shape) for shape in data["in_shapes"]), tuple(data["out_shape"]),
                   data["params"], data["macs"])


@dataclass(frozen=True)
class Graph:
    input: Shape
    nodes: tuple[Node, ...]

    @property
    def output(self) -> Node:
        return self.nodes[-1]

    @property
    def params(self) -> int:
        return sum(n.params for n in self.nodes)

    @property
    def macs(self) -> int:
        return sum(n.macs for n in self.nodes)

    def to_json(self) -> dict[str, Any]:
        """graph.json (stage validate; schemas/artifacts/graph.v1.schema.json). `params`
        and `macs` are the totals, written for readers of the file."""
        return {"input": list(self.input), "nodes": [n.to_json() for n in self.nodes],
                "params": self.params, "macs": self.macs}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Graph:
        return cls(tuple(data["input"]), tuple(Node.from_json(n) for n in data["nodes"]))

    @classmethod
    def load(cls, directory: Path) -> Graph:
        """The graph the `validate` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "graph.json"))


@dataclass(frozen=True)
class GraphProblem:
    """A problem at `model.layers[index]` (field `field`, e.g. 'inputs' or 'out')."""

    index: int
    field: str
    message: str


def _inputs(layer: Layer, index: int, previous: str) -> tuple[str, ...]:
    return layer.inputs if layer.inputs is not None else (previous,)


def _node(layer: Layer, inputs: tuple[str, ...], shapes: dict[str, Shape]) -> Node:
    op = OPS[layer.op]
    in_shapes = [shapes[name] for name in inputs]
    if op.arity == "one" and len(in_shapes) != 1:
        raise ShapeError(f"{layer.op} takes exactly one input, got {len(in_shapes)}")
    out = tuple(op.out_shape(layer, in_shapes))
    if any(d < 1 for d in out):
        raise ShapeError(f"output shape {list(out)} has an empty dimension")
    return Node(layer.name, layer.op, inputs, tuple(map(tuple, in_shapes)), out,
                op.param_count(layer, in_shapes), op.macs(layer, in_shapes, out))


def build(input_shape: Shape, layers: tuple[Layer, ...]) -> tuple[Graph | None, list[GraphProblem]]:
    """Infer every shape; collect every problem instead of stopping at the first."""
    shapes: dict[str, Shape] = {INPUT: tuple(input_shape)}
    nodes: list[Node] = []
    problems: list[GraphProblem] = []
    previous = INPUT
    failed: set[str] = set()  # layers already reported: their consumers are not blamed
    for index, layer in enumerate(layers):
        if layer.name in shapes:
            problems.append(GraphProblem(index, "name", f"layer name {layer.name!r} is used twice"
                                         if layer.name != INPUT else "'input' names the model input"))
            continue
        inputs = _inputs(layer, index, previous)
        unknown = [name for name in inputs if name not in shapes and name not in failed]
        if unknown:
            problems.append(GraphProblem(index, "inputs", f"{unknown[0]!r} names no earlier layer "
                                         f"(earlier: {', '.join(shapes)})"))
        if unknown or any(name in failed for name in inputs):
            failed.add(layer.name)
            previous = layer.name
            continue
        try:
            node = _node(layer, inputs, shapes)
        except ShapeError as exc:
            problems.append(GraphProblem(index, "", f"layer {layer.name!r} ({layer.op}): {exc}"))
            failed.add(layer.name)
            previous = layer.name
            continue
        nodes.append(node)
        shapes[layer.name] = node.out_shape
        previous = layer.name
    _check_wide(layers, problems)
    if not problems:
        _check_batchnorm(layers, nodes, problems)
        _check_buffer(layers, nodes, problems)
    return (None if problems else Graph(tuple(input_shape), tuple(nodes))), problems


def _check_batchnorm(layers: tuple[Layer, ...], nodes: list[Node],
                     problems: list[GraphProblem]) -> None:
    """A folded layer (batchnorm) merges into its producer, so the producer must be a
    compute layer without an activation whose only consumer is this layer."""
    by_name = {layer.name: layer for layer in layers}
    consumers: dict[str, int] = {}
    for node in nodes:
        for name in node.inputs:
            consumers[name] = consumers.get(name, 0) + 1
    compute = [op.name for op in OPS.values() if op.computes]
    for index, node in enumerate(nodes):
        if OPS[node.op].role is not Role.folded:
            continue
        producer = by_name.get(node.inputs[0])
        if producer is None or not OPS[producer.op].computes:
            problem = (f"must directly follow a {', '.join(compute[:-1])} or "
                       f"{compute[-1]} layer (it is folded into it)")
        # A compute op's layer record (its operator says it computes) has ComputeLayer's fields.
        elif (weighted := cast(ComputeLayer, producer)).act.value != "none" or weighted.wide:
            problem = (f"folds into {producer.name!r}, which must have `act: none` and no `wide` "
                       f"(put the activation on the {node.op})")
        elif consumers.get(producer.name, 0) != 1:
            problem = f"folds into {producer.name!r}, whose output must feed only this {node.op}"
        else:
            continue
        problems.append(GraphProblem(index, "", f"{node.op} {node.name!r} {problem}"))


def streaming(layer: Layer) -> bool:
    """The layer keeps state across inferences (ops: a `stream` facet, e.g. a buffer)."""
    return OPS[layer.op].stream is not None


def frames(layers: tuple[Layer, ...]) -> int:
    """Frames per sample: a model with a stateful layer (a `buffer`) learns from clips of
    its frames (see ops/buffer.py); any other model from single samples (1)."""
    for layer in layers:
        stream = OPS[layer.op].stream
        if stream is not None:
            return stream.frames(layer)
    return 1


def sample_shape(input_shape: Shape, layers: tuple[Layer, ...]) -> Shape:
    """The shape of one dataset sample: `model.input`, or a clip (frames, *model.input)."""
    count = frames(layers)
    return tuple(input_shape) if count == 1 else (count, *input_shape)


@overload
def per_frame(x: torch.Tensor, layers: tuple[Layer, ...]) -> torch.Tensor: ...


@overload
def per_frame(x: NDArray[G], layers: tuple[Layer, ...]) -> NDArray[G]: ...


def per_frame(x: torch.Tensor | NDArray[Any],
              layers: tuple[Layer, ...]) -> torch.Tensor | NDArray[Any]:
    """A batch of samples as the batch the first layer reads: clips (N, frames, ...) become
    N x frames frames, in order (the buffer regroups them); other batches are unchanged.
    Works on torch tensors and numpy arrays alike."""
    return x if frames(layers) == 1 else x.reshape(-1, *x.shape[2:])


def _check_buffer(layers: tuple[Layer, ...], nodes: list[Node],
                  problems: list[GraphProblem]) -> None:
    """Layers before a buffer run once per frame, layers after it once per window, so no
    layer may read both sides, there is at most one buffer, and the output follows it."""
    index = {layer.name: i for i, layer in enumerate(layers)}
    buffers = [node for node in nodes if OPS[node.op].stream is not None]
    for extra in buffers[1:]:
        problems.append(GraphProblem(index[extra.name], "op", (
            f"a model has at most one buffer; {buffers[0].name!r} is the first")))
    if len(buffers) != 1:
        return
    after = {buffers[0].name}
    for node in nodes:
        if node.name == buffers[0].name:
            continue
        sides = {name in after for name in node.inputs}
        if sides == {True}:
            after.add(node.name)
        elif len(sides) == 2:
            before = [name for name in node.inputs if name not in after]
            problems.append(GraphProblem(index[node.name], "inputs", (
                f"{node.name!r} reads {before[0]!r}, computed per frame before buffer "
                f"{buffers[0].name!r}, together with data after it (one window); a layer reads "
                "one side only")))
    if nodes[-1].name not in after:
        problems.append(GraphProblem(index[nodes[-1].name], "", (
            f"the model's output {nodes[-1].name!r} must come after buffer {buffers[0].name!r}, "
            "which otherwise has no effect")))


def _check_wide(layers: tuple[Layer, ...], problems: list[GraphProblem]) -> None:
    for index, layer in enumerate(layers[:-1]):
        if getattr(layer, "wide", False):
            problems.append(GraphProblem(index, "wide", "`wide: true` (int32 output) is only "
                                         "allowed on the last layer"))


def table(graph: Graph) -> str:
    """A human-readable per-layer table (printed on stderr by the validate stage)."""
    rows = [("layer", "op", "input", "output", "params", "MACs")]
    for n in graph.nodes:
        rows.append((n.name, n.op, " + ".join(str(list(s)) for s in n.in_shapes),
                     str(list(n.out_shape)), str(n.params), str(n.macs)))
    rows.append(("total", "", str(list(graph.input)), str(list(graph.output.out_shape)),
                 str(graph.params), str(graph.macs)))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    return "\n".join("  ".join(c.ljust(w) if i < 4 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)
