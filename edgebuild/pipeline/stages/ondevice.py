"""Stage `ondevice`: the host half of on-device training (as in onert-micro's two-stage
proposal) — the backward graph of the trainable part, its memory, the weight-only file
with the starting trainable weights, the PyTorch trace the device must reproduce (on
batches that give every step a loss and every trainable tensor a gradient), the
before/after accuracy under field drift (fine-tuning that diverges fails the stage), and
the generated C training code.

Artifacts: backward.json (forward/backward steps, zeroing, tiles), memory.json (this
choice and every "last N" choice), weights.wof + layout.json, trace.json + trace.npz
(losses, every step's gradients and updated weights), finetune.json, train/ (C sources).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.build.stage import Context, Stage
from edgebuild.core.errors import StageFailed

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or torch
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.manifest.ondevice import Ondevice
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model.quantized import QuantizedModel
    from edgebuild.ondevice.backward import TrainGraph
    from edgebuild.ondevice.finetune import Floats
    from edgebuild.ondevice.trainable import Resolved
    from edgebuild.pipeline.validation import Checked

    Labeled = tuple[NDArray[np.int8], NDArray[np.integer[Any]]]  # (inputs, labels) of a split


def config(checked: Checked) -> JSONObject:
    manifest = checked.manifest
    spec = manifest.ondevice
    assert spec is not None  # the stage applies only to a manifest with `ondevice`
    return {"ondevice": spec.model_dump(mode="json"), "seed": manifest.seed,
            "memory": manifest.target.memory.model_dump(mode="json"), "name": manifest.name}


def files(checked: Checked) -> list[Path]:
    """The shipped templates (they become the training code) and the starting .wof."""
    from edgebuild.core.resources import template_files

    spec = checked.manifest.ondevice
    starting = [] if spec is None or spec.weights is None else [checked.base / spec.weights]
    return template_files() + starting


def applies(checked: Checked) -> bool:
    return checked.manifest.ondevice is not None


def _data(ctx: Context[Checked], spec: Ondevice) -> dict[str, Labeled]:
    from edgebuild.core import arrays
    from edgebuild.ondevice import drift

    data = arrays.load(ctx.inputs["data"] / "data.npz")
    seed = ctx.checked.manifest.seed
    return {part: (drift.apply(data[f"x_{part}"], spec.drift, seed), data[f"y_{part}"])
            for part in ("train", "test")}


def _starting_weights(ctx: Context[Checked], graph: TrainGraph, params: Floats) -> Floats:
    """Dequantized weights, replaced by the manifest's .wof file when one is given."""
    from edgebuild.ondevice import wof

    spec = ctx.checked.manifest.ondevice
    assert spec is not None  # the stage applies only to a manifest with `ondevice`
    if spec.weights is None:
        return params
    layout = graph.parameters()
    loaded = wof.read(ctx.checked.base / spec.weights, layout)
    return {**params, **{name: value for (name, _), value in zip(layout, loaded, strict=True)
                         if value is not None}}


def run(ctx: Context[Checked]) -> None:
    import dataclasses

    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model import quantized
    from edgebuild.ondevice import finetune
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.train import loop as training

    manifest = ctx.checked.manifest
    # the PyTorch trace is the reference the C must match and goes into the lock: one
    # thread and deterministic kernels, whatever ran before in this process
    training.deterministic(manifest.seed)
    spec = manifest.ondevice
    assert spec is not None  # the stage applies only to a manifest with `ondevice`
    model = quantized.load(ctx.inputs["quantize"], manifest)
    resolved = ondevice.resolve(spec, model.layers, tuple(manifest.model.input),
                                manifest.target.memory.l1)
    graph = resolved.graph
    params = _starting_weights(ctx, graph, ondevice.initial_parameters(model, graph))
    layout_id = _write_layout(ctx, graph, params)

    data = _data(ctx, spec)
    boundary = {part: finetune.boundary_values(model, graph, x) for part, (x, _) in data.items()}
    x_train, y_train = data["train"]
    try:
        spec, tried = finetune.with_learning_rate(spec, graph, params,
                                                  (boundary["train"], y_train), manifest.seed)
        batches = _write_trace(ctx, spec, graph, params, boundary["train"], y_train)
        tuned = finetune.fine_tune(spec, graph, params, (boundary["train"], y_train),
                                   (boundary["test"], data["test"][1]), manifest.seed)
    except (finetune.VerificationError, finetune.Diverged) as exc:
        raise StageFailed(str(exc)) from None
    lr = finetune.learning_rate(spec)
    if tried:
        ctx.log(f"ondevice: learning rate {lr:g} (auto: mean training loss after "
                f"{finetune.TRIAL_STEPS} steps at most, per rate: "
                + ", ".join(f"{rate} {'diverged' if loss is None else f'{loss:.4g}'}"
                            for rate, loss in tried.items()) + ")")
    tuned = dataclasses.replace(tuned, frozen_int8_accuracy=_int8_accuracy(model, *data["test"]),
                                learning_rate=lr, learning_rates_tried=tried or None)
    if tuned.accuracy_after < tuned.accuracy_before:
        ctx.warn(f"on-device fine-tuning lowered the held-out accuracy "
                 f"{tuned.accuracy_before} -> {tuned.accuracy_after} (loss {tuned.start_loss} "
                 f"-> {tuned.end_loss}); try a smaller ondevice.optimizer lr or fewer "
                 f"trainable layers")
    (ctx.out / "finetune.json").write_text(json.dumps(tuned.to_json(), indent=1, sort_keys=True)
                                           + "\n")
    plan = MemoryPlan.load(ctx.inputs["plan"])
    _memory(ctx, resolved, plan)
    _render(ctx, spec, resolved, plan, params, layout_id, x_train, y_train, batches)
    ctx.log(f"ondevice: training {', '.join(resolved.names)}; {resolved.memory['ram']} bytes "
            f"of RAM; accuracy under drift {tuned.accuracy_before} -> "
            f"{tuned.accuracy_after}")


