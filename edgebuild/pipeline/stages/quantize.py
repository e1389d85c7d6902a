"""Stage `quantize`: integer weights, biases and per-layer shifts.

With QAT the weight scale of each layer is the one QAT trained with (a quantile of |w|);
without QAT (post-training quantization) it comes from the clip method: `max` (max |w|),
`scale` (max |w| x scale), `stddev` (stddevs x std(w)), `avgmax` (mean over output channels
of each channel's max |w|). Weights round half up and saturate to the bit width; see
numerics for the scale and shift conventions. The `onnx` stage writes the integer model
as int8.onnx.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Sequence

    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.core.numerics import Arithmetic
    from edgebuild.manifest import Layer, Manifest, Quantize
    from edgebuild.model.quantization import LayerQuant
    from edgebuild.model.quantized import QuantizedModel
    from edgebuild.ops.operator import LayerPolicy
    from edgebuild.pipeline.validation import Checked

    Integers = dict[str, NDArray[np.integer[Any]]]  # weights.npz: <layer>.weight / .bias

G = TypeVar("G", bound="np.generic")  # an array's element type, kept by a relayout


def config(checked: Checked) -> JSONObject:
    from edgebuild.targets import numbers

    manifest = checked.manifest
    return {"quantize": manifest.quantize.model_dump(mode="json"),
            "qat": manifest.qat.model_dump(mode="json", exclude={"epochs", "lr", "batch"}),
            "numbers": numbers.numbers_config(manifest), "rounding": numbers.rounding_mode(manifest),
            "imported": manifest.model.weights is not None}


def files(checked: Checked) -> list[Path]:
    """Imported weights are keyed by content (the file is the model's source)."""
    weights = checked.manifest.model.weights
    return [] if weights is None else [checked.base / weights]


def threshold(weights: NDArray[np.floating[Any]], quantize: Quantize, quantile: float,
              qat: bool) -> float:
    import numpy as np

    magnitude = np.abs(weights.astype(np.float64))
    if qat or quantize.clip.value == "max":
        return float(np.quantile(magnitude, quantile) if quantile < 1 else magnitude.max())
    if quantize.clip.value == "scale":
        return float(magnitude.max() * quantize.scale)
    if quantize.clip.value == "stddev":
        return float(quantize.stddevs * weights.std())
    return float(magnitude.reshape(len(weights), -1).max(axis=1).mean())


def out_major(layer: Layer, weights: NDArray[G]) -> NDArray[G]:
    """Weights with output channels first (`avgmax` clips per output channel)."""
    from edgebuild.ops import OPS
    from edgebuild.ops.operator import Weights

    facet = OPS[layer.op].weights
    assert isinstance(facet, Weights)  # called for compute layers only: they have weights
    return facet.to_out_major(weights, layer)


def quantize_layers(layers: tuple[Layer, ...], state: dict[str, NDArray[Any]],
                    policies: dict[str, LayerPolicy], manifest: Manifest
                    ) -> tuple[Integers, list[LayerQuant]]:
    import numpy as np

    from edgebuild.core import numerics

    weights: Integers = {}
    rows: list[LayerQuant] = []
    for layer in layers:
        if layer.name not in policies:
            continue
        policy = policies[layer.name]
        w = state[f"{layer.name}.weight"]
        scale_exp = numerics.scale_exponent(threshold(out_major(layer, w), manifest.quantize,
                                                      policy.shift_quantile, manifest.qat.enabled),
                                            policy.shift_limits)
        w_q = numerics.np_quantize_weights(w, scale_exp, policy.weight_bits)
        weights[f"{layer.name}.weight"] = w_q.astype(np.int8)
        bias = state.get(f"{layer.name}.bias")
        if bias is not None:
            b_q = numerics.np_quantize_bias(bias, scale_exp, policy.weight_bits, policy.bias_bits,
                                            policy.bias_scale_log2)
            weights[f"{layer.name}.bias"] = b_q.astype(np.int32)
        rows.append(row(layer, w_q, policy.weight_bits, policy.bias_bits, scale_exp))
    return weights, rows


def row(layer: Layer, w_q: NDArray[np.integer[Any]], bits: int, bias_bits: int,
        scale_exp: int) -> LayerQuant:
    """One layer's line of quant.json (and of the table on stderr), before calibration."""
    import numpy as np

    from edgebuild.core import numerics
    from edgebuild.model.quantization import LayerQuant

    low, high = numerics.weight_limits(bits)
    return LayerQuant(layer.name, layer.op, bits, bias_bits, scale_exp,
                      numerics.output_shift(scale_exp, bits), int(w_q.min()), int(w_q.max()),
                      round(100.0 * float(np.mean((w_q == low) | (w_q == high))), 3),
                      bool(getattr(layer, "wide", False)))


def imported_layers(layers: tuple[Layer, ...], source: dict[str, NDArray[Any]],
                    numbers: Arithmetic | None) -> tuple[Integers, list[LayerQuant]]:
    """Pre-quantized weights (model.weights, checked at validation) -> the artifact format."""
    import numpy as np

    weights: Integers = {}
    rows: list[LayerQuant] = []
    for layer in layers:
        if f"{layer.name}.weight" not in source:
            continue
        w_q = source[f"{layer.name}.weight"].astype(np.int64)
        bits, scale_exp = int(source[f"{layer.name}.bits"]), int(source[f"{layer.name}.scale_exp"])
        weights[f"{layer.name}.weight"] = w_q.astype(np.int8)
        if f"{layer.name}.bias" in source:
            weights[f"{layer.name}.bias"] = source[f"{layer.name}.bias"].astype(np.int32)
        bias_bits = 32 if numbers is None else numbers.bias_bits
        rows.append(row(layer, w_q, bits, bias_bits, scale_exp))
    return weights, rows


def tflite_layers(layers: tuple[Layer, ...], source: dict[str, NDArray[Any]]
                  ) -> tuple[Integers, list[LayerQuant]]:
    """A TFLite model's compute layers: the arrays its C stores (int8 weights, int32 bias,
    per-channel multiplier and shift: what weights.c holds and the flash budget counts);
    its other integers (zero points, clamps) go to tflite.npz. A table row's scale
    exponent and shift are 0: the per-channel multipliers stand for them."""
    import dataclasses

    import numpy as np

    weights: Integers = {}
    rows: list[LayerQuant] = []
    for layer in layers:
        if f"{layer.name}.weight" not in source:
            continue
        w_q = source[f"{layer.name}.weight"].astype(np.int64)
        weights[f"{layer.name}.weight"] = w_q.astype(np.int8)
        for part in ("bias", "multiplier", "shift"):
            if f"{layer.name}.{part}" in source:
                weights[f"{layer.name}.{part}"] = source[f"{layer.name}.{part}"].astype(np.int32)
        rows.append(dataclasses.replace(row(layer, w_q, 8, 32, 0), shift=0))
    return weights, rows


def saturation(model: QuantizedModel, x: NDArray[np.integer[Any]]) -> dict[str, float]:
    """% of each layer's int8 outputs sitting at the rails (-128 or 127) on calibration data."""
    import numpy as np

    from edgebuild.model.quantized import run_reference

    values = run_reference(model, x, keep_all=True)
    return {layer.name: round(100.0 * float(np.mean((values[layer.name] == -128) |
                                                    (values[layer.name] == 127))), 3)
            for layer in model.layers if not getattr(layer, "wide", False)}


def run(ctx: Context[Checked]) -> None:
    import dataclasses

    from edgebuild.core import arrays
    from edgebuild.model import quantized
    from edgebuild.model.quantization import Quantization
    from edgebuild.targets import numbers

    manifest = ctx.checked.manifest
    weights, rows, method = _integers(ctx)
    arrays.save(ctx.out / "weights.npz", **weights)
    records = weights
    if manifest.model.format.value == "tflite":  # the format's other integers, beside
        records = arrays.load(ctx.checked.base / str(manifest.model.weights))
        arrays.save(ctx.out / quantized.FORMAT_FILE, **records)
    uncalibrated = Quantization(numbers.rounding_mode(manifest), tuple(rows), method,
                                manifest.target.device.value, {})
    model = quantized.assemble(manifest, uncalibrated, records)
    calibration = calibration_inputs(ctx)
    saturated = saturation(model, calibration[:manifest.quantize.calibration])
    quant = dataclasses.replace(uncalibrated, saturation=saturated, layers=tuple(
        dataclasses.replace(row, saturated_pct=saturated.get(row.name)) for row in rows))
    (ctx.out / "quant.json").write_text(json.dumps(quant.to_json(), indent=1, sort_keys=True)
                                        + "\n")
    ctx.log(table(quant.layers))


def _integers(ctx: Context[Checked]) -> tuple[Integers, list[LayerQuant], str]:
    """(integer weights, table rows, method): imported as given, or quantized from the
    QAT (or folded float) checkpoint."""
    from edgebuild.core import arrays
    from edgebuild.model import folding, policy
    from edgebuild.targets import numbers

    manifest = ctx.checked.manifest
    layers, _ = folding.fold_layers(manifest.model.layers)
    device = numbers.device_numbers(manifest.target.device.value)
    if manifest.model.weights is not None and manifest.model.format.value == "tflite":
        weights, rows = tflite_layers(layers, arrays.load(ctx.checked.base / manifest.model.weights))
        return weights, rows, "imported-tflite"
    if manifest.model.weights is not None:
        weights, rows = imported_layers(layers, arrays.load(ctx.checked.base / manifest.model.weights),
                                        device)
        return weights, rows, "imported"
    policies = policy.resolve(manifest.qat, layers, device)
    state = arrays.load(ctx.inputs["qat"] / "folded.npz")
    weights, rows = quantize_layers(layers, state, policies, manifest)
    return weights, rows, "qat" if manifest.qat.enabled else f"ptq-{manifest.quantize.clip.value}"


def calibration_inputs(ctx: Context[Checked]) -> NDArray[np.integer[Any]]:
    """Training inputs, or for a model without a dataset its known-answer inputs."""
    from edgebuild.core import arrays
    from edgebuild.model import knownanswer

    if "data" in ctx.inputs:
        return arrays.load(ctx.inputs["data"] / "data.npz")["x_train"]
    known = knownanswer.load(ctx.checked)
    assert known is not None  # validation requires a known answer of a model without a dataset
    return knownanswer.clips(ctx.checked, known[0])


SATURATION_WARNING_PCT = 25.0  # above it a layer's outputs lose more than their tail


def saturated(rows: Sequence[LayerQuant]) -> list[LayerQuant]:
    """The layers whose int8 outputs sit at the rails more than SATURATION_WARNING_PCT % of
    the time: an activation range the bit width cannot hold. The evaluate stage names them
    when int8 accuracy drops (stages.evaluate.accuracy_drop); the table shows every sat%."""
    return [r for r in rows if not r.wide and (r.saturated_pct or 0) > SATURATION_WARNING_PCT]


def table(rows: Sequence[LayerQuant]) -> str:
    """The quantization table (model.quantization.LayerQuant rows) for people, on stderr."""
    lines = [f"{'layer':<12} {'bits':>4} {'shift':>5} {'weights':>11} {'clipped%':>8} {'sat%':>6}"]
    for r in rows:
        sat = "wide" if r.wide else f"{r.saturated_pct or 0:.2f}"
        lines.append(f"{r.name:<12} {r.bits:>4} {r.shift:>5} "
                     f"{r.weight_min:>5}..{r.weight_max:<4} {r.weights_clipped_pct:>8.2f} "
                     f"{sat:>6}")
    return "\n".join(lines)


STAGE = Stage("quantize", ("qat", "data"), config, run,
              "integer weights, biases and shifts; saturation statistics",
              tools=("numpy",), files=files, artifacts={"quant.json": "quant.v1"},
              facets=("reference", "stream", "weights"))
