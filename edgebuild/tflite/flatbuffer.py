"""Reading a `.tflite` file: the flatbuffer through the `tflite` package (the schema's
generated reader, TensorFlow's own schema.fbs), into plain records the translation reads.

The file is untrusted input. A flatbuffer is read in place, by offsets the file gives: a
bad offset makes the generated reader raise (IndexError, struct.error, ...), which becomes
one user error naming the file; every count and size is checked against the import limits
(interchange.limits) before a tensor's data is copied.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.interchange import limits

if TYPE_CHECKING:
    from numpy.typing import NDArray

# TensorType values of the schema -> numpy dtypes edgebuild reads (others: their name).
DTYPES = {0: "float32", 2: "int32", 4: "int64", 9: "int8", 3: "uint8", 7: "int16"}
TYPE_NAMES = {0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING",
              6: "BOOL", 7: "INT16", 9: "INT8", 10: "FLOAT64"}
# ActivationFunctionType of the schema.
ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh",
               5: "sign_bit"}
PADDINGS = {0: "same", 1: "valid"}
MAX_OPERATORS = limits.MAX_NODES
MAX_TENSORS = limits.MAX_TENSORS


@dataclass(frozen=True)
class FbTensor:
    """A tensor of the graph: shape as in the file (NHWC), its quantization (scales and zero
    points per channel along `axis`, or one of each), its constant data if it has any."""

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    axis: int
    data: NDArray[Any] | None


@dataclass(frozen=True)
class FbOp:
    """An operator: its position in the graph, builtin name, tensor indices (-1: an omitted
    optional input) and builtin options (names in snake case)."""

    index: int
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FbGraph:
    tensors: tuple[FbTensor, ...]
    ops: tuple[FbOp, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    version: int
    description: str


def read(path: Path) -> FbGraph:
    """The first subgraph of the model at `path` (a user error for anything else)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise limits.refuse(path, f"cannot read the model: {exc.strerror}") from exc
    if size > limits.MAX_FILE_BYTES:
        raise limits.refuse(path, f"the file has {size} bytes; at most {limits.MAX_FILE_BYTES} "
                                  "are imported")
    data = path.read_bytes()
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise limits.refuse(path, "not a TFLite model: a .tflite flatbuffer starts with the "
                                  "identifier TFL3 at byte 4")
    try:
        return _graph(data, path)
    except (IndexError, struct.error, ValueError, TypeError, AttributeError,
            UnicodeDecodeError, OverflowError) as exc:
        if isinstance(exc, limits.UserError):
            raise
        raise limits.refuse(path, f"the flatbuffer is damaged ({type(exc).__name__}: "
                                  f"{limits.printable(str(exc))})") from exc


def _graph(data: bytes, path: Path) -> FbGraph:
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    if model.SubgraphsLength() != 1:
        raise limits.refuse(path, f"the model has {model.SubgraphsLength()} subgraphs; "
                                  "edgebuild imports models of one (no control flow)")
    graph = model.Subgraphs(0)
    if graph.OperatorsLength() > MAX_OPERATORS or graph.TensorsLength() > MAX_TENSORS:
        raise limits.refuse(path, f"{graph.OperatorsLength()} operators and "
                                  f"{graph.TensorsLength()} tensors; at most {MAX_OPERATORS} "
                                  f"and {MAX_TENSORS} are imported")
    tensors = tuple(_tensor(model, graph.Tensors(i), i, path)
                    for i in range(graph.TensorsLength()))
    ops = tuple(_op(model, graph.Operators(i), i, len(tensors), path)
                for i in range(graph.OperatorsLength()))
    description = model.Description()
    return FbGraph(tensors, ops, tuple(int(i) for i in graph.InputsAsNumpy()),
                   tuple(int(i) for i in graph.OutputsAsNumpy()), int(model.Version()),
                   limits.printable(description.decode("utf-8", "replace")) if description else "")


