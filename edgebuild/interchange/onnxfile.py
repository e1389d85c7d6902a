"""A float ONNX model as `edgebuild import-onnx` reads it: its one input and output, the
nodes that compute on the input, every constant, every tensor's shape.

Exporters leave constants computed at run time: Constant nodes, an Identity of an
initializer (PyTorch shares equal initializers so), a Shape -> Gather -> Unsqueeze ->
Concat chain that builds a Reshape's target from the batch size. Every node whose inputs
are all known is evaluated here (interchange.folding); what remains is the network.
Shapes come from onnx's shape inference with the batch dimension set to a number: the
input's own when it is fixed, else 2 (so a reshape that mixes samples shows).

The file is untrusted: its size, its protobuf encoding (interchange.wire), every
initializer's shape and every folded constant are checked against interchange.limits
before anything of that size is allocated, and whatever onnx raises on a malformed file
is a user error naming the file.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import Shape
from edgebuild.interchange import folding, limits, wire

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
    """The model at `path`, folded; a user error when it cannot be read, is too large or
    has not one input and one output of known sample shape."""
    model = _decode(path, _bytes(path))
    graph = model.graph
    budget = limits.Budget(str(path))
    constants = {init.name: _initializer(path, init, budget) for init in graph.initializer}
    inputs = [value for value in graph.input if value.name not in constants]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise limits.refuse(path, "edgebuild imports a model with one input and one output; "
                            f"this one has {len(inputs)} input(s) and {len(graph.output)} "
                            "output(s)")
    batch, sample = _input_shape(path, inputs[0])
    shapes = _shapes(path, model, inputs[0].name, batch)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    nodes = folding.fold(path, graph, constants, shapes, opset, budget)
    consumers = Counter(name for node in nodes for name in node.input if name)
    consumers[graph.output[0].name] += 1
    producer = limits.printable(f"{model.producer_name} {model.producer_version}".strip()) \
        or "an unknown producer"
    return Source(path, inputs[0].name, sample, graph.output[0].name, batch, tuple(nodes),
                  constants, shapes, dict(consumers), producer)


# onnx.load reads these suffixes as text formats; edgebuild reads the binary encoding only
_TEXT_FORMATS = (".json", ".onnxtxt", ".textproto")


def _bytes(path: Path) -> bytes:
    """The file's bytes, when it is a binary ONNX file of at most MAX_FILE_BYTES."""
    if not path.is_file():
        raise limits.refuse(path, "no such file")
    if path.suffix.lower() in _TEXT_FORMATS:
        raise limits.refuse(path, "edgebuild reads binary ONNX files; convert it with "
                                  "onnx.save(onnx.load(FILE), 'model.onnx')")
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        data = file.read(limits.MAX_FILE_BYTES + 1) if size <= limits.MAX_FILE_BYTES else b""
    if size > limits.MAX_FILE_BYTES or len(data) > limits.MAX_FILE_BYTES:
        raise limits.refuse(path, f"{limits.amount(max(size, len(data)))}; edgebuild imports "
                                  f"ONNX files of at most {limits.amount(limits.MAX_FILE_BYTES)}"
                                  ", far more than any microcontroller target holds")
    return data


def _decode(path: Path, data: bytes) -> onnx.ModelProto:
    """The model, decoded once its encoding is found within the limits (interchange.wire)."""
    import onnx

    try:
        wire.scan(data, onnx.ModelProto.DESCRIPTOR)
    except wire.Excessive as exc:
        raise limits.refuse(path, str(exc)) from None
    except wire.Malformed as exc:
        raise limits.refuse(path, f"not a readable ONNX model ({exc})") from None
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError (an untyped package) among others
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        raise limits.refuse(path, f"not a readable ONNX model ({reason})") from None
    return model


def _initializer(path: Path, init: onnx.TensorProto, budget: limits.Budget) -> NDArray[Any]:
    """An initializer's values, its shape and type checked first (its data, external or
    not, is read only then)."""
    from onnx import numpy_helper

    what = f"initializer {limits.printable(init.name)!r}"
    itemsize = _itemsize(path, what, init.data_type)
    problem = limits.tensor_problem(list(init.dims), itemsize)
    if problem is not None:
        raise limits.refuse(path, f"{what} {problem}")
    budget.spend(what, limits.elements(init.dims) * itemsize)
    if init.data_location == init.EXTERNAL:
        _external(path, what, init)
    try:
        return numpy_helper.to_array(init)
    except Exception as exc:  # data that does not fill the shape, among others
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        raise limits.refuse(path, f"{what} of shape {limits.shown_list(init.dims)} cannot "
                                  f"be read ({reason})") from None