def _write_layout(ctx: Context[Checked], graph: TrainGraph, params: Floats) -> int:
    """weights.wof with the starting trainable weights, its layout.json and the steps of
    one training step (backward.json); the layout id."""
    from edgebuild.ondevice import wof

    layout = wof.FileLayout.of(graph.parameters())
    wof.write(ctx.out / "weights.wof", [params[name] for name, _ in layout.tensors],
              layout.layout_id)
    (ctx.out / "layout.json").write_text(json.dumps(layout.to_json(), indent=1) + "\n")
    (ctx.out / "backward.json").write_text(json.dumps(graph.schedule().to_json(), indent=1)
                                           + "\n")
    return layout.layout_id


def _write_trace(ctx: Context[Checked], spec: Ondevice, graph: TrainGraph, params: Floats,
                 boundary: Floats, labels: NDArray[np.integer[Any]]) -> list[NDArray[np.int64]]:
    """The PyTorch reference the C must reproduce: trace.npz (every step's gradients and
    updated weights, `grad:<step>:<tensor>`, `weight:<step>:<tensor>`) and trace.json
    (losses, batches); the batches."""
    import numpy as np

    from edgebuild.ondevice import finetune

    batches, trace = finetune.verification_steps(spec, graph, params, boundary, labels,
                                                 ctx.checked.manifest.seed)
    saved = {f"{kind}:{step}:{name}": value
             for kind, per_step in (("grad", trace.gradients), ("weight", trace.weights))
             for step, tensors in enumerate(per_step) for name, value in tensors.items()}
    # numpy's stub also matches `**saved` against savez's `allow_pickle: bool`
    np.savez(ctx.out / "trace.npz", **saved)  # type: ignore[arg-type]
    steps = finetune.LossTrace(tuple(trace.losses), tuple(tuple(b.tolist()) for b in batches))
    (ctx.out / "trace.json").write_text(json.dumps(steps.to_json(), indent=1) + "\n")
    return batches


def _int8_accuracy(model: QuantizedModel, x: NDArray[np.integer[Any]],
                   y: NDArray[np.integer[Any]]) -> float:
    from edgebuild.model import quantized

    outputs = quantized.run_batched(model, x)
    return round(float((outputs.reshape(len(y), -1).argmax(axis=1) == y).mean()), 4)


def _memory(ctx: Context[Checked], resolved: Resolved, plan: MemoryPlan) -> None:
    from edgebuild.ondevice import lifetime
    from edgebuild.ondevice.memory import TrainingMemory

    manifest = ctx.checked.manifest
    assert manifest.ondevice is not None  # the stage applies only to a manifest with `ondevice`
    budgets = manifest.target.memory
    lower = lifetime.lower_bound(resolved.graph, resolved.buffers, plan.arena_bytes,
                                 manifest.ondevice.loss.value == "mse")
    memory = TrainingMemory.of(resolved.memory, plan.arena_bytes, resolved.names,
                               resolved.choices, budgets.l1, budgets.l2, lower)
    l2 = budgets.l2
    if memory.l2_bytes > l2:
        raise StageFailed(
            f"ondevice: training needs {memory.l2_bytes - plan.arena_bytes} bytes of L2 RAM "
            f"on top of the {plan.arena_bytes}-byte inference arena, {memory.l2_bytes} in all, "
            f"but target.memory.l2 is {l2}; train fewer layers (sizes per choice: "
            + ", ".join(f"{c.layers[0]}..: {c.ram}" for c in resolved.choices) + ")")
    (ctx.out / "memory.json").write_text(json.dumps(memory.to_json(), indent=1) + "\n")


def _render(ctx: Context[Checked], spec: Ondevice, resolved: Resolved, plan: MemoryPlan,
            params: Floats, layout_id: int, x_train: NDArray[np.int8],
            y_train: NDArray[np.integer[Any]], batches: list[NDArray[np.int64]]) -> None:
    """The C training code of `spec` (its learning rate resolved) over the buffers the plan
    chose (`resolved.buffers`, as memory.json counts them)."""
    import math

    import numpy as np

    from edgebuild.ondevice import codegen as traincode

    manifest = ctx.checked.manifest
    offsets = {t.name: t.offset for t in plan.tensors}
    hyper = spec.optimizer.settings.model_dump(mode="json")
    train_spec = traincode.TrainSpec(
        name=manifest.name, graph=resolved.graph, buffers=resolved.buffers, params=params,
        optimizer=spec.optimizer.kind, hyper=hyper, loss=spec.loss.value, batch=spec.batch,
        inputs=np.stack([x_train[b].reshape(len(b), -1) for b in batches]),
        labels=np.stack([y_train[b] for b in batches]), offsets=offsets,
        layout_id=layout_id, input_size=math.prod(manifest.model.input))
    for relative, text in traincode.render(train_spec).items():
        path = ctx.out / "train" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


STAGE = Stage("ondevice", ("quantize", "data", "plan", "validate"), config, run,
              "on-device training: backward graph, memory, weight-only file, C training code, "
              "PyTorch trace", tools=("torch", "numpy", "jinja2"), files=files, applies=applies,
              artifacts={"layout.json": "layout.v1", "backward.json": "backward.v1",
                         "trace.json": "trace.v1", "finetune.json": "finetune.v1",
                         "memory.json": "memory.v1"},
              facets=("reference", "stream"))
