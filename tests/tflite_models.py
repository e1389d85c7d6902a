"""Small int8 TFLite models written from Python, and LiteRT's reference kernels to run them.

Why: edgebuild's TFLite path (reading a `.tflite`, its integer reference, the C kernels) has to
be tested on files like the ones TensorFlow's converter writes, but TensorFlow cannot be
installed here. So this module writes the flatbuffer itself, with the `flatbuffers` Builder
and the builder functions the `tflite` package generates from TFLite's schema, following the
converter's full-integer conventions, and runs the result with LiteRT (`ai_edge_litert`) on
its reference kernels (BUILTIN_REF): the semantics edgebuild must reproduce bit for bit.

- `Tensor`, `Op`, `Graph`: one subgraph, described plainly (names, not indices).
- `write(graph)` / `write_file(graph, path)`: its flatbuffer (schema version 3).
- `random_conv`, `random_depthwise`, `random_fc`, `random_pool`, `random_add`,
  `random_softmax`, `random_chain`, `random_unsupported`: seeded graphs whose quantization
  is calibrated as the converter's is, from the float computation on random inputs, so their
  int8 outputs spread over the int8 range instead of saturating. `random_inputs` makes
  inputs for them.
- `run_litert(model, inputs)` and `run_litert_all(model, inputs)`: outputs, or every
  activation by tensor name, of N samples.
- `OPTIONS`, `options(op)`, `VERSIONS`, `version(op)`, `UNSUPPORTED`: what the writer
  accepts and writes.

The converter's int8 conventions, which every generator follows:

- activations int8, asymmetric (any zero point in [-128, 127]); a fused RELU/RELU6 is not
  stored as a range: it is the output's quantization (zero point -128, RELU6's scale at most
  6/255), the kernel clamping to what that quantization can hold;
- CONV_2D weights OHWI int8, symmetric (zero point 0), per-channel scales on axis 0;
  DEPTHWISE_CONV_2D weights (1, KH, KW, C * multiplier), per-channel on axis 3;
  FULLY_CONNECTED weights (out, in), per-tensor (per-channel on request);
- bias int32, zero point 0, scale input_scale * weight_scale[c];
- pools, RESHAPE and CONCATENATION keep their input's quantization; SOFTMAX's output is
  (1/256, -128), LOGISTIC's (1/256, -128), TANH's (1/128, 0);
- batch 1; a model with float input/output (`float_io=True`) has a QUANTIZE first and a
  DEQUANTIZE last.

What LiteRT's reference kernels were seen to check, and not (tests/test_tflite_models.py pins
the first group): per-channel scales must number 1 or dims[quantized_dimension], checked at
load (conv scales on axis 3, depthwise on axis 0, fail unless the counts happen to agree); int8
weight zero points
must be 0; SOFTMAX's output must be (1/256, -128); CONV_2D needs its bias input (FC does
not: "" or no third input at all both run); RESHAPE runs with its new_shape option, with a
shape tensor, or with both (the tensor wins), but with neither its output is a scalar and
prepare fails; an op version the resolver lacks fails at load. Not checked: the bias scale
against input_scale * weight_scale, AVERAGE/MAX_POOL_2D's output quantization (the result is
computed as if it were the input's), the depth_multiplier option (derived from the shapes),
an output zero point outside [-128, 127].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import tflite

# ---------------------------------------------------------------------------------------------
# The graph description


#: dtype name -> (TFLite TensorType, numpy dtype)
TYPES: dict[str, tuple[int, type]] = {
    "float32": (tflite.TensorType.FLOAT32, np.float32),
    "int32": (tflite.TensorType.INT32, np.int32),
    "int16": (tflite.TensorType.INT16, np.int16),
    "int8": (tflite.TensorType.INT8, np.int8),
}


@dataclass(frozen=True, eq=False)
class Tensor:
    """One tensor of the subgraph.

    `scale` None means not quantized (float32 tensors, RESHAPE's int32 shape). A tuple of
    scales is per-channel quantization along `quantized_dimension`; `zero_point` is then
    written once per channel. `data` makes the tensor a constant (weights, bias, shapes); it
    is cast to `dtype` and must have `shape`. Nothing checks that a per-channel tuple matches
    the shape, so malformed files can be written on purpose; LiteRT rejects them.
    """

    name: str
    shape: tuple[int, ...]
    zero_point: int = 0
    scale: float | tuple[float, ...] | None = None
    data: np.ndarray | None = None
    dtype: str = "int8"
    quantized_dimension: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in TYPES:
            raise ValueError(f"{self.name}: dtype {self.dtype!r} is not one of {sorted(TYPES)}")
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.data is not None:
            data = np.asarray(self.data).astype(TYPES[self.dtype][1])
            if data.shape != self.shape:
                raise ValueError(f"{self.name}: data {data.shape} is not of shape {self.shape}")
            object.__setattr__(self, "data", data)

    @property
    def scales(self) -> tuple[float, ...]:
        """The scale(s) as a tuple: one per channel, or one."""
        if self.scale is None:
            return ()
        return tuple(self.scale) if isinstance(self.scale, tuple) else (float(self.scale),)


@dataclass(frozen=True)
class Op:
    """One operator: `kind` is a BuiltinOperator name ("CONV_2D"), inputs and outputs are
    tensor names ("" is an omitted optional input, written -1), `options` its builtin options
    (see OPTIONS for the keys of each kind and their defaults)."""

    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Graph:
    """A single-subgraph model: tensors in index order, ops in execution order, and the names
    of the subgraph's inputs and outputs."""

    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def tensor(self, name: str) -> Tensor:
        """The tensor called `name`."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)


_WINDOW = {"stride": 1, "padding": "VALID", "dilation": 1, "activation": "NONE"}
_POOL = {"filter": 2, "stride": 2, "padding": "VALID", "activation": "NONE"}

#: Op kinds with builtin options -> their option keys and defaults. `stride`, `dilation` and
#: `filter` take an int or an (h, w) pair; `padding` "SAME" or "VALID"; `activation` an
#: ActivationFunctionType name ("NONE", "RELU", "RELU6", ...). Any other BuiltinOperator
#: name (TANH, LOGISTIC, ...) is written without options.
OPTIONS: dict[str, dict[str, Any]] = {
    "CONV_2D": dict(_WINDOW),
    "DEPTHWISE_CONV_2D": {**_WINDOW, "depth_multiplier": 1},
    "FULLY_CONNECTED": {"activation": "NONE", "keep_num_dims": False},
    "AVERAGE_POOL_2D": dict(_POOL),
    "MAX_POOL_2D": dict(_POOL),
    "ADD": {"activation": "NONE"},
    "RESHAPE": {"new_shape": None},
    "SOFTMAX": {"beta": 1.0},
    "QUANTIZE": {},
    "DEQUANTIZE": {},
    "CONCATENATION": {"axis": -1, "activation": "NONE"},
    "SVDF": {"rank": 1, "activation": "NONE"},
}

#: Operator versions for int8 tensors as TFLite's converter writes them
#: (tensorflow/lite/tools/versioning/op_version.cc); kinds not listed are version 1.
VERSIONS = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "AVERAGE_POOL_2D": 2,
            "MAX_POOL_2D": 2, "ADD": 2, "SOFTMAX": 2, "DEQUANTIZE": 2, "CONCATENATION": 2,
            "TANH": 2, "LOGISTIC": 2}


def version(op: Op) -> int:
    """The op's version: VERSIONS, but a FULLY_CONNECTED of two inputs (no bias slot at
    all) is version 6 and one with keep_num_dims version 5, as op_version.cc says."""
    if op.kind == "FULLY_CONNECTED":
        if len(op.inputs) == 2:
            return 6
        if op.options.get("keep_num_dims"):
            return 5
    return VERSIONS.get(op.kind, 1)


def options(op: Op) -> dict[str, Any]:
    """The op's options with the defaults filled in; unknown keys are an error (a typo would
    otherwise silently write the default)."""
    defaults = OPTIONS.get(op.kind, {})
    unknown = set(op.options) - set(defaults)
    if unknown:
        raise ValueError(f"{op.kind}: unknown options {sorted(unknown)}")
    return {**defaults, **op.options}


# ---------------------------------------------------------------------------------------------
# The flatbuffer


def write(graph: Graph) -> bytes:
    """The graph as a TFLite flatbuffer: schema version 3, file identifier TFL3, buffer 0 empty
    (TFLite's sentinel for tensors without data), one buffer per constant, one subgraph,
    operator codes (one per kind and version) with both `deprecated_builtin_code`
    (min(code, 127)) and `builtin_code`."""
    index = {t.name: i for i, t in enumerate(graph.tensors)}
    if len(index) != len(graph.tensors):
        raise ValueError("tensor names are not unique")
    codes = list(dict.fromkeys((op.kind, version(op)) for op in graph.ops))
    b = flatbuffers.Builder(1024)
    buffers = [_buffer(b, None)]
    tensor_offsets = []
    for t in graph.tensors:
        buffer = 0
        if t.data is not None:
            buffer = len(buffers)
            buffers.append(_buffer(b, t.data.tobytes()))
        tensor_offsets.append(_tensor(b, t, buffer))
    ops = [_operator(b, op, codes.index((op.kind, version(op))), index) for op in graph.ops]
    subgraph = _subgraph(b, graph, tensor_offsets, ops, index)
    code_tables = [_operator_code(b, kind, v) for kind, v in codes]
    description = b.CreateString("edgebuild tests/tflite_models.py")
    codes_vec, subgraphs_vec, buffers_vec = (
        _offsets(b, code_tables), _offsets(b, [subgraph]), _offsets(b, buffers))
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, subgraphs_vec)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffers_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def write_file(graph: Graph, path: str | Path) -> Path:
    """Write the graph's flatbuffer to `path` (a .tflite file) and return the path."""
    path = Path(path)
    path.write_bytes(write(graph))
    return path


def _offsets(b: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    """A vector of table offsets."""
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _ints(b: flatbuffers.Builder, values: Sequence[int], dtype: type = np.int32) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype=dtype).reshape(-1))


