"""Stage `evaluate`: the integer reference on the whole test set, checked against PyTorch.

Two independent computations of the deployed arithmetic: the numpy integer reference
(int64) and the PyTorch fake-quant network with the quantized scales pinned, run in
float64 (exact, see numerics). Their outputs must agree on every element of every test
sample; the count of samples that differ is `int_vs_fakequant_mismatches`.

A model imported with pre-quantized weights has no QAT checkpoint: the fake-quant network
then gets the real-valued weights the integers stand for (exact in float64). With a known
answer (`kat`), the reference is also compared with it element by element
(`kat_vs_reference_mismatches`); without a dataset that sample is the whole evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Sequence

    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.manifest import Manifest
    from edgebuild.model.evaluation import Evaluation
    from edgebuild.model.quantization import LayerQuant
    from edgebuild.model.quantized import QuantizedModel
    from edgebuild.ops.operator import LayerPolicy
    from edgebuild.pipeline.validation import Checked


class Figures(TypedDict, total=False):
    """The optional figures of model.evaluation.Evaluation that a build has."""

    int_accuracy: float  # with labels (a dataset)
    confusion: tuple[tuple[int, ...], ...]  # with labels
    kat_samples: int  # with a known answer
    kat_vs_reference_mismatches: int  # with a known answer's expected outputs


def config(checked: Checked) -> JSONObject:
    return {}  # everything that matters arrives through the upstream digests


def files(checked: Checked) -> list[Path]:
    from edgebuild.model import knownanswer

    return knownanswer.files(checked)


def policies(manifest: Manifest, model: QuantizedModel) -> dict[str, LayerPolicy]:
    """The fake-quant policy per layer with the bit widths the weights actually have."""
    import dataclasses

    from edgebuild.model import policy
    from edgebuild.targets import numbers

    resolved = policy.resolve(manifest.qat, model.layers, numbers.device_numbers(manifest.target.device.value))
    return {name: dataclasses.replace(p, weight_bits=model.params[name].bits)
            for name, p in resolved.items() if name in model.params}


def real_state(model: QuantizedModel) -> dict[str, NDArray[np.float64]]:
    """The real weights and biases the integers stand for (see numerics)."""
    import numpy as np

    from edgebuild.core import numerics

    state: dict[str, NDArray[np.float64]] = {}
    for name, q in model.params.items():
        shift = numerics.output_shift(q.scale_exp, q.bits)
        state[f"{name}.weight"] = q.weight.astype(np.float64) * 2.0 ** shift
        if q.bias is not None:
            state[f"{name}.bias"] = q.bias.astype(np.float64) * 2.0 ** (-7 + shift)
    return state


def fakequant_outputs(manifest: Manifest, model: QuantizedModel, state: dict[str, NDArray[Any]],
                      x: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
    """The torch fake-quant network in integer mode -> integer outputs (int64)."""
    import numpy as np
    import torch

    from edgebuild.ops.operator import Mode
    from edgebuild.train import network

    mode = Mode("qat", model.rounding, policy=policies(manifest, model),
                scale_exps={name: q.scale_exp for name, q in model.params.items()})
    net = network.Net(model.input_shape, model.layers, mode).double()
    network.load_numpy(net, state)
    net.eval()
    with torch.no_grad():
        out = net(torch.as_tensor(x.astype(np.float64) / 128.0)).numpy()
    shift = model.output_shift()
    if getattr(model.output, "wide", False):
        assert shift is not None  # a wide output is a compute layer's: it has a shift
        scale = 2.0 ** (7 - shift)
    else:
        scale = 128.0
    scaled = out * scale
    integers = np.rint(scaled)
    if not np.array_equal(integers, scaled):
        raise AssertionError("fake-quant outputs are off the integer grid (float64 exactness lost)")
    return integers.astype(np.int64)


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.model import knownanswer, quantized
    from edgebuild.model.evaluation import Evaluation

    manifest = ctx.checked.manifest
    model = quantized.load(ctx.inputs["quantize"], manifest)
    known = knownanswer.load(ctx.checked)
    y: NDArray[np.integer[Any]] | None
    if "data" in ctx.inputs:
        data = arrays.load(ctx.inputs["data"] / "data.npz")
        x, y = data["x_test"], data["y_test"]
    else:
        assert known is not None  # validation requires a known answer of a model without a dataset
        x, y = knownanswer.clips(ctx.checked, known[0]), None
    reference = quantized.run_batched(model, x).reshape(len(x), -1)
    mismatched = _fakequant_mismatches(ctx, model, x, reference)
    found: Figures = {}
    if y is not None:
        found.update(accuracy(reference, y))
    extra: dict[str, NDArray[np.int64]] = {}
    if known is not None:
        extra["kat_outputs"] = quantized.run_known(model, known[0]).reshape(len(known[0]), -1)
        found.update(known_answer(extra["kat_outputs"], known[1]))
    result = Evaluation(int(len(x)), None if mismatched is None else int(mismatched.sum()),
                        () if mismatched is None else
                        tuple(np.flatnonzero(mismatched)[:10].tolist()), **found)
    arrays.save(ctx.out / "reference_outputs.npz", outputs=reference, **extra)
    (ctx.out / "evaluation.json").write_text(json.dumps(result.to_json(), indent=1,
                                                        sort_keys=True) + "\n")
    _warn(ctx, manifest, result)


def _fakequant_mismatches(ctx: Context[Checked], model: QuantizedModel,
                          x: NDArray[np.integer[Any]], reference: NDArray[np.int64]
                          ) -> NDArray[np.bool_] | None:
    """Per sample, whether the torch fake-quant network's outputs differ from the
    reference's; None in a number format without one (TFLite's: its known answer, LiteRT's
    outputs, is the independent computation the reference is checked against)."""
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.formats.numbers import OWN

    if model.numbers != OWN:
        return None
    state = arrays.load(ctx.inputs["qat"] / "folded.npz") if "qat" in ctx.inputs else \
        real_state(model)
    fake = fakequant_outputs(ctx.checked.manifest, model, state, x)
    return np.any(reference != fake.reshape(len(x), -1), axis=1)


def accuracy(reference: NDArray[np.int64], y: NDArray[np.integer[Any]]) -> Figures:
    """`int_accuracy` and `confusion` of model.evaluation.Evaluation."""
    import numpy as np

    predictions = reference.argmax(axis=1)
    classes = reference.shape[1]
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (y, predictions), 1)
    return {"int_accuracy": float(np.mean(predictions == y)),
            "confusion": tuple(tuple(row) for row in matrix.tolist())}


def known_answer(outputs: NDArray[np.int64], expected: NDArray[np.integer[Any]] | None
                 ) -> Figures:
    """The reference's outputs on the known-answer inputs (N, outputs) against the supplied
    expected outputs: `kat_samples` and `kat_vs_reference_mismatches` of
    model.evaluation.Evaluation."""
    import numpy as np

    result: Figures = {"kat_samples": int(len(outputs))}
    if expected is not None:
        result["kat_vs_reference_mismatches"] = int(np.sum(outputs != expected))
    return result


def _warn(ctx: Context[Checked], manifest: Manifest, result: Evaluation) -> None:
    if result.int_accuracy is not None:
        ctx.log(f"evaluate: integer accuracy {result.int_accuracy:.4f} on {result.samples} "
                f"test samples; {result.int_vs_fakequant_mismatches} differ from fake-quant")
    elif result.int_vs_fakequant_mismatches is None:
        ctx.log(f"evaluate: {result.samples} known-answer sample(s) through the "
                f"{manifest.model.format.value} integer reference")
    else:
        ctx.log(f"evaluate: {result.samples} known-answer sample(s); "
                f"{result.int_vs_fakequant_mismatches} differ from fake-quant")
    if result.kat_vs_reference_mismatches is not None:
        ctx.log(f"evaluate: {result.kat_vs_reference_mismatches} output value(s) of the "
                "integer reference differ from the supplied known answer")
    if "train" not in ctx.inputs:
        return  # imported integer weights: the known answer is the check
    from edgebuild.train.metrics import Metrics

    trained = Metrics.load(ctx.inputs["train"]).test_accuracy
    assert trained is not None  # float training measures the kept weights on the test set
    assert result.int_accuracy is not None  # a trained model has a dataset (validation)
    if not manifest.qat.enabled:
        ctx.warn(f"post-training quantization ({manifest.quantize.clip.value} clipping) cost "
                 f"{100.0 * (trained - result.int_accuracy):.2f} accuracy points (float "
                 f"{trained:.4f} -> int {result.int_accuracy:.4f}); enable qat to recover them")
        return
    message = accuracy_drop(trained, result.int_accuracy, _quant_rows(ctx))
    if message is not None:
        ctx.warn(message)


def accuracy_drop(trained: float, int8: float, rows: Sequence[LayerQuant]) -> str | None:
    """What to say when int8 lost more than the headline tolerates (its `warn` verdict),
    naming the layers that sit at the int8 rails as the likely cause. Saturation alone is
    no warning: a layer may learn to use the rails (the float network clamps too), and the
    shipped examples lose nothing with a third of some layer's outputs there."""
    from edgebuild.pipeline.stages.quantize import saturated
    from edgebuild.report.headline import ACCURACY_DROP_WARN

    drop = 100.0 * (trained - int8)
    if drop <= ACCURACY_DROP_WARN:
        return None
    message = (f"int8 accuracy {int8:.4f} is {drop:.2f} points below float {trained:.4f} "
               f"(more than {ACCURACY_DROP_WARN:g})")
    layers = saturated(rows)
    if not layers:
        return message + "; more QAT epochs (qat.epochs) or wider weights " \
            "(qat.weight_bits) usually recover it"
    named = ", ".join(f"{r.name} ({r.bits}-bit weights, {r.saturated_pct:.1f}%)" for r in layers)
    return (f"{message}; these layers' int8 outputs sit at the rails (-128/127) on the "
            f"calibration data: {named}. More QAT epochs (qat.epochs), "
            "train.clamp_activations: true, or wider weights "
            f"(qat.overrides.{layers[0].name}.weight_bits) usually lower it")


def _quant_rows(ctx: Context[Checked]) -> tuple[LayerQuant, ...]:
    from edgebuild.model.quantization import Quantization

    return Quantization.load(ctx.inputs["quantize"]).layers


STAGE = Stage("evaluate", ("quantize", "qat", "train", "data"), config, run,
              "integer reference on the test set, checked against PyTorch fake-quant",
              tools=("numpy", "torch"), files=files,
              artifacts={"evaluation.json": "evaluation.v1"},
              facets=("reference", "stream", "torch"))