def _itemsize(path: Path, what: str, data_type: int) -> int:
    """Bytes per element of a numeric ONNX element type; a user error for another."""
    from onnx import helper

    try:
        dtype = helper.tensor_dtype_to_np_dtype(data_type)
    except Exception:  # KeyError (an unknown type) among others
        dtype = None
    if dtype is None or dtype.kind not in "biufc":
        raise limits.refuse(path, f"{what} has element type {data_type}; edgebuild "
                                  "imports numeric tensors")
    return int(dtype.itemsize)


def _external(path: Path, what: str, init: onnx.TensorProto) -> None:
    """Read an initializer's external data (a file beside the model, as onnx.load reads
    it), no more of it than its checked shape needs."""
    from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

    needed = -(-limits.elements(init.dims) * _stored_bits(init.data_type) // 8)
    try:
        info = ExternalDataInfo(init)  # int() of its offset and length
        if info.length is not None and info.length != needed:
            raise ValueError(f"it has {info.length:,} bytes; the shape "
                             f"{limits.shown_list(init.dims)} needs {needed:,}")
        entry = init.external_data.add()  # the last entry of a key counts
        entry.key, entry.value = "length", str(needed)
        load_external_data_for_tensor(init, str(path.parent))
    except Exception as exc:  # a missing file, a path outside the model's directory, ...
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        raise limits.refuse(path, f"{what}: its external data cannot be read ({reason})") \
            from None


def _stored_bits(data_type: int) -> int:
    """Bits per element as stored: 4-bit types pack two to a byte."""
    from onnx import TensorProto, helper

    packed = {getattr(TensorProto, name) for name in ("INT4", "UINT4", "FLOAT4E2M1")
              if hasattr(TensorProto, name)}
    return 4 if data_type in packed else 8 * helper.tensor_dtype_to_np_dtype(data_type).itemsize


def _input_shape(path: Path, value: onnx.ValueInfoProto) -> tuple[int, Shape]:
    """(batch size for shape inference, per-sample shape): the sample dimensions must be
    numbers, 1 to 3 of them (features, channels x length, channels x height x width), and
    one sample within the limits."""
    dims = [d.dim_value if d.HasField("dim_value") else None
            for d in value.type.tensor_type.shape.dim]
    sample = dims[1:]
    if not 2 <= len(dims) <= 4 or any(d is None or d < 1 for d in sample):
        shown = ["?" if d is None else d for d in dims[:8]]
        raise limits.refuse(path, f"input {limits.printable(value.name)!r} has shape "
                                  f"{shown}; edgebuild needs a batch dimension and 1 to 3 "
                                  "fixed sample dimensions, channels first ([N, features], "
                                  "[N, C, L] or [N, C, H, W])")
    fixed = tuple(d for d in sample if d is not None)
    problem = limits.tensor_problem(fixed, 4)
    if problem is not None:
        raise limits.refuse(path, f"input {limits.printable(value.name)!r}: one sample "
                                  f"{problem}")
    batch = dims[0] if dims[0] and dims[0] > 0 else SYMBOLIC_BATCH
    return batch, fixed


def _shapes(path: Path, model: onnx.ModelProto, name: str, batch: int) -> dict[str, Shape]:
    """Every tensor shape shape inference can fix, with the batch dimension `batch`."""
    import onnx

    copy = _for_inference(model)
    for value in copy.graph.input:
        if value.name == name:
            value.type.tensor_type.shape.dim[0].dim_value = batch
    try:
        inferred = onnx.shape_inference.infer_shapes(copy, data_prop=True)
    except Exception as exc:  # onnx's InferenceError, among others
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        raise limits.refuse(path, f"onnx's shape inference fails on this model ({reason})") \
            from None
    found: dict[str, Shape] = {}
    graph = inferred.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        dims = value.type.tensor_type.shape.dim
        if value.type.HasField("tensor_type") and \
                all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
            found[value.name] = tuple(d.dim_value for d in dims)
    return found


def _for_inference(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model as shape inference needs it: an initializer larger than a shape or an
    axis list as an input of its type and shape (its values could not change a shape, and
    copying them would cost their size twice); no model-local functions (edgebuild imports
    no node that calls one, and a function that calls itself would recurse forever)."""
    import onnx
    from onnx import helper

    copy = onnx.ModelProto(ir_version=model.ir_version)
    copy.opset_import.extend(model.opset_import)
    graph, target = model.graph, copy.graph
    target.name = graph.name
    for part in ("node", "input", "output", "value_info"):
        getattr(target, part).extend(getattr(graph, part))
    declared = {value.name for value in graph.input}
    for init in graph.initializer:
        if limits.elements(init.dims) <= folding.SHAPE_VALUES:
            target.initializer.append(init)
        elif init.name not in declared:
            target.input.append(helper.make_tensor_value_info(init.name, init.data_type,
                                                              list(init.dims)))
    return copy