def _buffer(b: flatbuffers.Builder, data: bytes | None) -> int:
    """A Buffer table; its data 16-byte aligned, as the converter aligns it (LiteRT reads int32
    biases in place)."""
    vec = None
    if data is not None:
        b.StartVector(1, len(data), 16)
        b.head -= len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        b.vectorNumElems = len(data)
        vec = b.EndVector()
    tflite.BufferStart(b)
    if vec is not None:
        tflite.BufferAddData(b, vec)
    return tflite.BufferEnd(b)


def _quantization(b: flatbuffers.Builder, t: Tensor) -> int | None:
    if t.scale is None:
        return None
    scales = t.scales
    scale_vec = b.CreateNumpyVector(np.asarray(scales, dtype=np.float32))
    zp_vec = _ints(b, [t.zero_point] * len(scales), np.int64)
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scale_vec)
    tflite.QuantizationParametersAddZeroPoint(b, zp_vec)
    tflite.QuantizationParametersAddQuantizedDimension(b, t.quantized_dimension)
    return tflite.QuantizationParametersEnd(b)


def _tensor(b: flatbuffers.Builder, t: Tensor, buffer: int) -> int:
    name = b.CreateString(t.name)
    shape = _ints(b, t.shape)
    quant = _quantization(b, t)
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, TYPES[t.dtype][0])
    tflite.TensorAddBuffer(b, buffer)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    return tflite.TensorEnd(b)


