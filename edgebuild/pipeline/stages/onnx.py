"""Stage `onnx`: the model as ONNX files, from the checkpoints the training stages kept.

float.onnx is train's float.npz (the float network), qat.onnx is qat's folded.npz under
the fake quantization it was trained with (only when qat.enabled), int8.onnx is quantize's
integer model (interchange.export). A stage of its own, after them, so that an operator's
ONNX emitter is code of this stage only: editing it re-exports, it never retrains
(build.definitions). Nothing downstream reads these files: they are for people and
other tools (onnxruntime, Netron).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads pydantic
    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.pipeline.validation import Checked


def config(checked: Checked) -> JSONObject:
    """What shapes the three files besides the checkpoints: the layers (the float one
    clamped or not), QAT's policy and the training rounding (qat.onnx's weight scales),
    the device's number format."""
    from edgebuild.targets import numbers

    manifest = checked.manifest
    model = manifest.model.model_dump(mode="json", exclude={"layers": {"__all__": {"doc"}}})
    return {"model": model, "clamp": manifest.train.clamp_activations,
            "qat": manifest.qat.model_dump(mode="json", exclude={"epochs", "lr", "batch"}),
            "numbers": numbers.numbers_config(manifest),
            "rounding": numbers.training_rounding(manifest)}


def in_own_format(checked: Checked) -> bool:
    """ONNX's integer form is written of edgebuild's own number format (ops.onnxcode);
    a model in TFLite's format came from a .tflite file and has no ONNX form here."""
    return checked.manifest.model.format.value == "edgebuild"


def run(ctx: Context[Checked]) -> None:
    if "train" in ctx.inputs:
        float_onnx(ctx)
    if "qat" in ctx.inputs and ctx.checked.manifest.qat.enabled:
        qat_onnx(ctx)
    int8_onnx(ctx)


def float_onnx(ctx: Context[Checked]) -> None:
    """float.onnx: train's kept weights."""
    from edgebuild.core import arrays
    from edgebuild.interchange import export

    manifest = ctx.checked.manifest
    state = arrays.load(ctx.inputs["train"] / "float.npz")
    export.write(ctx.out, "float.onnx", lambda: export.float_model(
        manifest.model.input, manifest.model.layers, state,
        manifest.train.clamp_activations), lambda line: ctx.log(f"onnx: {line}"))


def qat_onnx(ctx: Context[Checked]) -> None:
    """qat.onnx: QAT's kept weights with the weight scales its network computes from them
    (numerics.torch_scale_exponent, as in its forward)."""
    from edgebuild.core import arrays, numerics
    from edgebuild.interchange import export
    from edgebuild.model import folding, policy
    from edgebuild.ops.operator import Mode
    from edgebuild.targets import numbers
    from edgebuild.train import network

    manifest = ctx.checked.manifest
    layers, _ = folding.fold_layers(manifest.model.layers)
    policies = policy.resolve(manifest.qat, layers,
                              numbers.device_numbers(manifest.target.device.value))
    rounding = numbers.training_rounding(manifest)
    net = network.Net(manifest.model.input, layers, Mode("qat", rounding, policy=policies))
    network.load_numpy(net, arrays.load(ctx.inputs["qat"] / "folded.npz"))
    scale_exps = {name: numerics.torch_scale_exponent(
        network.parameter(net, name, "weight"), p.shift_quantile, p.shift_limits)
        for name, p in policies.items()}
    state = network.state_numpy(net)
    export.write(ctx.out, "qat.onnx", lambda: export.qat_model(
        manifest.model.input, net.layers, state, scale_exps, policies, rounding),
        lambda line: ctx.log(f"onnx: {line}"))


def int8_onnx(ctx: Context[Checked]) -> None:
    """int8.onnx: quantize's integer model, bit-exact with the integer reference."""
    from edgebuild.interchange import export
    from edgebuild.model import quantized

    model = quantized.load(ctx.inputs["quantize"], ctx.checked.manifest)
    export.write(ctx.out, "int8.onnx", lambda: export.int8_model(model),
                 lambda line: ctx.log(f"onnx: {line}"))


STAGE = Stage("onnx", ("quantize", "qat", "train"), config, run,
              "the float, fake-quant and integer models as ONNX files", applies=in_own_format,
              tools=("torch", "numpy", "onnx"), facets=("onnx", "stream", "torch", "weights"))
