"""One translator per ONNX operator an import understands: what PyTorch's exporter emits
for the layers edgebuild has (Conv with or without bias, Gemm or MatMul + Add, Relu, Clip
as ReLU6, pooling, BatchNormalization, Add, Concat, Flatten/Reshape, Identity/Dropout,
1-D and grouped convolutions, ConvTranspose, a final Softmax).

This table is keyed by ONNX operator types, the file's vocabulary: it maps onto the
operator records (the layer vocabulary), where everything about an edgebuild op lives.
An operator type missing here is listed as unsupported, with every other such node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edgebuild.core.numerics import ACT_SCALE, INT8_MAX
from edgebuild.interchange.limits import shown_list
from edgebuild.interchange.translation import (
    Rejected,
    Translation,
    attributes,
    computes,
    describe,
)
from edgebuild.ops import OPS

if TYPE_CHECKING:
    import onnx
    from numpy.typing import NDArray


def _f32(value: NDArray[Any]) -> NDArray[Any]:
    import numpy as np

    return np.ascontiguousarray(value, dtype=np.float32)


def _axis_value(values: list[int]) -> int | list[int]:
    """A per-axis field as the manifest writes it: one number when the axes agree."""
    return values[0] if len(set(values)) == 1 else list(values)


def _pads(found: dict[str, Any], sizes: tuple[int, ...], kernel: list[int], strides: list[int],
          dilations: list[int]) -> list[int]:
    """Symmetric padding per axis (edgebuild pads both sides alike), from `pads` or an
    `auto_pad` of SAME_* that comes out even."""
    dims = len(kernel)
    auto = found.get("auto_pad", "NOTSET")
    if auto == "VALID":
        return [0] * dims
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        totals = [max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
                  for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True)]
        if any(total % 2 for total in totals):
            raise Rejected(f"auto_pad {auto} pads one side more than the other here; "
                           "edgebuild pads both sides alike")
        return [total // 2 for total in totals]
    pads = list(found.get("pads", [0] * (2 * dims)))
    if pads[:dims] != pads[dims:]:
        raise Rejected(f"pads {shown_list(pads)} differ between the two sides of an axis; "
                       "edgebuild pads both sides alike")
    return pads[:dims]


def _window(node: onnx.NodeProto, t: Translation, kernel: list[int]) -> dict[str, Any]:
    """kernel, stride, pad, dilation of a convolution over its input's spatial axes."""
    found = attributes(node)
    sizes = t.shape(node.input[0])[1:]
    strides = list(found.get("strides", [1] * len(kernel)))
    dilations = list(found.get("dilations", [1] * len(kernel)))
    return {"kernel": _axis_value(kernel), "stride": _axis_value(strides),
            "pad": _axis_value(_pads(found, sizes, kernel, strides, dilations)),
            "dilation": _axis_value(dilations)}


def conv(t: Translation, node: onnx.NodeProto) -> None:
    """Conv over (C, L) -> conv1d, over (C, H, W) -> conv2d; `group` -> groups."""
    rank = len(t.shape(node.input[0]))
    if rank not in (2, 3):
        raise Rejected(f"a convolution over {rank - 1} spatial axes; edgebuild has conv1d "
                       "and conv2d")
    weight, bias = t.required(node, 1, "weight"), t.constant(node, 2, "bias")
    window = _window(node, t, list(weight.shape[2:]))
    layer = t.add("conv1d" if rank == 2 else "conv2d", node, node.input[:1],
                  out=int(weight.shape[0]), groups=int(attributes(node).get("group", 1)),
                  bias=bias is not None, **window)
    t.weights[f"{layer['name']}.weight"] = _f32(weight)
    if bias is not None:
        t.weights[f"{layer['name']}.bias"] = _f32(bias)


