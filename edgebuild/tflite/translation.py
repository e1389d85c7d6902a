"""A TFLite int8 graph in edgebuild's vocabulary: layers (manifest dictionaries) in
channels-first layout, and the TFLite integers of each (tflite.quant's weights file).

Layout: TFLite stores activations NHWC, edgebuild channels first. Convolution weights are
transposed (OHWI -> OIHW, depthwise 1HWC -> C1HW); a fully connected layer that reads a
flattened H x W x C map gets its columns permuted into edgebuild's C x H x W order, so it
computes the same sums. Multipliers follow TFLite's Prepare functions exactly (double
precision where TensorFlow uses it, float32 products where it does: tflite.arith).

Every operator edgebuild cannot run is collected with its index, type and why, and the
whole list is one user error: nothing is written for a model that cannot be imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.formats.tflite import arith
from edgebuild.tflite.flatbuffer import ACTIVATIONS, PADDINGS, FbGraph, FbOp, FbTensor

if TYPE_CHECKING:
    from numpy.typing import NDArray

SUPPORTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D",
             "MAX_POOL_2D", "ADD", "RESHAPE", "SOFTMAX", "QUANTIZE", "DEQUANTIZE")
FUSED = ("none", "relu", "relu6", "relu_n1_to_1")


class Unsupported(Exception):
    """One operator edgebuild cannot import, and why."""


class Downstream(Exception):
    """An operator that reads what an unsupported one computes: not a problem of its own."""


@dataclass
class Translated:
    """The model as layers: `input_shape` channels first, `layers` manifest dictionaries,
    `arrays` the weights file, `notes` per layer (the operator it comes from), the edges'
    quantization (`input_float`: the model takes float32 and QUANTIZEs it first;
    `output_float`: it DEQUANTIZEs its output) and the layouts of input and output."""

    input_shape: tuple[int, ...]
    input_nhwc: tuple[int, ...]
    output_nhwc: tuple[int, ...]
    layers: list[dict[str, Any]] = field(default_factory=list)
    arrays: dict[str, NDArray[Any]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    tensors: dict[str, int] = field(default_factory=dict)  # layer -> its TFLite output tensor
    input_float: bool = False
    output_float: bool = False
    input_scale: float = 1.0
    input_zp: int = 0
    output_scale: float = 1.0
    output_zp: int = 0


def chw(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A per-sample NHWC shape channels first: (H, W, C) -> (C, H, W), (L, C) -> (C, L)."""
    return shape if len(shape) <= 1 else (shape[-1], *shape[:-1])


def to_chw(x: NDArray[Any]) -> NDArray[Any]:
    """A batch N x (H, W, C) -> N x (C, H, W)."""
    return x if x.ndim <= 2 else np.moveaxis(x, -1, 1)


def to_nhwc(x: NDArray[Any]) -> NDArray[Any]:
    return x if x.ndim <= 2 else np.moveaxis(x, 1, -1)


