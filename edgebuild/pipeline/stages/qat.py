"""Stage `qat`: batchnorm folding, then quantization-aware training from the float checkpoint.

A separate stage so that editing the QAT policy never reruns float training. Fake
quantization follows numerics exactly; it always trains with round-half-up, so changing
`quantize.rounding` does not invalidate QAT (the integer evaluation measures the mode
actually deployed). The kept weights are written as folded.npz (the `onnx` stage exports
the fake-quant network as qat.onnx). With `qat.enabled: false` this stage only folds batchnorm and the
`quantize` stage does post-training quantization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage
from edgebuild.pipeline.stages.train import epochs_of, fit_and_keep_best, write_metrics

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads pydantic
    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.pipeline.validation import Checked


def config(checked: Checked) -> JSONObject:
    from edgebuild.targets import numbers

    manifest = checked.manifest
    return {"qat": manifest.qat.model_dump(mode="json"), "seed": manifest.seed,
            "optimizer": manifest.train.optimizer.model_dump(mode="json"),
            "numbers": numbers.numbers_config(manifest)}


def run(ctx: Context[Checked]) -> None:
    import torch

    from edgebuild.core import arrays
    from edgebuild.model import folding, policy
    from edgebuild.ops.operator import Mode
    from edgebuild.targets import numbers
    from edgebuild.train import loop as training
    from edgebuild.train import network
    from edgebuild.train.metrics import Metrics

    manifest = ctx.checked.manifest
    training.deterministic(manifest.seed)
    layers, _ = folding.fold_layers(manifest.model.layers)
    state = folding.fold_state(arrays.load(ctx.inputs["train"] / "float.npz"),
                               manifest.model.layers)
    qat = manifest.qat
    if not qat.enabled:
        arrays.save(ctx.out / "folded.npz", **state)
        write_metrics(ctx.out, Metrics.of(training.History(), None, enabled=False))
        ctx.log("qat: qat.enabled is false: batchnorm folded, nothing fake-quantized "
                "(quantize does post-training quantization)")
        return
    policies = policy.resolve(qat, layers, numbers.device_numbers(manifest.target.device.value))
    net = network.Net(manifest.model.input, layers,
                      Mode("qat", numbers.training_rounding(manifest), policy=policies))
    network.load_numpy(net, state)
    data = training.splits(arrays.load(ctx.inputs["data"] / "data.npz"))
    batch = qat.batch or manifest.train.batch
    epochs = epochs_of(ctx, qat.epochs, len(data["train"].y), batch, training.QAT_STEPS,
                       training.QAT_EPOCHS, "qat")
    opt = training.make_optimizer(net.parameters(), manifest.train.optimizer, lr=qat.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    history, test_acc = fit_and_keep_best(ctx, net, data, lambda: training.fit(
        net, data, epochs=epochs, batch=batch, opt=opt,
        schedule=schedule, seed=manifest.seed + 1, label="qat", log=ctx.log),
        "qat", "folded.npz", "QAT", enabled=True)
    ctx.log(f"qat: best epoch {history.best_epoch}, fake-quant test accuracy {test_acc:.4f}")


STAGE = Stage("qat", ("train", "data"), config, run,
              "fold batchnorm; quantization-aware training (or pass-through for PTQ)",
              applies=lambda checked: checked.manifest.model.weights is None,
              tools=("torch", "numpy"), artifacts={"metrics.json": "metrics.v1"},
              facets=("torch", "stream", "weights"))