def conv_transpose(t: Translation, node: onnx.NodeProto) -> None:
    """ConvTranspose over (C, H, W) -> conv_transpose2d (weights kept as (in, out/groups,
    kh, kw), PyTorch's and ONNX's layout)."""
    found = attributes(node)
    if len(t.shape(node.input[0])) != 3:
        raise Rejected("edgebuild's transposed convolution is 2-D (conv_transpose2d)")
    if "output_shape" in found or found.get("auto_pad", "NOTSET") != "NOTSET":
        raise Rejected("give explicit pads and output_padding, not output_shape or auto_pad")
    weight, bias = t.required(node, 1, "weight"), t.constant(node, 2, "bias")
    kernel = list(weight.shape[2:])
    pads = _pads({"pads": found.get("pads", [0] * 4)}, (), kernel, [], [])
    groups = int(found.get("group", 1))
    layer = t.add("conv_transpose2d", node, node.input[:1], out=int(weight.shape[1]) * groups,
                  groups=groups, bias=bias is not None, kernel=_axis_value(kernel),
                  stride=_axis_value(list(found.get("strides", [1, 1]))),
                  pad=_axis_value(pads),
                  output_pad=_axis_value(list(found.get("output_padding", [0, 0]))),
                  dilation=_axis_value(list(found.get("dilations", [1, 1]))))
    t.weights[f"{layer['name']}.weight"] = _f32(weight)
    if bias is not None:
        t.weights[f"{layer['name']}.bias"] = _f32(bias)


def _flat(t: Translation, node: onnx.NodeProto) -> None:
    if len(t.shape(node.input[0])) != 1:
        raise Rejected(f"it multiplies a {shown_list(t.shape(node.input[0]))} tensor per "
                       "sample; edgebuild's linear layer reads flat features (Flatten first)")


def gemm(t: Translation, node: onnx.NodeProto) -> None:
    """Gemm (x @ B' * alpha + C * beta) -> linear: weight (out, features)."""
    found = attributes(node)
    _flat(t, node)
    if found.get("transA", 0):
        raise Rejected("transA: the input must be (N, features)")
    matrix, bias = t.required(node, 1, "weight"), t.constant(node, 2, "bias")
    weight = (matrix if found.get("transB", 0) else matrix.T) * found.get("alpha", 1.0)
    out = int(weight.shape[0])
    if bias is not None and bias.size not in (1, out):
        raise Rejected(f"a bias of shape {shown_list(bias.shape)} for {out} outputs")
    layer = t.add("linear", node, node.input[:1], out=out, bias=bias is not None)
    t.weights[f"{layer['name']}.weight"] = _f32(weight)
    if bias is not None:
        import numpy as np

        t.weights[f"{layer['name']}.bias"] = _f32(np.broadcast_to(
            bias.reshape(-1) * found.get("beta", 1.0), (out,)))


def matmul(t: Translation, node: onnx.NodeProto) -> None:
    """MatMul by a constant (features, out) matrix -> linear without bias (an Add after
    it becomes the bias)."""
    _flat(t, node)
    matrix = t.required(node, 1, "weight matrix")
    if matrix.ndim != 2:
        raise Rejected(f"a {matrix.ndim}-D weight; edgebuild's linear layer takes a matrix")
    layer = t.add("linear", node, node.input[:1], out=int(matrix.shape[1]), bias=False)
    t.weights[f"{layer['name']}.weight"] = _f32(matrix.T)


def add(t: Translation, node: onnx.NodeProto) -> None:
    """Add (or Sum) of computed tensors -> add; a constant added to a convolution's or
    linear layer's only output -> its bias."""
    constants = [name for name in node.input if name in t.source.constants]
    if not constants:
        t.add("add", node, node.input)
        return
    other = next((name for name in node.input if name not in t.source.constants), None)
    layer = None if other is None else t.fusable(other)
    if len(node.input) != 2 or layer is None or not computes(layer):
        raise Rejected("it adds a constant; edgebuild adds constants only as the bias of the "
                       "convolution or linear layer whose only reader is the Add")
    assert other is not None  # a fusable layer holds it
    _bias(t, node, layer, other, t.source.constants[constants[0]])