def _operator(b: flatbuffers.Builder, op: Op, opcode: int, index: dict[str, int]) -> int:
    missing = [n for n in (*op.inputs, *op.outputs) if n and n not in index]
    if missing:
        raise ValueError(f"{op.kind}: no tensor named {missing}")
    inputs = _ints(b, [index[n] if n else -1 for n in op.inputs])
    outputs = _ints(b, [index[n] for n in op.outputs])
    writer = _OPTION_WRITERS.get(op.kind)
    opts = options(op)
    kind, table = writer(b, opts) if writer else (tflite.BuiltinOptions.NONE, None)
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, opcode)
    tflite.OperatorAddInputs(b, inputs)
    tflite.OperatorAddOutputs(b, outputs)
    if table is not None:
        tflite.OperatorAddBuiltinOptionsType(b, kind)
        tflite.OperatorAddBuiltinOptions(b, table)
    return tflite.OperatorEnd(b)


def _subgraph(b: flatbuffers.Builder, graph: Graph, tensors: list[int], ops: list[int],
              index: dict[str, int]) -> int:
    tensors_vec = _offsets(b, tensors)
    inputs = _ints(b, [index[n] for n in graph.inputs])
    outputs = _ints(b, [index[n] for n in graph.outputs])
    ops_vec = _offsets(b, ops)
    name = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensors_vec)
    tflite.SubGraphAddInputs(b, inputs)
    tflite.SubGraphAddOutputs(b, outputs)
    tflite.SubGraphAddOperators(b, ops_vec)
    tflite.SubGraphAddName(b, name)
    return tflite.SubGraphEnd(b)


def _operator_code(b: flatbuffers.Builder, kind: str, version: int) -> int:
    code = getattr(tflite.BuiltinOperator, kind, None)
    if code is None:
        raise ValueError(f"{kind!r} is not a TFLite BuiltinOperator")
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, version)
    return tflite.OperatorCodeEnd(b)


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    """An (h, w) pair from an int or a pair."""
    if isinstance(value, int | np.integer):
        return int(value), int(value)
    h, w = value
    return int(h), int(w)


def _activation(name: str) -> int:
    return getattr(tflite.ActivationFunctionType, name)


def _padding(name: str) -> int:
    return getattr(tflite.Padding, name)


def _conv_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    (sh, sw), (dh, dw) = _pair(o["stride"]), _pair(o["dilation"])
    tflite.Conv2DOptionsStart(b)
    tflite.Conv2DOptionsAddPadding(b, _padding(o["padding"]))
    tflite.Conv2DOptionsAddStrideW(b, sw)
    tflite.Conv2DOptionsAddStrideH(b, sh)
    tflite.Conv2DOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    tflite.Conv2DOptionsAddDilationWFactor(b, dw)
    tflite.Conv2DOptionsAddDilationHFactor(b, dh)
    return tflite.BuiltinOptions.Conv2DOptions, tflite.Conv2DOptionsEnd(b)


def _depthwise_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    (sh, sw), (dh, dw) = _pair(o["stride"]), _pair(o["dilation"])
    tflite.DepthwiseConv2DOptionsStart(b)
    tflite.DepthwiseConv2DOptionsAddPadding(b, _padding(o["padding"]))
    tflite.DepthwiseConv2DOptionsAddStrideW(b, sw)
    tflite.DepthwiseConv2DOptionsAddStrideH(b, sh)
    tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, int(o["depth_multiplier"]))
    tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, dw)
    tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, dh)
    return tflite.BuiltinOptions.DepthwiseConv2DOptions, tflite.DepthwiseConv2DOptionsEnd(b)


def _fc_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.FullyConnectedOptionsStart(b)
    tflite.FullyConnectedOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    tflite.FullyConnectedOptionsAddKeepNumDims(b, bool(o["keep_num_dims"]))
    return tflite.BuiltinOptions.FullyConnectedOptions, tflite.FullyConnectedOptionsEnd(b)


def _pool_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    (fh, fw), (sh, sw) = _pair(o["filter"]), _pair(o["stride"])
    tflite.Pool2DOptionsStart(b)
    tflite.Pool2DOptionsAddPadding(b, _padding(o["padding"]))
    tflite.Pool2DOptionsAddStrideW(b, sw)
    tflite.Pool2DOptionsAddStrideH(b, sh)
    tflite.Pool2DOptionsAddFilterWidth(b, fw)
    tflite.Pool2DOptionsAddFilterHeight(b, fh)
    tflite.Pool2DOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    return tflite.BuiltinOptions.Pool2DOptions, tflite.Pool2DOptionsEnd(b)


def _add_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.AddOptionsStart(b)
    tflite.AddOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    return tflite.BuiltinOptions.AddOptions, tflite.AddOptionsEnd(b)


def _reshape_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    new_shape = None if o["new_shape"] is None else _ints(b, o["new_shape"])
    tflite.ReshapeOptionsStart(b)
    if new_shape is not None:
        tflite.ReshapeOptionsAddNewShape(b, new_shape)
    return tflite.BuiltinOptions.ReshapeOptions, tflite.ReshapeOptionsEnd(b)


def _softmax_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.SoftmaxOptionsStart(b)
    tflite.SoftmaxOptionsAddBeta(b, float(o["beta"]))
    return tflite.BuiltinOptions.SoftmaxOptions, tflite.SoftmaxOptionsEnd(b)


def _quantize_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.QuantizeOptionsStart(b)
    return tflite.BuiltinOptions.QuantizeOptions, tflite.QuantizeOptionsEnd(b)


def _dequantize_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.DequantizeOptionsStart(b)
    return tflite.BuiltinOptions.DequantizeOptions, tflite.DequantizeOptionsEnd(b)