class Translator:
    """Walks the graph's operators in order, keeping each tensor's edgebuild name."""

    def __init__(self, graph: FbGraph):
        self.graph = graph
        self.names: dict[int, str] = {}  # tensor index -> producing layer ("input")
        self.flat_from: dict[int, tuple[int, ...]] = {}  # flattened tensor -> its NHWC map
        self.problems: list[tuple[FbOp, str]] = []
        self.failed: set[int] = set()  # tensors an unsupported operator (or its readers) makes
        self.counts: dict[str, int] = {}

    def tensor(self, index: int) -> FbTensor:
        return self.graph.tensors[index]

    def translate(self) -> Translated:
        graph = self.graph
        if len(graph.inputs) != 1 or len(graph.outputs) != 1:
            raise Unsupported(f"the model has {len(graph.inputs)} inputs and "
                              f"{len(graph.outputs)} outputs; edgebuild imports one of each")
        first = self.tensor(graph.inputs[0])
        last = self.tensor(graph.outputs[0])
        result = Translated((), batchless(first.shape), batchless(last.shape))
        self.names[first.index] = "input"
        for op in graph.ops:
            try:
                self.op(op, result)
            except Unsupported as exc:
                self.problems.append((op, str(exc)))
                self.failed.update(op.outputs)
            except Downstream:
                self.failed.update(op.outputs)
        if not self.problems:
            self.edges(result)
        return result

    def edges(self, result: Translated) -> None:
        """The model's input and output quantization, and the input shape."""
        graph = self.graph
        start = self.tensor(graph.inputs[0])
        quantized_input = self.quantized_input or start
        if quantized_input.dtype != "int8":
            raise Unsupported(f"the model's input is {start.dtype}; edgebuild imports int8 "
                              "models (an int8 input, or float32 QUANTIZEd first)")
        result.input_float = self.quantized_input is not None
        result.input_scale, result.input_zp = quantized_input.scales[0], quantized_input.zero_points[0]
        result.input_shape = chw(batchless(quantized_input.shape))
        result.arrays["input.scale"] = np.array([result.input_scale], dtype=np.float32)
        result.arrays["input.zero_points"] = np.array([result.input_zp], dtype=np.int32)
        out = self.dequantized_output or self.tensor(graph.outputs[0])
        result.output_float = self.dequantized_output is not None
        result.output_scale, result.output_zp = out.scales[0], out.zero_points[0]
        if not result.layers:
            raise Unsupported("the model computes nothing edgebuild deploys")

    quantized_input: FbTensor | None = None
    dequantized_output: FbTensor | None = None

    def op(self, op: FbOp, result: Translated) -> None:
        if op.kind not in SUPPORTED:
            raise Unsupported("edgebuild has no implementation of this operator (it imports "
                              + ", ".join(SUPPORTED) + ")")
        handler = getattr(self, f"op_{op.kind.lower()}")
        handler(op, result)

    # --- the edges ------------------------------------------------------------------------

    def op_quantize(self, op: FbOp, result: Translated) -> None:
        source, target = self.tensor(op.inputs[0]), self.tensor(op.outputs[0])
        if source.index not in self.graph.inputs or source.dtype != "float32":
            raise Unsupported("QUANTIZE is imported only on the model's float32 input "
                              f"(here from {source.dtype} tensor {source.name!r})")
        self.quantized_input = target
        self.names[target.index] = "input"

    def op_dequantize(self, op: FbOp, result: Translated) -> None:
        source, target = self.tensor(op.inputs[0]), self.tensor(op.outputs[0])
        if target.index not in self.graph.outputs or source.dtype != "int8":
            raise Unsupported("DEQUANTIZE is imported only on the model's output")
        self.dequantized_output = source
        self.names[target.index] = self.source(source.index)

    # --- helpers --------------------------------------------------------------------------

    def source(self, index: int) -> str:
        if index in self.failed:
            raise Downstream()
        if index not in self.names:
            raise Unsupported(f"its input {self.tensor(index).name!r} comes from an operator "
                              "that was not imported")
        return self.names[index]

    def name(self, prefix: str) -> str:
        count = self.counts.get(prefix, 0)
        self.counts[prefix] = count + 1
        return f"{prefix}{count}"

    def activation(self, op: FbOp, out: FbTensor) -> tuple[str, int, int]:
        """(manifest act, clamp min, clamp max) of the fused activation."""
        fused = ACTIVATIONS.get(int(op.options.get("fused_activation_function", 0)), "unknown")
        if fused not in FUSED:
            raise Unsupported(f"fused activation {fused.upper()} is not imported (only NONE, "
                              "RELU, RELU6, RELU_N1_TO_1)")
        low, high = arith.activation_range(fused, out.scales[0], out.zero_points[0])
        return ("relu" if fused in ("relu", "relu6") else "none"), low, high

    def int8(self, *tensors: FbTensor) -> None:
        for t in tensors:
            if t.dtype != "int8" or not t.scales:
                raise Unsupported(f"tensor {t.name!r} is {t.dtype}"
                                  f"{'' if t.scales else ' without quantization'}; edgebuild "
                                  "imports int8 activations with a scale and zero point")
            if len(t.scales) != 1:
                raise Unsupported(f"activation {t.name!r} has per-channel quantization")

    def emit(self, op: FbOp, result: Translated, layer: dict[str, Any], out: FbTensor,
             arrays: dict[str, NDArray[Any]], note: str) -> None:
        name = layer["name"]
        self.names[out.index] = name
        result.tensors[name] = out.index
        result.layers.append(layer)
        result.notes[name] = f"operator {op.index}: {op.kind} {note}".rstrip()
        for key, value in arrays.items():
            result.arrays[f"{name}.{key}"] = value
        result.arrays[f"{name}.scale"] = np.array([out.scales[0]], dtype=np.float32)

    def common(self, in_zps: list[int], out: FbTensor, low: int, high: int
               ) -> dict[str, NDArray[Any]]:
        return {"zero_points": np.array([*in_zps, out.zero_points[0]], dtype=np.int32),
                "range": np.array([low, high], dtype=np.int32)}

    # --- compute layers -------------------------------------------------------------------

    def op_conv_2d(self, op: FbOp, result: Translated) -> None:
        self.convolution(op, result, depthwise=False)

    def op_depthwise_conv_2d(self, op: FbOp, result: Translated) -> None:
        self.convolution(op, result, depthwise=True)

    def convolution(self, op: FbOp, result: Translated, depthwise: bool) -> None:
        x, w, out = (self.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
        self.int8(x, out)
        weight = self.weights(w, out_axis=3 if depthwise else 0)
        if len(x.shape) != 4 or x.shape[0] != 1:
            raise Unsupported(f"input shape {list(x.shape)}; a convolution reads 1 x H x W x C")
        _, height, width, channels = x.shape
        if depthwise:
            out_c = weight.shape[3]
            groups = channels
            oihw = np.transpose(weight, (3, 0, 1, 2))  # (1, kh, kw, C*m) -> (C*m, 1, kh, kw)
        else:
            out_c = weight.shape[0]
            if channels % weight.shape[3]:
                raise Unsupported(f"filter depth {weight.shape[3]} does not divide the "
                                  f"input's {channels} channels")
            groups = channels // weight.shape[3]
            oihw = np.transpose(weight, (0, 3, 1, 2))  # OHWI -> OIHW
        kh, kw = oihw.shape[2], oihw.shape[3]
        stride = (int(op.options.get("stride_h", 1)), int(op.options.get("stride_w", 1)))
        dilation = (int(op.options.get("dilation_h_factor", 1)),
                    int(op.options.get("dilation_w_factor", 1)))
        same = PADDINGS.get(int(op.options.get("padding", 1))) == "same"
        pads = [padding(size, k, s, d, same) for size, k, s, d
                in zip((height, width), (kh, kw), stride, dilation, strict=True)]
        expected = tuple(p[2] for p in pads)
        if tuple(out.shape[1:3]) != expected or out.shape[3] != out_c:
            raise Unsupported(f"output shape {list(out.shape)} is not what its geometry gives "
                              f"({[1, *expected, out_c]})")
        act, low, high = self.activation(op, out)
        multiplier, shift = conv_multipliers(x, w, out, out_c)
        name = self.name("dw" if depthwise else "conv")
        layer = conv_layer(name, int(out_c), (kh, kw), stride, dilation, pads, groups)
        bias = self.bias(op, out_c)
        layer["bias"] = bias is not None
        if act != "none":
            layer["act"] = act
        layer["inputs"] = [self.source(x.index)]
        arrays = self.common([x.zero_points[0]], out, low, high)
        arrays.update(weight=oihw.astype(np.int8), multiplier=multiplier, shift=shift)
        if bias is not None:
            arrays["bias"] = bias
        self.emit(op, result, layer, out, arrays, fused_note(op))

    def weights(self, w: FbTensor, out_axis: int) -> NDArray[np.int8]:
        if w.data is None or w.dtype != "int8":
            raise Unsupported(f"weights {w.name!r} are {w.dtype}"
                              f"{' and not constant' if w.data is None else ''}; edgebuild "
                              "imports constant int8 weights")
        if any(zp != 0 for zp in w.zero_points):
            raise Unsupported(f"weights {w.name!r} have nonzero zero points (TFLite's int8 "
                              "weights are symmetric)")
        if len(w.scales) not in (1, w.shape[out_axis]) or \
                (len(w.scales) > 1 and w.axis != out_axis):
            raise Unsupported(f"weights {w.name!r}: per-channel scales along axis {w.axis}")
        return w.data.astype(np.int8)

    def bias(self, op: FbOp, channels: int) -> NDArray[np.int32] | None:
        if len(op.inputs) < 3 or op.inputs[2] < 0:
            return None
        b = self.tensor(op.inputs[2])
        if b.data is None or b.dtype != "int32" or b.data.size != channels:
            raise Unsupported(f"bias {b.name!r} is {b.dtype} with {b.data is not None and b.data.size} "
                              f"values; edgebuild imports constant int32 biases, one per channel")
        return b.data.reshape(-1).astype(np.int32)

    def op_fully_connected(self, op: FbOp, result: Translated) -> None:
        x, w, out = (self.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
        self.int8(x, out)
        weight = self.weights(w, out_axis=0)
        if int(op.options.get("weights_format", 0)) != 0:
            raise Unsupported("shuffled weights (weights_format) are not imported")
        features = int(np.prod(x.shape)) // (x.shape[0] if len(x.shape) > 1 else 1)
        if weight.ndim != 2 or weight.shape[1] != features:
            raise Unsupported(f"weights {list(weight.shape)} for {features} input features")
        if len(x.shape) > 1 and x.shape[0] != 1:
            raise Unsupported(f"input shape {list(x.shape)}: a batch of more than one row")
        source = x.index
        map_shape = self.flat_from.get(source, batchless(x.shape))
        columns = weight
        if len(map_shape) > 1 and int(np.prod(map_shape[:-1])) > 1:
            columns = weight[:, hwc_to_chw_columns(map_shape)]  # edgebuild flattens C x H x W
        out_c = weight.shape[0]
        act, low, high = self.activation(op, out)
        multiplier, shift = fc_multipliers(x, w, out, out_c)
        name = self.name("fc")
        layer: dict[str, Any] = {"name": name, "op": "linear", "out": int(out_c)}
        if len(chw(map_shape)) > 1:
            layer["flatten"] = True
        bias = self.bias(op, out_c)
        layer["bias"] = bias is not None
        if act != "none":
            layer["act"] = act
        layer["inputs"] = [self.source(source)]
        arrays = self.common([x.zero_points[0]], out, low, high)
        arrays.update(weight=columns.astype(np.int8), multiplier=multiplier, shift=shift)
        if bias is not None:
            arrays["bias"] = bias
        self.emit(op, result, layer, out, arrays, fused_note(op))

    # --- data layers ----------------------------------------------------------------------

    def op_average_pool_2d(self, op: FbOp, result: Translated) -> None:
        self.pool(op, result, "avg")

    def op_max_pool_2d(self, op: FbOp, result: Translated) -> None:
        self.pool(op, result, "max")

    def pool(self, op: FbOp, result: Translated, mode: str) -> None:
        x, out = self.tensor(op.inputs[0]), self.tensor(op.outputs[0])
        self.int8(x, out)
        if (x.scales[0], x.zero_points[0]) != (out.scales[0], out.zero_points[0]):
            raise Unsupported("its output has another scale or zero point than its input")
        size = (int(op.options.get("filter_height", 1)), int(op.options.get("filter_width", 1)))
        stride = (int(op.options.get("stride_h", 1)), int(op.options.get("stride_w", 1)))
        same = PADDINGS.get(int(op.options.get("padding", 1))) == "same"
        pads = [padding(n, k, s, 1, same) for n, k, s in zip(x.shape[1:3], size, stride, strict=True)]
        act, low, high = self.activation(op, out)
        name = self.name("pool")
        layer = {"name": name, "op": "pool2d", "mode": mode, "size": squeeze(size),
                 "stride": squeeze(stride), "inputs": [self.source(x.index)]}
        start, end = tuple(p[0] for p in pads), tuple(p[1] for p in pads)
        if any(start):  # SAME padding that pads: a window counts the input's values only
            layer["pad"] = squeeze(start)
        if end != start:
            layer["pad_end"] = squeeze(end)
        self.emit(op, result, layer, out, self.common([x.zero_points[0]], out, low, high),
                  fused_note(op))

    def op_add(self, op: FbOp, result: Translated) -> None:
        a, b, out = (self.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
        self.int8(a, b, out)
        if a.shape != b.shape:
            raise Unsupported(f"inputs of shapes {list(a.shape)} and {list(b.shape)}: "
                              "broadcasting is not imported")
        act, low, high = self.activation(op, out)
        left_shift = 20
        twice_max = 2.0 * float(max(np.float32(a.scales[0]), np.float32(b.scales[0])))
        reals = (float(np.float32(a.scales[0])) / twice_max,
                 float(np.float32(b.scales[0])) / twice_max,
                 twice_max / float(np.float32((1 << left_shift) * np.float32(out.scales[0]))))
        pairs = [arith.quantize_multiplier(r) for r in reals]
        name = self.name("add")
        layer: dict[str, Any] = {"name": name, "op": "add",
                                 "inputs": [self.source(a.index), self.source(b.index)]}
        if act != "none":
            layer["act"] = act
        arrays = self.common([a.zero_points[0], b.zero_points[0]], out, low, high)
        arrays.update(multiplier=np.array([m for m, _ in pairs], dtype=np.int32),
                      shift=np.array([s for _, s in pairs], dtype=np.int32),
                      left_shift=np.array([left_shift], dtype=np.int32))
        self.emit(op, result, layer, out, arrays, fused_note(op))

    def op_softmax(self, op: FbOp, result: Translated) -> None:
        x, out = self.tensor(op.inputs[0]), self.tensor(op.outputs[0])
        self.int8(x, out)
        if out.zero_points[0] != -128 or abs(out.scales[0] - 1 / 256) > 1e-9:
            raise Unsupported("an int8 softmax output has scale 1/256 and zero point -128 "
                              f"in TFLite; this one {out.scales[0]} / {out.zero_points[0]}")
        multiplier, left_shift, diff_min = arith.softmax_params(
            float(op.options.get("beta", 1.0)), x.scales[0])
        name = self.name("softmax")
        layer = {"name": name, "op": "softmax", "inputs": [self.source(x.index)]}
        arrays = self.common([x.zero_points[0]], out, -128, 127)
        arrays.update(multiplier=np.array([multiplier], dtype=np.int32),
                      left_shift=np.array([left_shift], dtype=np.int32),
                      diff_min=np.array([diff_min], dtype=np.int32))
        self.emit(op, result, layer, out, arrays, f"beta {op.options.get('beta', 1.0):g}")

    def op_reshape(self, op: FbOp, result: Translated) -> None:
        x, out = self.tensor(op.inputs[0]), self.tensor(op.outputs[0])
        self.int8(x, out)
        source, target = batchless(x.shape), batchless(out.shape)
        if len(target) != 1:
            raise Unsupported(f"reshape {list(x.shape)} -> {list(out.shape)}: edgebuild imports "
                              "reshapes that flatten a sample into a vector")
        if (x.scales[0], x.zero_points[0]) != (out.scales[0], out.zero_points[0]):
            raise Unsupported("its output has another scale or zero point than its input")
        consumers = [o for o in self.graph.ops if out.index in o.inputs]
        spatial = int(np.prod(source[:-1])) if len(source) > 1 else 1
        if spatial > 1 and any(o.kind != "FULLY_CONNECTED" for o in consumers):
            raise Unsupported("a flatten of an H x W x C map read by anything but "
                              "FULLY_CONNECTED (edgebuild flattens C x H x W)")
        # A flatten is a view: the consumer reads the producer's tensor, in its layout.
        self.flat_from[out.index] = self.flat_from.get(x.index, source)
        self.names[out.index] = self.source(x.index)
        if out.index in self.graph.outputs and len(source) > 1:
            name = self.name("flatten")
            layer = {"name": name, "op": "flatten", "inputs": [self.source(x.index)]}
            self.names[out.index] = name
            result.layers.append(layer)
            result.notes[name] = f"operator {op.index}: RESHAPE"


def conv_layer(name: str, out: int, kernel: tuple[int, int], stride: tuple[int, int],
               dilation: tuple[int, int], pads: list[tuple[int, int, int]], groups: int
               ) -> dict[str, Any]:
    """A conv2d layer's manifest fields, defaults left out."""
    layer: dict[str, Any] = {"name": name, "op": "conv2d", "out": out,
                             "kernel": squeeze(kernel), "stride": squeeze(stride)}
    start = (pads[0][0], pads[1][0])
    end = (pads[0][1], pads[1][1])
    if any(start):
        layer["pad"] = squeeze(start)
    if end != start:
        layer["pad_end"] = squeeze(end)
    if any(d != 1 for d in dilation):
        layer["dilation"] = squeeze(dilation)
    if groups != 1:
        layer["groups"] = groups
    return layer


def batchless(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[1:]) if len(shape) > 1 else tuple(shape)


def squeeze(values: tuple[int, ...]) -> int | list[int]:
    """A manifest pair: one number when both axes agree."""
    return int(values[0]) if len(set(values)) == 1 else [int(v) for v in values]


def padding(size: int, kernel: int, stride: int, dilation: int, same: bool
            ) -> tuple[int, int, int]:
    """(before, after, output size) of TFLite's SAME or VALID padding on one axis."""
    span = dilation * (kernel - 1) + 1
    if same:
        out = (size + stride - 1) // stride
        total = max((out - 1) * stride + span - size, 0)
        return total // 2, total - total // 2, out
    return 0, 0, (size - span + stride) // stride


def hwc_to_chw_columns(map_shape: tuple[int, ...]) -> NDArray[np.int64]:
    """For edgebuild's flattened index e (C x ... order), the TFLite column it reads (... x C)."""
    channels = map_shape[-1]
    spatial = int(np.prod(map_shape[:-1]))
    c, s = np.divmod(np.arange(channels * spatial), spatial)
    return s * channels + c


def conv_multipliers(x: FbTensor, w: FbTensor, out: FbTensor, channels: int
                     ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """PopulateConvolutionQuantizationParams: input x filter / output scale per channel, in
    double precision from the float32 scales."""
    scales = w.scales if len(w.scales) > 1 else w.scales * channels
    pairs = [arith.quantize_multiplier(float(np.float32(x.scales[0])) * float(np.float32(s))
                                       / float(np.float32(out.scales[0]))) for s in scales]
    return (np.array([m for m, _ in pairs], dtype=np.int32),
            np.array([s for _, s in pairs], dtype=np.int32))


def fc_multipliers(x: FbTensor, w: FbTensor, out: FbTensor, channels: int
                   ) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """GetQuantizedConvolutionMultipler: the input x filter product in float32, then the
    division in double (per channel when the filter has per-channel scales)."""
    scales = w.scales if len(w.scales) > 1 else w.scales * channels
    pairs = [arith.quantize_multiplier(float(np.float32(x.scales[0]) * np.float32(s))
                                       / float(np.float32(out.scales[0]))) for s in scales]
    return (np.array([m for m, _ in pairs], dtype=np.int32),
            np.array([s for _, s in pairs], dtype=np.int32))


def fused_note(op: FbOp) -> str:
    fused = ACTIVATIONS.get(int(op.options.get("fused_activation_function", 0)), "none")
    return "" if fused == "none" else f"+ {fused.upper()}"


def describe(op: FbOp) -> str:
    return f"operator {op.index} ({re.sub(r'[^A-Z0-9_ ]', '', op.kind)})"
