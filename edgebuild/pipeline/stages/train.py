"""Stage `train`: float training of the manifest's model, hardware-aware.

Activations are clamped to the Q7 range [-1, 127/128] (the hardware saturates there), the
inputs are exactly the int8 data / 128, and the best epoch by validation accuracy is kept,
as float.npz (the `onnx` stage exports it as float.onnx). With `train.init` training starts
from those float weights (e.g. an imported ONNX model's); with `epochs: 0` they are kept
as they are, measured on the test split (no curves: nothing was trained).
A NaN loss stops training with a user error naming the epoch; the last good checkpoint is
saved to `build/<name>/train.failed/` (outside the cache: never taken for a result).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage
from edgebuild.core.errors import UserError

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads torch
    import torch

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.pipeline.validation import Checked
    from edgebuild.train.loop import Diverged, History, Split
    from edgebuild.train.metrics import Metrics


def config(checked: Checked) -> JSONObject:
    """`train.init` by content (`files`), not by its path: moving the file changes nothing."""
    manifest = checked.manifest
    model = manifest.model.model_dump(mode="json", exclude={"layers": {"__all__": {"doc"}}})
    return {"model": model, "train": manifest.train.model_dump(mode="json", exclude={"init"}),
            "init": manifest.train.init is not None, "seed": manifest.seed}


def files(checked: Checked) -> list[Path]:
    """The float weights training starts from key the stage by content."""
    init = checked.manifest.train.init
    return [] if init is None else [checked.base / init]


def run(ctx: Context[Checked]) -> None:
    from edgebuild.core import arrays
    from edgebuild.ops.operator import Mode
    from edgebuild.train import loop as training
    from edgebuild.train import network

    manifest = ctx.checked.manifest
    training.deterministic(manifest.seed)
    data = training.splits(arrays.load(ctx.inputs["data"] / "data.npz"))
    net = network.Net(manifest.model.input, manifest.model.layers,
                      Mode("float", clamp=manifest.train.clamp_activations))
    if manifest.train.init is not None:
        start_from(ctx, net, ctx.checked.base / manifest.train.init)
        if manifest.train.epochs == 0:
            keep(ctx, net, data)
            return
    epochs = epochs_of(ctx, manifest.train.epochs, len(data["train"].y), manifest.train.batch,
                       training.TRAIN_STEPS, training.TRAIN_EPOCHS, "train")
    opt = training.make_optimizer(net.parameters(), manifest.train.optimizer)
    schedule = training.make_schedule(opt, manifest.train.schedule, epochs)
    history, test_acc = fit_and_keep_best(
        ctx, net, data, lambda: training.fit(
            net, data, epochs=epochs, batch=manifest.train.batch, opt=opt,
            schedule=schedule, seed=manifest.seed, label="train", log=ctx.log,
            patience=manifest.train.patience),
        "train", "float.npz", "float training")
    ctx.log(f"train: best epoch {history.best_epoch}, test accuracy {test_acc:.4f}")
    warn_near_chance(ctx, test_acc, data["test"].y)


def epochs_of(ctx: Context[Checked], given: int | None, samples: int, batch: int, steps: int,
              bounds: tuple[int, int], stage: str) -> int:
    """The manifest's epochs, or when unset as many as give about `steps` optimizer steps
    (training.auto_epochs), said in the log."""
    from edgebuild.train import loop as training

    if given is not None:
        return given
    epochs = training.auto_epochs(samples, batch, steps, bounds)
    ctx.log(f"{stage}: epochs unset: {epochs} (about {steps} steps of batch {batch} over "
            f"{samples} samples)")
    return epochs


def start_from(ctx: Context[Checked], net: torch.nn.Module, path: Path) -> None:
    """Load `train.init` (checked against the layers by `check`; what it cannot see without
    torch, such as a batchnorm's statistics, is a user error here)."""
    from edgebuild.core import arrays
    from edgebuild.train import network

    try:
        network.load_numpy(net, arrays.load(path))
    except (ValueError, RuntimeError) as exc:
        raise UserError(f"{ctx.checked.document.path}: train.init: {path} does not fit the "
                        f"model: {exc}") from None


def keep(ctx: Context[Checked], net: torch.nn.Module, data: dict[str, Split]) -> None:
    """`epochs: 0`: the initial weights are the float model: measured and written."""
    from edgebuild.core import arrays
    from edgebuild.train import loop as training
    from edgebuild.train import network
    from edgebuild.train.metrics import Metrics

    test_acc, test_loss = training.evaluate(net, data["test"])
    ctx.log(f"train: epochs 0, the weights of train.init kept; test accuracy {test_acc:.4f}")
    warn_near_chance(ctx, test_acc, data["test"].y)
    arrays.save(ctx.out / "float.npz", **network.state_numpy(net))
    write_metrics(ctx.out, Metrics.of(training.History(), test_acc, test_loss))


NEAR_CHANCE_POINTS = 5.0  # above the majority class's share: anything less learned nothing


def warn_near_chance(ctx: Context[Checked], accuracy: float, labels: torch.Tensor) -> None:
    """A float model that does no better than always answering the commonest class: for
    imported weights, almost always inputs that do not follow the model's input contract
    (an ONNX model trained on [0, 1] saw 2x-1 after the default minmax: 10.6 % where
    PyTorch had 67.6 %)."""
    import torch

    if len(labels) == 0:
        return
    majority = float(torch.bincount(labels).max()) / len(labels)
    if 100.0 * (accuracy - majority) > NEAR_CHANCE_POINTS:
        return
    imported = ctx.checked.manifest.train.init is not None
    why = ("the weights were trained on inputs scaled otherwise than dataset.normalize "
           "scales these (set it to what the model was trained with: method none, or scale "
           "and offset), or the class order differs") if imported else \
        "training learned nothing (more epochs, another learning rate, normalized inputs)"
    ctx.warn(f"the float model scores {accuracy:.4f} on the test split, within "
             f"{NEAR_CHANCE_POINTS:g} points of always answering the commonest class "
             f"({majority:.4f}): {why}")


def fit_and_keep_best(ctx: Context[Checked], net: torch.nn.Module, data: dict[str, Split],
                      fit: Callable[[], History], stage: str, checkpoint: str, title: str,
                      enabled: bool | None = None) -> tuple[History, float]:
    """What `train` and `qat` share: fit (a NaN loss is a user error), keep the best epoch's
    weights, measure them on the test split, and write the stage's checkpoint,
    metrics.json and curves. Returns the history and the test accuracy."""
    from edgebuild.core import arrays
    from edgebuild.train import loop as training
    from edgebuild.train import network, plots, recalibration
    from edgebuild.train.metrics import Metrics

    try:
        history = fit()
    except training.Diverged as exc:
        raise diverged(ctx, exc, stage) from None
    assert history.best_state is not None  # fit keeps the best of epochs >= 1 (validation)
    net.load_state_dict(history.best_state)
    if recalibration.recalibrate(net, data["train"].x):  # the statistics folding will use
        ctx.log(f"{stage}: batchnorm statistics measured on the {len(data['train'].y)} "
                "training samples")
    test_acc, test_loss = training.evaluate(net, data["test"])
    arrays.save(ctx.out / checkpoint, **network.state_numpy(net))
    write_metrics(ctx.out, Metrics.of(history, test_acc, test_loss, enabled=enabled))
    plots.curves(history.epochs, ctx.out / "curves.png", title)
    return history, test_acc


def write_metrics(out: Path, metrics: Metrics) -> None:
    """metrics.json of `train` and `qat` (a train.metrics.Metrics)."""
    (out / "metrics.json").write_text(json.dumps(metrics.to_json(), indent=1, sort_keys=True)
                                      + "\n")


def diverged(ctx: Context[Checked], exc: Diverged, stage: str) -> UserError:
    """Save the last good weights beside the build tree and explain what to change."""
    from edgebuild.core import arrays

    where = ctx.build_dir / f"{stage}.failed"
    where.mkdir(parents=True, exist_ok=True)
    if exc.history.best_state is not None:
        arrays.save(where / "last_good.npz",
                    **{k: v.numpy() for k, v in exc.history.best_state.items()})
    (where / "metrics.json").write_text(json.dumps(exc.history.epochs, indent=1) + "\n")
    kept = f"; last good weights (epoch {exc.history.best_epoch}) saved in {where}" \
        if exc.history.best_state is not None else ""
    return UserError(f"{ctx.checked.document.path}: {stage}: loss became NaN or infinite in "
                     f"epoch {exc.epoch} (lower the learning rate?){kept}")


STAGE = Stage("train", ("data",), config, run,
              "float training (hardware-aware clamping), best checkpoint, curves",
              applies=lambda checked: checked.manifest.model.weights is None, files=files,
              tools=("torch", "numpy"), artifacts={"metrics.json": "metrics.v1"},
              facets=("torch", "stream"))
