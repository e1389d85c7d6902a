"""Constant folding of an imported ONNX model, bounded: every node whose inputs are all
known is evaluated (onnx's reference evaluator, so its semantics are the standard's), a
Shape of a tensor whose shape is known too, but only when that costs what its inputs and
outputs cost, and those are within interchange.limits.

Before a node runs, onnx's shape inference on that node alone, given its constant inputs,
says what it will produce; an output beyond the limits, or beyond what is left of the
model's total, is a user error with its size, and no array is allocated for it. Only
operators whose time and memory follow their inputs and outputs are folded: a Conv,
MatMul or Loop of constants within the limits could still run for hours (a Loop of 1e12
iterations, a convolution of two 64 MiB tensors), so such a node stays in the network,
where the importer rejects it as an operator edgebuild has no layer for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import Shape
from edgebuild.interchange import limits

if TYPE_CHECKING:
    from pathlib import Path

    import onnx
    from numpy.typing import NDArray

# Operators folded when all their inputs are known: data movement, shapes, element-wise
# arithmetic and reductions, each linear in its inputs and output. Random ones are not:
# their outputs differ from run to run.
FOLDABLE = frozenset({
    "Constant", "ConstantOfShape", "Identity", "Dropout", "Shape", "Size", "Cast", "CastLike",
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice",
    "Gather", "GatherElements", "Expand", "Tile", "Range", "Pad",
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log",
    "Floor", "Ceil", "Round", "Sign", "Min", "Max", "Sum", "Mean", "Clip", "Relu", "Sigmoid",
    "Tanh", "Erf", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And",
    "Or", "Xor", "Where", "ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin",
    "ReduceL1", "ReduceL2", "ReduceSumSquare", "DequantizeLinear", "QuantizeLinear",
})

# Constant inputs up to this many elements are shown to shape inference with their values
# (shapes, axes, pads, repeats: what an output's shape can depend on); larger ones by
# their shape only, so that they are not copied.
SHAPE_VALUES = 1024


def fold(path: Path, graph: onnx.GraphProto, constants: dict[str, NDArray[Any]],
         shapes: Mapping[str, Shape], opset: int,
         budget: limits.Budget) -> list[onnx.NodeProto]:
    """Fold every node computable from `constants` (the initializers) into them; the
    nodes left."""
    left = []
    for node in graph.node:
        values = _evaluate(path, node, constants, shapes, opset, budget)
        if values is None:
            left.append(node)
        else:
            constants.update(zip(node.output, values, strict=False))
    return left


def _evaluate(path: Path, node: onnx.NodeProto, constants: Mapping[str, NDArray[Any]],
              shapes: Mapping[str, Shape], opset: int,
              budget: limits.Budget) -> list[NDArray[Any]] | None:
    """The node's outputs when it folds (see the module docstring), else None."""
    if node.op_type not in FOLDABLE or node.domain not in ("", "ai.onnx"):
        return None
    feeds = _feeds(node, constants, shapes)
    if feeds is None:
        return None
    predicted = _predicted(node, feeds, opset)
    if predicted is None:
        return None
    for name, shape, itemsize in predicted:
        _check(path, node, name, shape, itemsize)
        budget.spend(f"the output {limits.printable(name)!r} of node "
                     f"{limits.describe(node)!r}", limits.elements(shape) * itemsize)
    values = _run(path, node, feeds, opset)
    for name, value in zip(node.output, values, strict=False):
        _check(path, node, name, value.shape, value.itemsize)  # should inference be wrong
    return values


def _check(path: Path, node: onnx.NodeProto, name: str, shape: Shape, itemsize: int) -> None:
    problem = limits.tensor_problem(shape, itemsize)
    if problem is not None:
        raise limits.refuse(path, f"node {limits.describe(node)!r}: its output "
                                  f"{limits.printable(name)!r}, a constant folded at import, "
                                  f"{problem}")


def _feeds(node: onnx.NodeProto, constants: Mapping[str, NDArray[Any]],
           shapes: Mapping[str, Shape]) -> dict[str, NDArray[Any]] | None:
    """The node's inputs when all are known (a Shape's input by its shape alone: a
    read-only view of one zero, whatever that shape), else None."""
    import numpy as np

    feeds: dict[str, NDArray[Any]] = {}
    for name in filter(None, node.input):
        if name in constants:
            feeds[name] = constants[name]
        elif node.op_type == "Shape" and len(shapes.get(name, ())) <= limits.MAX_RANK \
                and name in shapes:
            feeds[name] = np.broadcast_to(np.zeros((), np.float32), shapes[name])
        else:
            return None
    return feeds


def _predicted(node: onnx.NodeProto, feeds: Mapping[str, NDArray[Any]],
               opset: int) -> list[tuple[str, Shape, int]] | None:
    """(output, shape, bytes per element) of each output, as shape inference on the node
    alone says; None when it cannot fix one, or one is not numeric."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(_alone(node, feeds, opset),
                                                     data_prop=True)
    except Exception:  # onnx's InferenceError and ValidationError, among others
        return None
    types = {value.name: value.type for value in inferred.graph.value_info}
    predicted = []
    for name in filter(None, node.output):
        shape, itemsize = _typed(types.get(name))
        if shape is None:
            return None
        predicted.append((name, shape, itemsize))
    return predicted


def _alone(node: onnx.NodeProto, feeds: Mapping[str, NDArray[Any]],
           opset: int) -> onnx.ModelProto:
    """A model of the node alone, its small inputs as initializers (their values), the
    others as inputs of their type and shape."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = helper.make_graph([node], "fold", [], [])
    for name, value in feeds.items():
        if value.size <= SHAPE_VALUES:
            graph.initializer.append(numpy_helper.from_array(np.array(value), name))
        else:
            graph.input.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _typed(value: onnx.TypeProto | None) -> tuple[Shape | None, int]:
    """(shape, bytes per element) of a numeric tensor type with every dimension fixed,
    else (None, 0)."""
    from onnx import helper

    if value is None or not value.HasField("tensor_type"):
        return None, 0
    tensor = value.tensor_type
    dims = tensor.shape.dim
    if not tensor.HasField("shape") or not all(d.HasField("dim_value") for d in dims):
        return None, 0
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    except Exception:  # an undefined or unknown element type
        return None, 0
    if dtype.kind not in "biufc":
        return None, 0  # strings: objects, not numbers
    return tuple(d.dim_value for d in dims), dtype.itemsize


def _run(path: Path, node: onnx.NodeProto, feeds: dict[str, NDArray[Any]],
         opset: int) -> list[NDArray[Any]]:
    """The node evaluated on its constant inputs; a user error when it cannot be."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    try:
        with np.errstate(all="ignore"):  # overflow in a constant is the file's business
            outputs = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception as exc:  # the evaluator raises what numpy raises, and its own errors
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        raise limits.refuse(path, f"node {limits.describe(node)!r} cannot be computed from "
                                  f"its constant inputs ({reason})") from None
    return [np.asarray(value) for value in outputs]
