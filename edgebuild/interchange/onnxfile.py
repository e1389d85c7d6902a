"""A float ONNX model as `edgebuild import-onnx` reads it: its one input and output, the
nodes that compute on the input, every constant, every tensor's shape.

Exporters leave constants computed at run time: Constant nodes, an Identity of an
initializer (PyTorch shares equal initializers so), a Shape -> Gather -> Unsqueeze ->
Concat chain that builds a Reshape's target from the batch size. Every node whose inputs
are all known is evaluated here (onnx's reference evaluator, so its semantics are the
standard's), a Shape of a tensor whose shape is known too; what remains is the network.
Shapes come from onnx's shape inference with the batch dimension set to a number: the
input's own when it is fixed, else 2 (so a reshape that mixes samples shows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import UserError
from edgebuild.core.geometry import Shape

if TYPE_CHECKING:
    import onnx
    from numpy.typing import NDArray

SYMBOLIC_BATCH = 2  # the batch size shapes are inferred with when the file leaves it open


@dataclass(frozen=True)
class Source:
    """What translation needs of the file. `shapes` hold the batch dimension (`batch`);
    `consumers` counts the remaining nodes (and the graph output) reading each tensor."""

    path: Path
    input: str
    input_shape: Shape  # per sample
    output: str
    batch: int
    nodes: tuple[onnx.NodeProto, ...]
    constants: Mapping[str, NDArray[Any]]
    shapes: Mapping[str, Shape]
    consumers: Mapping[str, int]
    producer: str

    def sample_shape(self, tensor: str) -> Shape | None:
        """A tensor's per-sample shape, or None when unknown or not batch-first."""
        shape = self.shapes.get(tensor)
        if shape is None or not shape or shape[0] != self.batch:
            return None
        return shape[1:]


def read(path: Path) -> Source:
    """The model at `path`, folded; a user error when it cannot be read or has not one
    input and one output of known sample shape."""
    model = _load(path)
    graph = model.graph
    initialized = {init.name for init in graph.initializer}
    inputs = [value for value in graph.input if value.name not in initialized]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise UserError(f"{path}: edgebuild imports a model with one input and one output; "
                        f"this one has {len(inputs)} input(s) and {len(graph.output)} output(s)")
    batch, sample = _input_shape(path, inputs[0])
    shapes = _shapes(model, inputs[0].name, batch)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    constants, nodes = _fold(graph, shapes, opset)
    consumers = Counter(name for node in nodes for name in node.input if name)
    consumers[graph.output[0].name] += 1
    producer = f"{model.producer_name} {model.producer_version}".strip() or "an unknown producer"
    return Source(path, inputs[0].name, sample, graph.output[0].name, batch, tuple(nodes),
                  constants, shapes, dict(consumers), producer)


def _load(path: Path) -> onnx.ModelProto:
    import onnx

    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError (an untyped package) among others
        raise UserError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") \
            from None


def _input_shape(path: Path, value: onnx.ValueInfoProto) -> tuple[int, Shape]:
    """(batch size for shape inference, per-sample shape): the sample dimensions must be
    numbers, 1 to 3 of them (features, channels x length, channels x height x width)."""
    dims = [d.dim_value if d.HasField("dim_value") else None
            for d in value.type.tensor_type.shape.dim]
    sample = dims[1:]
    if not 2 <= len(dims) <= 4 or any(d is None or d < 1 for d in sample):
        shown = ["?" if d is None else d for d in dims]
        raise UserError(f"{path}: input {value.name!r} has shape {shown}; edgebuild needs a "
                        "batch dimension and 1 to 3 fixed sample dimensions, channels first "
                        "([N, features], [N, C, L] or [N, C, H, W])")
    batch = dims[0] if dims[0] else SYMBOLIC_BATCH
    return batch, tuple(d for d in sample if d is not None)


def _shapes(model: onnx.ModelProto, name: str, batch: int) -> dict[str, Shape]:
    """Every tensor shape shape inference can fix, with the batch dimension `batch`."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for value in copy.graph.input:
        if value.name == name:
            value.type.tensor_type.shape.dim[0].dim_value = batch
    inferred = onnx.shape_inference.infer_shapes(copy, data_prop=True)
    found: dict[str, Shape] = {}
    graph = inferred.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        dims = value.type.tensor_type.shape.dim
        if value.type.HasField("tensor_type") and all(d.HasField("dim_value") for d in dims):
            found[value.name] = tuple(d.dim_value for d in dims)
    return found


def _fold(graph: onnx.GraphProto, shapes: Mapping[str, Shape],
          opset: int) -> tuple[dict[str, NDArray[Any]], list[onnx.NodeProto]]:
    """(constants, the nodes left): initializers, then every node computable from them."""
    from onnx import numpy_helper

    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    left = []
    for node in graph.node:
        values = _evaluate(node, constants, shapes, opset)
        if values is None:
            left.append(node)
        else:
            constants.update(zip(node.output, values, strict=False))
    return constants, left


# Nodes never folded: their outputs differ from run to run.
_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
           "Multinomial", "Bernoulli"}


def _evaluate(node: onnx.NodeProto, constants: Mapping[str, NDArray[Any]],
              shapes: Mapping[str, Shape], opset: int) -> list[NDArray[Any]] | None:
    """The node's outputs when all its inputs are known (a Shape's input by its shape),
    else None."""
    import numpy as np

    if node.op_type in _RANDOM or node.domain not in ("", "ai.onnx"):
        return None
    feeds: dict[str, NDArray[Any]] = {}
    for name in filter(None, node.input):
        if name in constants:
            feeds[name] = constants[name]
        elif node.op_type == "Shape" and name in shapes:
            feeds[name] = np.zeros(shapes[name], dtype=np.float32)
        else:
            return None
    from onnx.reference import ReferenceEvaluator

    return [np.asarray(v) for v in ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)]