def _concatenation_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.ConcatenationOptionsStart(b)
    tflite.ConcatenationOptionsAddAxis(b, int(o["axis"]))
    tflite.ConcatenationOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    return tflite.BuiltinOptions.ConcatenationOptions, tflite.ConcatenationOptionsEnd(b)


def _svdf_options(b: flatbuffers.Builder, o: dict[str, Any]) -> tuple[int, int]:
    tflite.SVDFOptionsStart(b)
    tflite.SVDFOptionsAddRank(b, int(o["rank"]))
    tflite.SVDFOptionsAddFusedActivationFunction(b, _activation(o["activation"]))
    return tflite.BuiltinOptions.SVDFOptions, tflite.SVDFOptionsEnd(b)


_OPTION_WRITERS: dict[str, Callable[[flatbuffers.Builder, dict[str, Any]], tuple[int, int]]] = {
    "CONV_2D": _conv_options,
    "DEPTHWISE_CONV_2D": _depthwise_options,
    "FULLY_CONNECTED": _fc_options,
    "AVERAGE_POOL_2D": _pool_options,
    "MAX_POOL_2D": _pool_options,
    "ADD": _add_options,
    "RESHAPE": _reshape_options,
    "SOFTMAX": _softmax_options,
    "QUANTIZE": _quantize_options,
    "DEQUANTIZE": _dequantize_options,
    "CONCATENATION": _concatenation_options,
    "SVDF": _svdf_options,
}

# ---------------------------------------------------------------------------------------------
# Running with LiteRT


def _interpreter(model: bytes, preserve: bool) -> Any:
    # Imported here: writing models needs only flatbuffers and tflite.
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(model_content=bytes(model),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                              experimental_preserve_all_tensors=preserve)
    interpreter.allocate_tensors()
    return interpreter


