"""Stage `evaluate`: the integer reference on the whole test set, checked against PyTorch.

Two independent computations of the deployed arithmetic: the numpy integer reference
(int64) and the PyTorch fake-quant network with the quantized scales pinned, run in
float64 (exact, see numerics). Their outputs must agree on every element of every test
sample; the count of samples that differ is `int_vs_fakequant_mismatches`.
"""

from __future__ import annotations

import json

from edgebuild.stages.base import Context, Stage


def config(checked) -> dict:
    return {}  # everything that matters arrives through the upstream digests


def fakequant_outputs(manifest, model, state: dict, x):
    """The torch fake-quant network in integer mode -> integer outputs (int64)."""
    import numpy as np
    import torch

    from edgebuild import network, policy
    from edgebuild.ops.base import Mode

    mode = Mode("qat", model.rounding, policy=policy.resolve(manifest.qat, model.layers),
                scale_exps={name: q.scale_exp for name, q in model.params.items()})
    net = network.Net(model.input_shape, model.layers, mode).double()
    network.load_numpy(net, state)
    net.eval()
    with torch.no_grad():
        out = net(torch.as_tensor(x.astype(np.float64) / 128.0)).numpy()
    shift = model.output_shift()
    scale = 2.0 ** (7 - shift) if getattr(model.output, "wide", False) else 128.0
    scaled = out * scale
    integers = np.rint(scaled)
    if not np.array_equal(integers, scaled):
        raise AssertionError("fake-quant outputs are off the integer grid (float64 exactness lost)")
    return integers.astype(np.int64)


def run(ctx: Context) -> None:
    import numpy as np

    from edgebuild import arrays, quantized

    manifest = ctx.checked.manifest
    data = arrays.load(ctx.inputs["data"] / "data.npz")
    model = quantized.load(ctx.inputs["quantize"], manifest)
    x, y = data["x_test"], data["y_test"]
    reference = quantized.run_batched(model, x).reshape(len(x), -1)
    fake = fakequant_outputs(manifest, model, arrays.load(ctx.inputs["qat"] / "folded.npz"), x)
    mismatched = np.any(reference != fake.reshape(len(x), -1), axis=1)
    predictions = reference.argmax(axis=1)
    classes = reference.shape[1]
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (y, predictions), 1)
    result = {"int_accuracy": float(np.mean(predictions == y)), "samples": int(len(y)),
              "int_vs_fakequant_mismatches": int(mismatched.sum()),
              "first_mismatches": np.flatnonzero(mismatched)[:10].tolist(),
              "confusion": matrix.tolist()}
    arrays.save(ctx.out / "reference_outputs.npz", outputs=reference)
    (ctx.out / "evaluation.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    _warn(ctx, manifest, result)


def _warn(ctx: Context, manifest, result: dict) -> None:
    ctx.log(f"evaluate: integer accuracy {result['int_accuracy']:.4f} on {result['samples']} "
            f"test samples; {result['int_vs_fakequant_mismatches']} differ from fake-quant")
    if manifest.qat.enabled:
        return
    metrics = json.loads((ctx.inputs["train"] / "metrics.json").read_text())
    cost = 100.0 * (metrics["test_accuracy"] - result["int_accuracy"])
    ctx.log(f"warning: post-training quantization ({manifest.quantize.clip.value} clipping) cost "
            f"{cost:.2f} accuracy points (float {metrics['test_accuracy']:.4f} -> int "
            f"{result['int_accuracy']:.4f}); enable qat to recover them")


STAGE = Stage("evaluate", 1, ("quantize", "qat", "train", "data"), config, run,
              "integer reference on the test set, checked against PyTorch fake-quant",
              tools=("numpy", "torch"))
