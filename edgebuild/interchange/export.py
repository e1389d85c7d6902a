"""The model as ONNX, in its three forms (ops.onnxcode says what each computes): the float
network (float.onnx, from train's checkpoint), the folded fake-quant network (qat.onnx,
from qat's) and the integer model (int8.onnx, from quantize's): the `onnx` stage writes
them.

Each layer's nodes come from its op's `onnx` facet; this module only wires them by name
and wraps them in a model. The graph reads `input` (N, *sample: a clip for a model with a
buffer) and writes the last layer's output flat, (N, outputs), as the C does; tensors are
named after the layers that write them.

Byte-reproducible: opset, IR version, producer and every name are fixed, initializers are
raw little-endian arrays, nothing records a time or a path, and the protobuf is serialized
deterministically, so one checkpoint always gives the same bytes (the stages' outputs are
content-hashed). Nor does anything record the manifest's name: the graph is named after its
form (`edgebuild.float`). The stages that write these files are keyed without the name, so
that renaming a manifest retrains nothing; a name in the bytes would make one cache key
stand for two different files (which one a key held depended on which manifest built it
first).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import Shape
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.onnxcode import FLOAT, INT8, INT32, Form, OnnxCode, OnnxNode, OnnxStep
from edgebuild.ops.operator import LayerPolicy, QuantParams, Unsupported

if TYPE_CHECKING:
    import onnx
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer
    from edgebuild.model.quantized import QuantizedModel

OPSET = 17  # QuantizeLinear/DequantizeLinear with int32 bias, ConvInteger, MatMulInteger
IR_VERSION = 8  # the IR of opset 17: readers as old as onnxruntime 1.13 load the files
PRODUCER = "edgebuild"

DESCRIPTION = {
    Form.float: "the trained float network: input q/128 (float32), output the last layer's "
                "values",
    Form.qat: "the folded network with fake quantization (QuantizeLinear/DequantizeLinear "
              "with power-of-two scales): input q/128 (float32), output the last layer's "
              "values on the integer grid",
    Form.int8: "the integer model: int8 input q (meaning q/128), integer weights, int32 "
               "accumulators and power-of-two requantization; output the last layer's "
               "integers (int8, int32 for a wide layer), bit-exact with edgebuild's "
               "integer reference and the generated C",
}


class Unexportable(Exception):
    """A layer the ONNX form cannot express (its op's `onnx` facet is Unsupported): the
    stage writes no file for that form and logs this reason."""


def float_model(input_shape: Shape, layers: tuple[Layer, ...],
                state: Mapping[str, NDArray[Any]], clamp: bool) -> bytes:
    """The trained network (`layers` as the manifest gives them, `state` as float.npz);
    a layer a batchnorm folds into unclamped, as it trained (folding.fold_targets)."""
    from edgebuild.model.folding import fold_targets

    unclamped = fold_targets(layers)

    def details(layer: Layer) -> dict[str, Any]:
        return {"tensors": _tensors(state, layer.name),
                "clamp": clamp and layer.name not in unclamped}

    return _model(Form.float, input_shape, layers, details, {})


def qat_model(input_shape: Shape, layers: tuple[Layer, ...],
              state: Mapping[str, NDArray[Any]], scale_exps: Mapping[str, int],
              policies: Mapping[str, LayerPolicy], rounding: str) -> bytes:
    """The folded fake-quant network: `layers` folded, `state` as folded.npz, the weight
    scale exponent each compute layer trained with and its policy (bits, bias format)."""
    params = fake_quant_params(state, scale_exps, policies)

    def details(layer: Layer) -> dict[str, Any]:
        return {"quant": params.get(layer.name), "rounding": rounding}

    return _model(Form.qat, input_shape, layers, details, {"rounding": rounding})


def int8_model(model: QuantizedModel) -> bytes:
    """The integer model as the `quantize` stage wrote it."""
    def details(layer: Layer) -> dict[str, Any]:
        return {"quant": model.params.get(layer.name), "rounding": model.rounding}

    return _model(Form.int8, model.input_shape, model.layers, details,
                  {"rounding": model.rounding})


def fake_quant_params(state: Mapping[str, NDArray[Any]], scale_exps: Mapping[str, int],
                      policies: Mapping[str, LayerPolicy]) -> dict[str, QuantParams]:
    """The integers the fake-quant network's weights stand for at its scale exponents
    (numerics: the same rounding as torch_fake_weights / torch_fake_bias)."""
    from edgebuild.core import numerics

    params: dict[str, QuantParams] = {}
    for name, scale_exp in scale_exps.items():
        policy, bias = policies[name], state.get(f"{name}.bias")
        weight = numerics.np_quantize_weights(state[f"{name}.weight"], scale_exp,
                                              policy.weight_bits)
        bias_q = None if bias is None else numerics.np_quantize_bias(
            bias, scale_exp, policy.weight_bits, policy.bias_bits, policy.bias_scale_log2)
        params[name] = QuantParams(weight, bias_q, scale_exp, policy.weight_bits)
    return params


def write(out: Path, filename: str, build: Callable[[], bytes],
          log: Callable[[str], None]) -> None:
    """Write `build()` to `out/filename`, or log why the form cannot be exported."""
    try:
        data = build()
    except Unexportable as exc:
        log(f"no {filename}: {exc}")
        return
    (out / filename).write_bytes(data)


def _tensors(state: Mapping[str, NDArray[Any]], layer: str) -> dict[str, NDArray[Any]]:
    """A layer's float tensors by their torch names (`conv1.weight` -> `weight`)."""
    prefix = f"{layer}."
    return {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}


def _model(form: Form, input_shape: Shape, layers: tuple[Layer, ...],
           details: Callable[[Layer], dict[str, Any]], metadata: dict[str, str]) -> bytes:
    graph, problems = graphs.build(tuple(input_shape), layers)
    if graph is None:
        raise ValueError(f"inconsistent layers: {problems[0].message}")
    code = _code(form, graph, layers, details)
    last = graph.output
    wide = bool(getattr(layers[-1], "wide", False))
    out_type = FLOAT if form is not Form.int8 else INT32 if wide else INT8
    return _serialize(f"{PRODUCER}.{form.value}", form, code, graphs.sample_shape(input_shape, layers),
                      (code.output, out_type, math.prod(last.out_shape)),
                      {"edgebuild.form": form.value, **{f"edgebuild.{k}": v
                                                       for k, v in metadata.items()}})


def _code(form: Form, graph: graphs.Graph, layers: tuple[Layer, ...],
          details: Callable[[Layer], dict[str, Any]]) -> OnnxCode:
    """Every layer's nodes in graph order, then the output made flat (N, outputs)."""
    by_name = {layer.name: layer for layer in layers}
    code = OnnxCode("input", graphs.INPUT)
    if graphs.frames(layers) > 1:  # clips in, frames through the layers (graph.per_frame)
        import numpy as np

        code = code.then("Reshape", np.array([-1, *graph.input], np.int64)).named("input/frames")
    tensors = {graphs.INPUT: code.output}
    for node in graph.nodes:
        layer = by_name[node.name]
        facet = OPS[layer.op].onnx
        if isinstance(facet, Unsupported):
            raise Unexportable(f"layer {layer.name!r} ({layer.op}): {facet.reason}")
        step = OnnxStep(layer, form, node.in_shapes, node.out_shape,
                        tuple(tensors[name] for name in node.inputs), layer.name,
                        **details(layer))
        emitted = facet.emit(step)
        code = OnnxCode(code.prefix, emitted.output, code.nodes + emitted.nodes,
                        code.initializers + emitted.initializers)
        tensors[layer.name] = emitted.output
    last = graph.output
    if len(last.out_shape) == 1:
        return code
    flat = OnnxCode(last.name, code.output).then("Flatten", axis=1).named(f"{last.name}/flat")
    return OnnxCode(code.prefix, flat.output, code.nodes + flat.nodes, code.initializers)


def _serialize(name: str, form: Form, code: OnnxCode, sample: Shape,
               output: tuple[str, int, int], metadata: dict[str, str]) -> bytes:
    """The ModelProto, checked (onnx.checker with shape inference: a malformed graph is a
    bug here, never a file), serialized deterministically."""
    import onnx
    from onnx import helper

    out_name, out_type, out_size = output
    in_type = INT8 if form is Form.int8 else FLOAT
    graph = helper.make_graph(
        [_node(node) for node in code.nodes], name,
        [helper.make_tensor_value_info(graphs.INPUT, in_type, ["N", *sample])],
        [helper.make_tensor_value_info(out_name, out_type, ["N", out_size])],
        [_initializer(tensor, value) for tensor, value in code.initializers])
    model = helper.make_model(graph, producer_name=PRODUCER, producer_version=_version(),
                              opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, doc_string=DESCRIPTION[form])
    helper.set_model_props(model, dict(sorted(metadata.items())))
    onnx.checker.check_model(model, full_check=True)
    return bytes(model.SerializeToString(deterministic=True))


def _node(node: OnnxNode) -> onnx.NodeProto:
    from onnx import helper

    attributes: dict[str, Any] = dict(node.attributes)
    return helper.make_node(node.op_type, list(node.inputs), list(node.outputs),
                            name=node.outputs[0], **attributes)


def _initializer(name: str, value: NDArray[Any]) -> onnx.TensorProto:
    import numpy as np
    from onnx import numpy_helper

    return numpy_helper.from_array(np.ascontiguousarray(value), name)


def _version() -> str:
    from edgebuild import __version__

    return __version__