def _bias(t: Translation, node: onnx.NodeProto, layer: dict[str, Any], tensor: str,
          value: NDArray[Any]) -> None:
    """A constant of one value per output channel (broadcast as (C, 1, ...) over the
    sample), or one value, added into `layer`'s bias."""
    import numpy as np

    channels, full = layer["out"], (1, *t.shape(tensor))
    padded = value.reshape((1,) * (len(full) - value.ndim) + value.shape) \
        if value.ndim <= len(full) else value
    if padded.ndim != len(full) or padded.shape[1] not in (1, channels) or \
            any(d != 1 for i, d in enumerate(padded.shape) if i != 1):
        raise Rejected(f"it adds a constant of shape {shown_list(value.shape)}, not one value "
                       f"per output channel of {layer['name']} ({channels})")
    key = f"{layer['name']}.bias"
    per_channel = np.broadcast_to(padded.reshape(-1), (channels,))
    t.weights[key] = _f32(t.weights.get(key, 0.0) + per_channel)
    layer["bias"] = True
    t.merge(node, layer)


def _activate(t: Translation, node: onnx.NodeProto, act: str) -> None:
    """An activation -> the `act` of the layer right before it; a ReLU after a max pool
    (PyTorch's `relu(max_pool(conv(x)))`) -> the `act` of the layer before the pool, as
    max pooling and ReLU commute."""
    layer = t.fusable(node.input[0])
    pool = layer if act == "relu" and layer is not None and layer.get("mode") == "max" else None
    if pool is not None:
        layer = t.fusable(t.outputs[pool["inputs"][0]]) if pool["inputs"][0] in t.outputs \
            else None
    if layer is None or "act" not in OPS[layer["op"]].params.model_fields \
            or layer.get("act", "none") != "none":
        raise Rejected(f"edgebuild applies {act} as the `act` of a convolution, linear, add "
                       "or batchnorm layer (without one yet) whose output only the activation "
                       "(or a max pool before a ReLU) reads")
    layer["act"] = act
    if pool is None:
        t.merge(node, layer)
        return
    t.notes[layer["name"]].append(f"{describe(node)} (before {pool['name']}: they commute)")
    t.produce(node.output[0], pool["name"])


def relu(t: Translation, node: onnx.NodeProto) -> None:
    _activate(t, node, "relu")


def absolute(t: Translation, node: onnx.NodeProto) -> None:
    _activate(t, node, "abs")


def clip(t: Translation, node: onnx.NodeProto) -> None:
    """Clip to [0, m] with m at least the int8 range's top (ReLU6: m = 6) -> relu: the
    integer model saturates at 127/128 anyway; the float model no longer clips at m."""
    import math

    found = attributes(node)
    low, high = found.get("min", -math.inf), found.get("max", math.inf)  # opset < 11
    if len(node.input) > 1:
        given = [t.constant(node, i, what) for i, what in ((1, "minimum"), (2, "maximum"))]
        low = -math.inf if given[0] is None else float(given[0])
        high = math.inf if given[1] is None else float(given[1])
    if low != 0 or high < INT8_MAX / ACT_SCALE:
        raise Rejected(f"Clip to [{low}, {high}]: edgebuild's activations are relu (a Clip "
                       "to [0, m] with m >= 127/128, e.g. ReLU6) and abs")
    _activate(t, node, "relu")
    if math.isfinite(high):
        t.warnings.append(f"{describe(node)}: Clip to [0, {high:g}] imported as relu: the "
                          "integer model saturates at 127/128 anyway; the float model no "
                          f"longer clips at {high:g}")


def batchnorm(t: Translation, node: onnx.NodeProto) -> None:
    """BatchNormalization right after a convolution or linear layer -> batchnorm (folded
    into it before quantization), with its statistics and epsilon."""
    layer = t.fusable(node.input[0])
    if layer is None or not computes(layer) or layer.get("act", "none") != "none":
        raise Rejected("edgebuild folds a batchnorm into the convolution or linear layer "
                       "right before it (without an activation), whose output only the "
                       "batchnorm reads")
    found = attributes(node)
    tensors = {part: t.required(node, index, part) for index, part in
               enumerate(("weight", "bias", "running_mean", "running_var"), start=1)}
    momentum = round(1.0 - float(found.get("momentum", 0.9)), 6)
    bn = t.add("batchnorm", node, node.input[:1], eps=float(found.get("epsilon", 1e-5)),
               momentum=min(max(momentum, 1e-6), 1.0))
    import numpy as np

    for part, value in tensors.items():
        t.weights[f"{bn['name']}.{part}"] = _f32(value)
    t.weights[f"{bn['name']}.num_batches_tracked"] = np.array(0, dtype=np.int64)