def _runs(details: list[dict], inputs: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """The inputs of each invocation: all at once if they have the model's shapes, else one
    sample at a time when the model's batch is 1."""
    if len(inputs) != len(details):
        raise ValueError(f"the model has {len(details)} inputs, {len(inputs)} given")
    for d, a in zip(details, inputs, strict=True):
        if a.dtype != d["dtype"]:
            raise TypeError(f"input {d['name']} is {d['dtype'].__name__}, given {a.dtype}")
    if all(tuple(d["shape"]) == a.shape for d, a in zip(details, inputs, strict=True)):
        return [list(inputs)]
    n = {a.shape[0] for a in inputs}
    shapes_fit = all(tuple(d["shape"]) == (1, *a.shape[1:])
                     for d, a in zip(details, inputs, strict=True))
    if len(n) != 1 or not shapes_fit:
        raise ValueError(f"inputs {[a.shape for a in inputs]} do not fit the model's "
                         f"{[tuple(d['shape']) for d in details]}")
    return [[a[i:i + 1] for a in inputs] for i in range(n.pop())]


def run_litert(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The model's outputs on `inputs` (one array per model input, batch first, of the input's
    dtype) with LiteRT's reference kernels. A model of batch 1 is run once per sample; the
    outputs are concatenated along the batch axis."""
    interpreter = _interpreter(model, preserve=False)
    outs = interpreter.get_output_details()
    results: list[list[np.ndarray]] = [[] for _ in outs]
    for run in _runs(interpreter.get_input_details(), inputs):
        for d, a in zip(interpreter.get_input_details(), run, strict=True):
            interpreter.set_tensor(d["index"], a)
        interpreter.invoke()
        for r, d in zip(results, outs, strict=True):
            r.append(interpreter.get_tensor(d["index"]).copy())
    return [np.concatenate(r) for r in results]


def run_litert_all(model: bytes, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Every non-constant tensor (inputs, intermediates, outputs) by name, as `run_litert`
    runs the model, with LiteRT told to keep intermediates (experimental_preserve_all_tensors):
    what a per-layer comparison needs."""
    interpreter = _interpreter(model, preserve=True)
    variables = _activation_tensors(model)
    results: dict[str, list[np.ndarray]] = {name: [] for name in variables.values()}
    for run in _runs(interpreter.get_input_details(), inputs):
        for d, a in zip(interpreter.get_input_details(), run, strict=True):
            interpreter.set_tensor(d["index"], a)
        interpreter.invoke()
        for i, name in variables.items():
            results[name].append(interpreter.get_tensor(i).copy())
    return {name: np.concatenate(r) for name, r in results.items()}


def _activation_tensors(model: bytes) -> dict[int, str]:
    """Index -> name of the subgraph's tensors without constant data."""
    m = tflite.Model.GetRootAs(model, 0)
    sub = m.Subgraphs(0)
    found = {}
    for i in range(sub.TensorsLength()):
        t = sub.Tensors(i)
        if m.Buffers(t.Buffer()).DataLength() == 0:
            found[i] = t.Name().decode()
    return found


# ---------------------------------------------------------------------------------------------
# Float computation (for calibration)


def _out_and_pad(size: int, k: int, s: int, d: int, padding: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) as TFLite computes them."""
    eff = (k - 1) * d + 1
    if padding == "VALID":
        if size < eff:
            raise ValueError(f"VALID window {eff} larger than input {size}")
        return (size - eff) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return out, total // 2, total - total // 2


def _windows(x: np.ndarray, kernel: tuple[int, int], stride: tuple[int, int],
             dilation: tuple[int, int], padding: str, fill: float) -> np.ndarray:
    """The (N, OH, OW, KH, KW, C) windows of an NHWC array, padded with `fill`."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh, top, bottom = _out_and_pad(x.shape[1], kh, sh, dh, padding)
    ow, left, right = _out_and_pad(x.shape[2], kw, sw, dw, padding)
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    rows = np.arange(oh)[:, None] * sh + np.arange(kh)[None, :] * dh
    cols = np.arange(ow)[:, None] * sw + np.arange(kw)[None, :] * dw
    return xp[:, rows[:, None, :, None], cols[None, :, None, :], :]


def _act(y: np.ndarray, activation: str) -> np.ndarray:
    if activation == "RELU":
        return np.maximum(y, 0.0)
    if activation == "RELU6":
        return np.clip(y, 0.0, 6.0)
    if activation == "NONE":
        return y
    raise ValueError(f"activation {activation!r}: NONE, RELU or RELU6")


def _affine(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero point) of int8 covering [lo, hi] widened to hold 0, as the converter
    derives them from a calibrated range."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    hi = max(hi, lo + 1e-3)
    scale = (hi - lo) / 255.0
    zero_point = int(np.clip(round(-128 - lo / scale), -128, 127))
    return float(np.float32(scale)), zero_point


def _fake_quant(y: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    q = np.clip(np.round(y / scale) + zero_point, -128, 127)
    return (q - zero_point) * scale


# ---------------------------------------------------------------------------------------------
# Random graphs


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.float32(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


class _Net:
    """A graph under construction with float samples of each activation: each layer draws its
    weights, computes its float output on the samples (weights and bias as quantized), and
    quantizes the output from that range, as calibration does."""

    def __init__(self, rng: np.random.Generator, inputs: Sequence[tuple[int, ...]],
                 samples: int = 32) -> None:
        self.rng = rng
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.samples: dict[str, np.ndarray] = {}
        self.inputs: list[str] = []
        self.counts: dict[str, int] = {}
        self.n = samples
        for i, shape in enumerate(inputs):
            self.input("input" if len(inputs) == 1 else f"input{i}", shape)

    def input(self, name: str, shape: tuple[int, ...], constant: bool = False,
              cancel: str | None = None) -> str:
        """An int8 input (or constant) of random scale and zero point, with uniform int8
        samples. With `cancel` (an ADD's other operand) the zero point roughly cancels that
        tensor's mean, so that the sum straddles 0 instead of a fused RELU zeroing it all; it
        is still anywhere in [-128, 127]."""
        scale = _log_uniform(self.rng, 0.004, 0.03)
        zero_point = int(self.rng.integers(-128, 128))
        if cancel is not None:
            centred = float(self.samples[cancel].mean()) / scale - 0.5
            zero_point = int(np.clip(round(centred + self.rng.normal(0.0, 30.0)), -128, 127))
        data = self.rng.integers(-128, 128, size=shape) if constant else None
        self.tensors.append(Tensor(name, shape, zero_point, scale, data))
        q = data if constant else self.rng.integers(-128, 128, size=(self.n, *shape[1:]))
        self.samples[name] = (q - zero_point) * scale
        if not constant:
            self.inputs.append(name)
        return name

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)

    def _name(self, prefix: str) -> str:
        """A fresh layer name: prefix0, prefix1, ..."""
        self.counts[prefix] = self.counts.get(prefix, -1) + 1
        return f"{prefix}{self.counts[prefix]}"

    def output(self, name: str, y: np.ndarray, activation: str = "NONE",
               quant: tuple[float, int] | None = None) -> str:
        """Add an int8 activation of float samples `y` (after `activation`), quantized by
        `quant` or else from their range, and return its name."""
        y = _act(y, activation)
        if quant is None:
            hi = float(y.max())
            if activation == "RELU6":
                hi = min(hi, 6.0)
            quant = _affine(float(y.min()), hi)
        self.tensors.append(Tensor(name, (1, *y.shape[1:]), quant[1], quant[0]))
        self.samples[name] = _fake_quant(y, *quant)
        return name

    def weights(self, name: str, w: np.ndarray, axis: int | None) -> tuple[np.ndarray, Tensor]:
        """int8 symmetric weights from float `w`, per-channel along `axis` (None: per-tensor);
        returns the dequantized weights too."""
        reduce = tuple(i for i in range(w.ndim) if i != axis) if axis is not None else None
        scale = np.maximum(np.abs(w).max(axis=reduce), 1e-6) / 127.0
        scale = np.asarray(scale, dtype=np.float32)
        shape = [1] * w.ndim
        if axis is not None:
            shape[axis] = -1
        s = scale.reshape(shape) if axis is not None else scale
        q = np.clip(np.round(w / s), -127, 127)
        per = tuple(float(v) for v in scale) if axis is not None else float(scale)
        t = Tensor(name, w.shape, 0, per, q.astype(np.int8), "int8", axis or 0)
        return q * s, t

    def bias(self, name: str, x_name: str, w: Tensor, b: np.ndarray) -> tuple[np.ndarray, Tensor]:
        """int32 bias of float values `b`, scale input_scale * weight_scale[c] (per-tensor
        when the weights are); returns the dequantized values too."""
        in_scale = np.float32(self.tensor(x_name).scales[0])
        w_scales = np.broadcast_to(np.asarray(w.scales, dtype=np.float32), b.shape)
        scales = (in_scale * w_scales).astype(np.float32)
        q = np.round(b / scales).clip(-(2**31), 2**31 - 1)
        per = tuple(float(v) for v in scales) if isinstance(w.scale, tuple) else float(scales[0])
        t = Tensor(name, b.shape, 0, per, q.astype(np.int32), "int32")
        return q * scales.astype(np.float64), t

    def weighted(self, kind: str, prefix: str, x: str, w_f: np.ndarray, axis: int | None,
                 compute: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 activation: str, opts: dict[str, Any]) -> str:
        """A CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED: `compute(samples, weights)` is its
        float output without bias, channels last, the output channels on `axis` of the
        weights (None: per-tensor weights, output channels on axis 0). The float weights are
        first rescaled per output channel and a bias drawn so that each channel has a random
        spread in [0.5, 2] around a small random offset, as a folded batch norm leaves it:
        outputs then neither saturate nor sit all on one side of a RELU."""
        name, xs = self._name(prefix), self.samples[x]
        channel_axis = 0 if axis is None else axis
        y0 = compute(xs, w_f).reshape(-1, w_f.shape[channel_axis])
        gain = np.exp(self.rng.uniform(math.log(0.5), math.log(2.0), size=y0.shape[1]))
        sd = y0.std(axis=0)
        k = np.where(sd > 1e-9, gain / np.maximum(sd, 1e-9), 1.0)
        shape = [1] * w_f.ndim
        shape[channel_axis] = -1
        w, w_t = self.weights(f"{name}/weights", w_f * k.reshape(shape), axis)
        b_f = -y0.mean(axis=0) * k + self.rng.normal(0.0, 0.5 * gain)
        b, b_t = self.bias(f"{name}/bias", x, w_t, b_f)
        self.tensors += [w_t, b_t]
        out = self.output(f"{name}/out", compute(xs, w) + b, activation)
        self.ops.append(Op(kind, (x, w_t.name, b_t.name), (out,),
                           {**opts, "activation": activation}))
        return out

    def conv(self, x: str, out_channels: int, kernel: tuple[int, int], stride: tuple[int, int],
             padding: str, dilation: tuple[int, int], activation: str,
             per_channel: bool = True) -> str:
        c = self.samples[x].shape[-1]

        def compute(xs: np.ndarray, w: np.ndarray) -> np.ndarray:
            patches = _windows(xs, kernel, stride, dilation, padding, 0.0)
            return np.einsum("nhwijc,oijc->nhwo", patches, w)

        w_f = self.rng.normal(size=(out_channels, *kernel, c))
        return self.weighted("CONV_2D", "conv", x, w_f, 0 if per_channel else None, compute,
                             activation, {"stride": stride, "padding": padding,
                                          "dilation": dilation})

    def depthwise(self, x: str, multiplier: int, kernel: tuple[int, int],
                  stride: tuple[int, int], padding: str, dilation: tuple[int, int],
                  activation: str) -> str:
        c = self.samples[x].shape[-1]

        def compute(xs: np.ndarray, w: np.ndarray) -> np.ndarray:
            # output channel c * multiplier + m reads input channel c
            patches = _windows(xs, kernel, stride, dilation, padding, 0.0)
            wr = w[0].reshape(*kernel, c, multiplier)
            y = np.einsum("nhwijc,ijcm->nhwcm", patches, wr)
            return y.reshape(*patches.shape[:3], c * multiplier)

        w_f = self.rng.normal(size=(1, *kernel, c * multiplier))
        return self.weighted("DEPTHWISE_CONV_2D", "depthwise_conv_2d", x, w_f, 3, compute,
                             activation, {"stride": stride, "padding": padding,
                                          "dilation": dilation, "depth_multiplier": multiplier})

    def fc(self, x: str, out_features: int, activation: str, per_channel: bool = False) -> str:
        features = int(np.prod(self.samples[x].shape[1:]))

        def compute(xs: np.ndarray, w: np.ndarray) -> np.ndarray:
            return xs.reshape(xs.shape[0], -1) @ w.T

        w_f = self.rng.normal(size=(out_features, features))
        return self.weighted("FULLY_CONNECTED", "fully_connected", x, w_f,
                             0 if per_channel else None, compute, activation, {})

    def pool(self, x: str, kind: str, size: tuple[int, int], stride: tuple[int, int],
             padding: str, activation: str) -> str:
        name, xs, t = self._name(kind.lower()), self.samples[x], self.tensor(x)
        if kind == "MAX_POOL_2D":
            y = _windows(xs, size, stride, (1, 1), padding, -np.inf).max(axis=(3, 4))
        else:
            y = np.nanmean(_windows(xs, size, stride, (1, 1), padding, np.nan), axis=(3, 4))
        out = self.output(f"{name}/out", y, activation, (t.scales[0], t.zero_point))
        self.ops.append(Op(kind, (x,), (out,), {"filter": size, "stride": stride,
                                                 "padding": padding, "activation": activation}))
        return out

    def reshape(self, x: str, shape: tuple[int, ...], form: str) -> str:
        """RESHAPE in one of the forms files have: "option" (new_shape only), "tensor" (a
        constant int32 shape input only) or "both" (what the converter writes)."""
        name, xs, t = self._name("reshape"), self.samples[x], self.tensor(x)
        y = xs.reshape(xs.shape[0], *shape[1:])
        out = self.output(f"{name}/out", y, "NONE", (t.scales[0], t.zero_point))
        inputs: tuple[str, ...] = (x,)
        if form in ("tensor", "both"):
            shape_t = Tensor(f"{name}/shape", (len(shape),), data=np.array(shape),
                             dtype="int32")
            self.tensors.append(shape_t)
            inputs = (x, shape_t.name)
        opts = {"new_shape": shape} if form in ("option", "both") else {}
        self.ops.append(Op("RESHAPE", inputs, (out,), opts))
        return out

    def add(self, a: str, b: str, activation: str) -> str:
        name = self._name("add")
        out = self.output(f"{name}/out", self.samples[a] + self.samples[b], activation)
        self.ops.append(Op("ADD", (a, b), (out,), {"activation": activation}))
        return out

    def softmax(self, x: str, beta: float) -> str:
        name, xs = self._name("softmax"), self.samples[x]
        e = np.exp(beta * (xs - xs.max(axis=-1, keepdims=True)))
        out = self.output(f"{name}/out", e / e.sum(axis=-1, keepdims=True), "NONE",
                          (1.0 / 256.0, -128))
        self.ops.append(Op("SOFTMAX", (x,), (out,), {"beta": beta}))
        return out

    def graph(self, outputs: Sequence[str], float_io: bool) -> Graph:
        """The graph; with `float_io` a QUANTIZE from float32 before each input and a
        DEQUANTIZE to float32 after each output, as a converter run without
        inference_input_type/inference_output_type int8 leaves them."""
        tensors, ops = list(self.tensors), list(self.ops)
        inputs, outs = list(self.inputs), list(outputs)
        if float_io:
            for i, name in enumerate(self.inputs):
                tensors.append(Tensor(f"{name}_float", self.tensor(name).shape, dtype="float32"))
                ops.insert(i, Op("QUANTIZE", (f"{name}_float",), (name,)))
                inputs[i] = f"{name}_float"
            for i, name in enumerate(outputs):
                tensors.append(Tensor(f"{name}_float", self.tensor(name).shape, dtype="float32"))
                ops.append(Op("DEQUANTIZE", (name,), (f"{name}_float",)))
                outs[i] = f"{name}_float"
        return Graph(tuple(tensors), tuple(ops), tuple(inputs), tuple(outs))


_ACTIVATIONS = ("NONE", "RELU", "RELU6")


def _choice(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _image(rng: np.random.Generator, shape: Sequence[int] | None) -> tuple[int, ...]:
    if shape is not None:
        return tuple(shape)
    h, w, c = (int(v) for v in rng.integers(1, 17, size=3))
    return 1, h, w, c


def _window(rng: np.random.Generator, size: tuple[int, int], kernel: Any, stride: Any,
            padding: str | None, dilation: Any, max_kernel: int = 5) -> dict[str, Any]:
    """Random kernel, stride, padding and dilation for an (h, w) input, the given ones kept:
    VALID windows fit the input; a drawn dilation of 2 goes with stride 1 (TensorFlow does
    not combine the two) and only where it fits."""
    padding = padding or _choice(rng, ("SAME", "VALID"))
    if kernel is None:
        limits = size if padding == "VALID" else (max_kernel, max_kernel)
        kernel = tuple(int(rng.integers(1, min(max_kernel, n) + 1)) for n in limits)
    kernel = _pair(kernel)
    if dilation is None:
        fits = padding == "SAME" or all(2 * k - 1 <= n for k, n in zip(kernel, size, strict=True))
        free = stride is None or _pair(stride) == (1, 1)
        dilation = _choice(rng, (1, 1, 1, 2)) if fits and free and max(kernel) > 1 else 1
    dilation = _pair(dilation)
    if stride is None:
        stride = (1, 1) if max(dilation) > 1 else tuple(int(v) for v in rng.integers(1, 4, 2))
    return {"kernel": kernel, "stride": _pair(stride), "padding": padding,
            "dilation": dilation}


def random_conv(rng: np.random.Generator, *, shape: Sequence[int] | None = None,
                out_channels: int | None = None, kernel: int | tuple[int, int] | None = None,
                stride: int | tuple[int, int] | None = None, padding: str | None = None,
                dilation: int | tuple[int, int] | None = None, activation: str | None = None,
                per_channel: bool = True, float_io: bool = False) -> Graph:
    """One CONV_2D; each argument left None is drawn (NHWC input up to 16x16x16)."""
    shape = _image(rng, shape)
    win = _window(rng, shape[1:3], kernel, stride, padding, dilation)
    net = _Net(rng, [shape])
    out = net.conv("input", out_channels or int(rng.integers(1, 17)), win["kernel"],
                   win["stride"], win["padding"], win["dilation"],
                   activation or _choice(rng, _ACTIVATIONS), per_channel)
    return net.graph([out], float_io)


def random_depthwise(rng: np.random.Generator, *, shape: Sequence[int] | None = None,
                     multiplier: int | None = None, kernel: int | tuple[int, int] | None = None,
                     stride: int | tuple[int, int] | None = None, padding: str | None = None,
                     dilation: int | tuple[int, int] | None = None,
                     activation: str | None = None, float_io: bool = False) -> Graph:
    """One DEPTHWISE_CONV_2D (depth multiplier 1..3 unless given)."""
    shape = _image(rng, shape)
    win = _window(rng, shape[1:3], kernel, stride, padding, dilation)
    net = _Net(rng, [shape])
    out = net.depthwise("input", multiplier or _choice(rng, (1, 1, 2, 3)), win["kernel"],
                        win["stride"], win["padding"], win["dilation"],
                        activation or _choice(rng, _ACTIVATIONS))
    return net.graph([out], float_io)


def random_fc(rng: np.random.Generator, *, in_features: int | None = None,
              out_features: int | None = None, activation: str | None = None,
              per_channel: bool = False, float_io: bool = False) -> Graph:
    """One FULLY_CONNECTED on a (1, in_features) input (1..64 features unless given)."""
    net = _Net(rng, [(1, in_features or int(rng.integers(1, 65)))])
    out = net.fc("input", out_features or int(rng.integers(1, 17)),
                 activation or _choice(rng, _ACTIVATIONS), per_channel)
    return net.graph([out], float_io)


def random_pool(rng: np.random.Generator, *, kind: str | None = None,
                shape: Sequence[int] | None = None,
                filter_size: int | tuple[int, int] | None = None,
                stride: int | tuple[int, int] | None = None, padding: str | None = None,
                activation: str | None = None, float_io: bool = False) -> Graph:
    """One AVERAGE_POOL_2D or MAX_POOL_2D (output quantization = input's)."""
    shape = _image(rng, shape)
    win = _window(rng, shape[1:3], filter_size, stride, padding, 1, max_kernel=3)
    net = _Net(rng, [shape])
    out = net.pool("input", kind or _choice(rng, ("AVERAGE_POOL_2D", "MAX_POOL_2D")),
                   win["kernel"], win["stride"], win["padding"], activation or "NONE")
    return net.graph([out], float_io)


def random_add(rng: np.random.Generator, *, shape: Sequence[int] | None = None,
               activation: str | None = None, constant: bool = False,
               float_io: bool = False) -> Graph:
    """One ADD of two int8 inputs of one shape, each quantized its own way; with `constant`
    the second operand is a constant tensor instead of an input."""
    shape = _image(rng, shape)
    net = _Net(rng, [])
    a = net.input("input0", shape)
    b = net.input("operand" if constant else "input1", shape, constant, cancel=a)
    out = net.add(a, b, activation or _choice(rng, _ACTIVATIONS))
    return net.graph([out], float_io)


def random_softmax(rng: np.random.Generator, *, shape: Sequence[int] | None = None,
                   beta: float | None = None, float_io: bool = False) -> Graph:
    """One SOFTMAX over the last axis of a (1, classes) input (2..16 classes unless given)."""
    shape = tuple(shape) if shape is not None else (1, int(rng.integers(2, 17)))
    net = _Net(rng, [shape])
    out = net.softmax("input", beta if beta is not None else _choice(rng, (1.0, 1.0, 0.5, 2.0)))
    return net.graph([out], float_io)


def random_chain(rng: np.random.Generator, *, reshape: str | None = None,
                 float_io: bool = False) -> Graph:
    """conv -> depthwise [-> ADD of the two when their shapes match] -> average or max pool
    -> reshape -> fully connected -> softmax, sizes, strides, paddings, activations drawn.
    `reshape` is the RESHAPE form ("option", "tensor" or "both"; drawn when None)."""
    shape = _image(rng, None)
    net = _Net(rng, [shape])
    win = _window(rng, shape[1:3], None, None, None, None)
    x = net.conv("input", int(rng.integers(1, 17)), win["kernel"], win["stride"],
                 win["padding"], win["dilation"], _choice(rng, _ACTIVATIONS))
    conv_out = x
    h, w = net.tensor(x).shape[1:3]
    residual = bool(rng.integers(2))
    win = _window(rng, (h, w), None, 1 if residual else None, "SAME" if residual else None,
                  None, max_kernel=3)
    x = net.depthwise(x, 1 if residual else _choice(rng, (1, 2)), win["kernel"],
                      win["stride"], win["padding"], win["dilation"],
                      _choice(rng, _ACTIVATIONS))
    if residual:
        x = net.add(conv_out, x, _choice(rng, _ACTIVATIONS))
    h, w = net.tensor(x).shape[1:3]
    win = _window(rng, (h, w), None, None, None, 1, max_kernel=3)
    x = net.pool(x, _choice(rng, ("AVERAGE_POOL_2D", "MAX_POOL_2D")), win["kernel"],
                 win["stride"], win["padding"], "NONE")
    flat = int(np.prod(net.tensor(x).shape))
    x = net.reshape(x, (1, flat), reshape or _choice(rng, ("option", "tensor", "both")))
    x = net.fc(x, int(rng.integers(2, 11)), "NONE")
    return net.graph([net.softmax(x, 1.0)], float_io)


#: Ops edgebuild does not take, with the output quantization the converter gives them.
UNSUPPORTED = {"TANH": (1.0 / 128.0, 0), "LOGISTIC": (1.0 / 256.0, -128), "CONCATENATION": None}


def random_unsupported(rng: np.random.Generator, kind: str = "TANH", *,
                       float_io: bool = False) -> Graph:
    """A conv followed by an op edgebuild does not take (a kind of UNSUPPORTED): a valid
    model LiteRT runs, for the tests of edgebuild's refusals."""
    if kind not in UNSUPPORTED:
        raise ValueError(f"{kind}: one of {sorted(UNSUPPORTED)}")
    shape = _image(rng, None)
    net = _Net(rng, [shape])
    x = net.conv("input", int(rng.integers(1, 9)), (1, 1), (1, 1), "SAME", (1, 1), "NONE")
    xs, t = net.samples[x], net.tensor(x)
    if kind == "CONCATENATION":
        y = np.concatenate([xs, xs], axis=-1)
        out = net.output("concatenation0/out", y, "NONE", (t.scales[0], t.zero_point))
        net.ops.append(Op(kind, (x, x), (out,), {"axis": 3}))
    else:
        y = np.tanh(xs) if kind == "TANH" else 1.0 / (1.0 + np.exp(-xs))
        out = net.output(f"{kind.lower()}0/out", y, "NONE", UNSUPPORTED[kind])
        net.ops.append(Op(kind, (x,), (out,)))
    return net.graph([out], float_io)


def random_inputs(rng: np.random.Generator, graph: Graph, n: int = 8) -> list[np.ndarray]:
    """`n` samples for each graph input: int8 uniform over [-128, 127]; float32 inputs
    uniform over what their QUANTIZE maps onto the int8 range."""
    arrays = []
    for name in graph.inputs:
        t = graph.tensor(name)
        shape = (n, *t.shape[1:])
        if t.dtype == "int8":
            arrays.append(rng.integers(-128, 128, size=shape).astype(np.int8))
            continue
        consumer = next((op for op in graph.ops if name in op.inputs), None)
        lo, hi = -1.0, 1.0
        if consumer is not None and consumer.kind == "QUANTIZE":
            q = graph.tensor(consumer.outputs[0])
            lo, hi = (-128 - q.zero_point) * q.scales[0], (127 - q.zero_point) * q.scales[0]
        arrays.append(rng.uniform(lo, hi, size=shape).astype(TYPES[t.dtype][1]))
    return arrays