def _tensor(model: Any, tensor: Any, index: int, path: Path) -> FbTensor:
    import numpy as np

    shape = tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()
    name = limits.printable((tensor.Name() or b"").decode("utf-8", "replace"))
    if len(shape) > limits.MAX_RANK or any(d < 0 for d in shape):
        raise limits.refuse(path, f"tensor {index} ({name}) has shape {limits.shown_list(shape)}")
    count = limits.elements(shape)
    if count > limits.MAX_TENSOR_ELEMENTS:
        raise limits.refuse(path, f"tensor {index} ({name}) has {count} elements; at most "
                                  f"{limits.MAX_TENSOR_ELEMENTS} are imported")
    dtype_code = int(tensor.Type())
    dtype = DTYPES.get(dtype_code, TYPE_NAMES.get(dtype_code, f"type {dtype_code}"))
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    axis = 0
    quant = tensor.Quantization()
    if quant is not None and quant.ScaleLength():
        scales = tuple(float(v) for v in quant.ScaleAsNumpy())
        zero_points = tuple(int(v) for v in quant.ZeroPointAsNumpy()) \
            if quant.ZeroPointLength() else (0,) * len(scales)
        axis = int(quant.QuantizedDimension())
    values = None
    buffer_index = int(tensor.Buffer())
    if 0 < buffer_index < model.BuffersLength():
        raw = model.Buffers(buffer_index)
        if raw.DataLength():
            values = _data(raw.DataAsNumpy(), shape, dtype, f"tensor {index} ({name})", path)
    return FbTensor(index, name, shape, dtype, scales, zero_points, axis,
                    None if values is None else np.array(values))


def _data(raw: NDArray[Any], shape: tuple[int, ...], dtype: str, what: str,
          path: Path) -> NDArray[Any]:
    import numpy as np

    if dtype not in DTYPES.values():
        raise limits.refuse(path, f"{what} holds {dtype} data, which edgebuild does not read")
    itemsize = np.dtype(dtype).itemsize
    if raw.size != limits.elements(shape) * itemsize:
        raise limits.refuse(path, f"{what}: its buffer has {raw.size} bytes, its shape "
                                  f"{limits.shown_list(shape)} needs "
                                  f"{limits.elements(shape) * itemsize}")
    return np.frombuffer(raw.tobytes(), dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


def _op(model: Any, op: Any, index: int, tensor_count: int, path: Path) -> FbOp:
    import tflite

    code_index = int(op.OpcodeIndex())
    if not 0 <= code_index < model.OperatorCodesLength():
        raise limits.refuse(path, f"operator {index} names operator code {code_index}; the "
                                  f"file has {model.OperatorCodesLength()}")
    code = model.OperatorCodes(code_index)
    builtin = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
    kind = tflite.opcode2name(builtin) if builtin != 32 else \
        f"CUSTOM {limits.printable((code.CustomCode() or b'').decode('utf-8', 'replace'))}"
    inputs = tuple(int(i) for i in op.InputsAsNumpy()) if op.InputsLength() else ()
    outputs = tuple(int(i) for i in op.OutputsAsNumpy()) if op.OutputsLength() else ()
    bad = [i for i in inputs + outputs if not -1 <= i < tensor_count]
    if bad:
        raise limits.refuse(path, f"operator {index} ({kind}) names tensors {bad[:4]}; the "
                                  f"file has {tensor_count}")
    return FbOp(index, kind, inputs, outputs, _options(op, kind))


def _options(op: Any, kind: str) -> dict[str, Any]:
    """The builtin options edgebuild reads, by name."""
    import tflite

    table = op.BuiltinOptions()
    if table is None:
        return {}
    readers: dict[str, tuple[Any, tuple[str, ...]]] = {
        "CONV_2D": (tflite.Conv2DOptions, ("Padding", "StrideW", "StrideH",
                                           "FusedActivationFunction", "DilationWFactor",
                                           "DilationHFactor")),
        "DEPTHWISE_CONV_2D": (tflite.DepthwiseConv2DOptions, (
            "Padding", "StrideW", "StrideH", "DepthMultiplier", "FusedActivationFunction",
            "DilationWFactor", "DilationHFactor")),
        "FULLY_CONNECTED": (tflite.FullyConnectedOptions, ("FusedActivationFunction",
                                                           "KeepNumDims", "WeightsFormat")),
        "AVERAGE_POOL_2D": (tflite.Pool2DOptions, ("Padding", "StrideW", "StrideH",
                                                    "FilterWidth", "FilterHeight",
                                                    "FusedActivationFunction")),
        "MAX_POOL_2D": (tflite.Pool2DOptions, ("Padding", "StrideW", "StrideH", "FilterWidth",
                                                "FilterHeight", "FusedActivationFunction")),
        "ADD": (tflite.AddOptions, ("FusedActivationFunction",)),
        "SOFTMAX": (tflite.SoftmaxOptions, ("Beta",)),
    }
    if kind not in readers:
        return {}
    cls, names = readers[kind]
    options = cls()
    options.Init(table.Bytes, table.Pos)
    return {_snake(name): getattr(options, name)() for name in names}


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