def _pool(t: Translation, node: onnx.NodeProto, mode: str, sizes: list[int],
          strides: list[int]) -> None:
    rank = len(t.shape(node.input[0]))
    if rank not in (2, 3) or len(sizes) != rank - 1:
        raise Rejected(f"pooling over {len(sizes)} axes of a {rank}-D sample; edgebuild has "
                       "pool1d and pool2d")
    fields: dict[str, Any] = {"mode": mode, "size": _axis_value(sizes)}
    if strides != sizes:
        fields["stride"] = _axis_value(strides)
    t.add("pool1d" if rank == 2 else "pool2d", node, node.input[:1], **fields)


def pool(t: Translation, node: onnx.NodeProto) -> None:
    """MaxPool / AveragePool without padding, dilation or ceil mode -> pool1d / pool2d."""
    found = attributes(node)
    sizes = list(found.get("kernel_shape", []))
    if any(found.get("pads", [0])) or found.get("ceil_mode", 0) or \
            any(d != 1 for d in found.get("dilations", [1])) or \
            found.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or len(node.output) > 1:
        raise Rejected("edgebuild pools without padding, dilation, ceil mode or indices")
    _pool(t, node, "max" if node.op_type == "MaxPool" else "avg", sizes,
          list(found.get("strides", [1] * len(sizes))))


def global_pool(t: Translation, node: onnx.NodeProto) -> None:
    """GlobalAveragePool / GlobalMaxPool -> a pool over the whole sample."""
    sizes = list(t.shape(node.input[0])[1:])
    _pool(t, node, "max" if node.op_type == "GlobalMaxPool" else "avg", sizes, sizes)


def concat(t: Translation, node: onnx.NodeProto) -> None:
    axis = int(attributes(node).get("axis", 1))
    rank = len(t.shape(node.input[0])) + 1
    if axis % rank != 1:
        raise Rejected(f"it joins along axis {axis}; edgebuild concatenates channels (axis 1)")
    t.add("concat", node, node.input)


def view(t: Translation, node: onnx.NodeProto) -> None:
    """Flatten, Reshape, Squeeze, Unsqueeze: the same values under the output's per-sample
    shape (shape inference gives it) -> nothing, flatten or reshape."""
    before, after = t.shape(node.input[0]), t.shape(node.output[0])
    if node.op_type == "Flatten" and int(attributes(node).get("axis", 1)) % (len(before) + 1) != 1:
        raise Rejected("Flatten must keep the batch axis (axis 1)")
    if after == before:
        t.alias(node)
    elif len(after) == 1:
        t.add("flatten", node, node.input[:1])
    elif len(after) <= 3:
        t.add("reshape", node, node.input[:1], shape=list(after))
    else:
        raise Rejected(f"a {len(after)}-D sample {shown_list(after)}; edgebuild's are 1-D to "
                       "3-D")


def identity(t: Translation, node: onnx.NodeProto) -> None:
    """Identity, and Dropout (the identity at inference)."""
    t.alias(node)


def softmax(t: Translation, node: onnx.NodeProto) -> None:
    """A final Softmax / LogSoftmax: left out, the scores before it rank the classes alike."""
    if node.output[0] != t.source.output:
        raise Rejected("edgebuild has no softmax layer; only a final one is left out (the "
                       "scores before it rank the classes alike)")
    t.alias(node)
    t.warnings.append(f"{describe(node)}: the final {node.op_type} is left out: the model "
                      "outputs the scores before it (the same class ranking)")


TRANSLATORS: dict[str, Callable[[Translation, Any], None]] = {
    "Conv": conv, "ConvTranspose": conv_transpose, "Gemm": gemm, "MatMul": matmul,
    "Add": add, "Sum": add, "Relu": relu, "Abs": absolute, "Clip": clip,
    "BatchNormalization": batchnorm, "MaxPool": pool, "AveragePool": pool,
    "GlobalAveragePool": global_pool, "GlobalMaxPool": global_pool, "Concat": concat,
    "Flatten": view, "Reshape": view, "Squeeze": view, "Unsqueeze": view,
    "Identity": identity, "Dropout": identity, "Softmax": softmax, "LogSoftmax": softmax,
}
