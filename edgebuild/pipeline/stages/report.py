"""Stage `report`: `report.json` (the contract tests and CI read) and `report.html`.

Both are also exported to `build/<name>/` itself. Every number is copied from an upstream
stage's record (read through its loader) into the report's record (pipeline/report.py),
which also judges the headline; nothing is recomputed or typed in here. report.html and
its figures are rendered from the report's JSON form, what report.json holds.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from edgebuild.pipeline.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Callable

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model.evaluation import Evaluation
    from edgebuild.model.graph import Graph
    from edgebuild.pipeline import report as reports
    from edgebuild.pipeline.katresult import KatResult
    from edgebuild.pipeline.validation import Checked
    from edgebuild.train.metrics import Metrics

T = TypeVar("T")  # an upstream stage's record


def config(checked: Checked) -> JSONObject:
    """The name, and what the headline judges by that no upstream output holds: the
    device and the flash budget (the l2 budget is in plan.json)."""
    target = checked.manifest.target
    return {"name": checked.manifest.name, "device": target.device.value,
            "flash": target.memory.flash}


def _optional(ctx: Context, stage: str, load: Callable[[Path], T],
              name: str | None = None) -> T | None:
    """An upstream record of a stage that may not exist for this manifest (imported models
    have no training stages, models without a dataset no data stage), or a file a stage
    writes only for some manifests (`name`): None then."""
    if stage not in ctx.inputs or (name and not (ctx.inputs[stage] / name).is_file()):
        return None
    return load(ctx.inputs[stage])


def accelerator(ctx: Context) -> reports.Accelerator | None:
    """Processors, kernel and data memory maps of an accelerator build (plan stage)."""
    from edgebuild.pipeline.report import Accelerator
    from edgebuild.targets.max7800x import profile
    from edgebuild.targets.max7800x.placement import Placement
    from edgebuild.targets.max7800x.placement.occupancy import occupancy

    placement = _optional(ctx, "plan", Placement.load, "placement.json")
    if placement is None:
        return None
    device = ctx.checked.manifest.target.device.value
    return Accelerator(device, placement, (ctx.inputs["plan"] / "maps.txt").read_text(),
                       occupancy(placement, profile.profile(device)))


def ondevice(ctx: Context) -> reports.OndeviceSummary | None:
    """On-device training: the C-vs-PyTorch comparison, memory, accuracy before/after."""
    from edgebuild.ondevice.finetune import FineTune
    from edgebuild.ondevice.memory import TrainingMemory
    from edgebuild.pipeline.report import OndeviceSummary, TrainingRam
    from edgebuild.pipeline.trainingkat import TrainingKat, TrainingRun

    result = _optional(ctx, "ondevice_kat", TrainingKat.load, "ondevice_kat.json")
    if result is None:
        return None
    memory = TrainingMemory.load(ctx.inputs["ondevice"])
    tuned = FineTune.load(ctx.inputs["ondevice"])
    m4 = result.cortex_m4
    return OndeviceSummary(
        result.steps, result.losses.loss_max_abs_diff, result.losses.loss_max_rel_diff,
        result.loss_c, result.loss_torch, result.memory_bytes, result.instructions_per_step,
        result.grad_max_abs_diff, result.grad_max_rel_diff, result.weight_max_abs_diff,
        result.losses.within_tolerance, result.losses.meets_target, memory.trainable,
        TrainingRam(memory.by_kind, memory.flash, memory.arena, memory.total_ram),
        memory.choices,
        m4.comparison.within_tolerance if isinstance(m4, TrainingRun) else None,
        tuned.accuracy_before, tuned.accuracy_after, tuned.frozen_int8_accuracy, tuned.epochs)


def metrics(ctx: Context, graph: Graph, train: Metrics | None, qat: Metrics | None,
            evaluation: Evaluation, plan: MemoryPlan, kat: KatResult) -> reports.ReportMetrics:
    from edgebuild.pipeline.report import HostTotals, MemoryFigures, ReportMetrics

    assert plan.memory is not None  # the plan stage writes the memory totals (tile_steps)
    return ReportMetrics(
        None if train is None else train.test_accuracy,
        None if qat is None else qat.test_accuracy, evaluation.int_accuracy, graph.params,
        graph.macs, evaluation.int_vs_fakequant_mismatches, evaluation.samples,
        HostTotals(kat.c_vs_reference.samples, kat.c_vs_reference.mismatches), kat.cortex_m4,
        MemoryFigures(plan.memory, plan.weight_bytes), kat.vectors, ondevice(ctx),
        evaluation.kat_samples, evaluation.kat_vs_reference_mismatches)


def collect(ctx: Context) -> reports.Report:
    from edgebuild.data.info import DataInfo
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model.evaluation import Evaluation
    from edgebuild.model.graph import Graph
    from edgebuild.model.quantization import Quantization
    from edgebuild.pipeline import report as reports
    from edgebuild.pipeline.katresult import KatResult
    from edgebuild.train.metrics import Metrics

    graph, quant = Graph.load(ctx.inputs["validate"]), Quantization.load(ctx.inputs["quantize"])
    train, qat = _optional(ctx, "train", Metrics.load), _optional(ctx, "qat", Metrics.load)
    evaluation = Evaluation.load(ctx.inputs["evaluate"])
    data = _optional(ctx, "data", DataInfo.load)
    plan = MemoryPlan.load(ctx.inputs["plan"])
    confusion: reports.Confusion | None = None
    counts: reports.DataCounts | None = None
    if data is not None:
        assert evaluation.confusion is not None  # evaluate labels a dataset's test set
        confusion = reports.Confusion(data.classes, evaluation.confusion)
        counts = reports.DataCounts(data.counts, len(data.classes))
    figures = metrics(ctx, graph, train, qat, evaluation, plan, KatResult.load(ctx.inputs["kat"]))
    placed = accelerator(ctx)
    target = ctx.checked.manifest.target
    return reports.Report(
        ctx.checked.manifest.name, figures, tile_rows(plan),
        reports.QuantSummary(quant.method, quant.rounding, quant.layers), graph.nodes,
        _phase(train), _phase(qat), confusion, counts, placed,
        headline=reports.headline_of(figures, target.device.value, target.memory.flash,
                                     None if placed is None else placed.occupancy))


def _phase(metrics: Metrics | None) -> reports.Phase:
    from edgebuild.pipeline.report import Phase

    return Phase() if metrics is None else Phase(metrics.best_epoch, metrics.epochs)


def tile_rows(plan: MemoryPlan) -> tuple[reports.TileRow, ...]:
    """Per layer (and per fused pool): tile shape, tiles, bytes moved, L1 in use."""
    from edgebuild.pipeline.report import TileRow

    return tuple(TileRow(step.layer + suffix, step.tiles[key]) for step in plan.steps
                 for key, suffix in (("pool_tile", " (pool)"), ("tile", ""))
                 if key in step.tiles)


def run(ctx: Context) -> None:
    from edgebuild.train import plots

    report = collect(ctx).to_json()
    (ctx.out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    images = {}
    if "train" in ctx.inputs:
        images["float training"] = ctx.inputs["train"] / "curves.png"
    if (ctx.inputs.get("qat", ctx.out) / "curves.png").is_file():
        images["QAT"] = ctx.inputs["qat"] / "curves.png"
    if report["confusion"]:
        plots.confusion(report["confusion"]["matrix"], report["confusion"]["labels"],
                        ctx.out / "confusion.png")
        images["confusion (integer model, test set)"] = ctx.out / "confusion.png"
    if report["tiles"]:
        plots.memory(report["tiles"], report["metrics"]["memory"]["l1_budget"],
                     ctx.out / "memory.png")
        images["memory per layer"] = ctx.out / "memory.png"
    if report["accelerator"]:
        plots.data_memory(report["accelerator"]["placement"], ctx.out / "data_memory.png")
        images[f"{report['accelerator']['device']} data memory"] = ctx.out / "data_memory.png"
    trained = report["metrics"]["ondevice"]
    if trained:
        plots.training_losses(trained["loss_c"], trained["loss_torch"], ctx.out / "ondevice.png")
        images["on-device training: C vs PyTorch"] = ctx.out / "ondevice.png"
    (ctx.out / "report.html").write_text(render_html(report, images))
    m = report["metrics"]
    accuracy = "n/a" if m["int_accuracy"] is None else f"{m['int_accuracy']:.4f}"
    ctx.log(f"report: float {m['float_accuracy']}  qat {m['qat_accuracy']}  int "
            f"{accuracy}  mismatches {m['int_vs_fakequant_mismatches']}")


def _image(path: Path) -> str:
    if not path.exists():
        return ""
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,' \
           f'{base64.b64encode(path.read_bytes()).decode()}">'


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in columns)
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _firmware_html(report: dict[str, Any]) -> str:
    """The Cortex-M4 firmware's instructions per inference, each count with its kernels
    (the optimized kernels of a cortex-m4 target, else the reference ones; see
    pipeline/katresult.py)."""
    m4 = report["metrics"]["cortex_m4"]
    if "skipped" in m4:
        return f"<h2>Cortex-M4 (QEMU)</h2><p>skipped: {html.escape(m4['skipped'])}</p>"
    kernels = m4.get("kernels")
    rows = [{"kernels": f"{kernels or 'not recorded'} (this firmware)",
             "instructions": _count(m4["instructions"]), "per MAC": m4["insn_per_mac"]}]
    if "reference_instructions" in m4 and kernels != "reference":
        rows.append({"kernels": "reference", "instructions": _count(m4["reference_instructions"]),
                     "per MAC": m4["reference_insn_per_mac"]})
    table = _table(rows, ["kernels", "instructions", "per MAC"])
    return (f"<h2>Cortex-M4 (QEMU): instructions of one inference</h2>{table}"
            f"<p>text {m4['text']:,} B (code {m4['code_bytes']:,} B), data {m4['data']:,} B, "
            f"bss {m4['bss']:,} B; known-answer test: {html.escape(m4['kat'])}</p>")


def _count(instructions: int | None) -> str:
    return "not counted" if instructions is None else f"{instructions:,}"


def _accelerator_html(report: dict[str, Any]) -> str:
    acc = report.get("accelerator")
    if not acc:
        return ""
    rows = [{"layer": layer["name"], "op": layer["op"],
             "processors": layer["processors"],
             "output_processors": layer["output_processors"],
             "in_offset": f"{layer['in_offset']:#06x}", "out_offset": f"{layer['out_offset']:#06x}",
             "in_passes": layer.get("in_passes"), "kernel": layer.get("kernel")}
            for layer in acc["placement"]["layers"]]
    table = _table(rows, ["layer", "op", "processors", "output_processors", "in_offset",
                          "out_offset", "in_passes", "kernel"])
    return (f"<h2>{html.escape(acc['device'])}: processors and memory maps</h2>{table}"
            f"<pre>{html.escape(acc['maps'])}</pre>")


def _ondevice_html(report: dict[str, Any]) -> str:
    trained = report["metrics"].get("ondevice")
    if not trained:
        return ""
    accuracy = _table([{"model": "frozen int8 model", "accuracy": trained["frozen_int8_accuracy"]},
                       {"model": "before on-device training", "accuracy": trained["accuracy_before"]},
                       {"model": f"after {trained['epochs']} epochs on the device",
                        "accuracy": trained["accuracy_after"]}], ["model", "accuracy"])
    choices = _table([{"trainable layers": ", ".join(c["layers"]), "RAM bytes": c["ram"]}
                      for c in trained["memory_choices"]], ["trainable layers", "RAM bytes"])
    steps = _table([{"step": i + 1, "C": c, "PyTorch": t} for i, (c, t) in
                    enumerate(zip(trained["loss_c"], trained["loss_torch"], strict=True))],
                   ["step", "C", "PyTorch"])
    return (f"<h2>On-device training ({html.escape(', '.join(trained['trainable']))})</h2>"
            f"<h3>Held-out accuracy under field drift</h3>{accuracy}"
            f"<h3>Training memory per choice of trainable layers</h3>{choices}"
            f"<h3>Loss per step</h3>{steps}")


def render_html(report: dict[str, Any], images: dict[str, Path]) -> str:
    m = report["metrics"]
    metrics = _table([{"metric": k, "value": v} for k, v in sorted(m.items())
                      if k != "ondevice"], ["metric", "value"])
    layers = _table(report["layers"], ["name", "op", "in_shapes", "out_shape", "params", "macs"])
    quant = _table(report["quantization"]["layers"],
                   ["name", "bits", "shift", "weight_min", "weight_max", "weights_clipped_pct",
                    "saturated_pct", "wide"])
    tiles = _table(report["tiles"], ["layer", "tiled", "rows", "channels", "tiles", "l1_bytes",
                                      "bytes_in", "bytes_out"])
    figures = "".join(f"<h3>{html.escape(title)}</h3>{_image(path)}" for title, path in images.items())
    name = html.escape(report["name"])
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>edgebuild report: {name}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#eee}}</style></head>
<body><h1>{name}</h1>
<h2>Metrics</h2>{metrics}
{_firmware_html(report)}
<h2>Layers</h2>{layers}
<h2>Memory: L1 tiles and traffic</h2>{tiles}
<h2>Quantization ({html.escape(report["quantization"]["method"])}, rounding {html.escape(report["quantization"]["rounding"])})</h2>{quant}
{_accelerator_html(report)}
{_ondevice_html(report)}
<h2>Figures</h2>{figures}
</body></html>
"""


STAGE = Stage("report", ("validate", "data", "train", "qat", "quantize", "evaluate", "plan",
                           "kat", "ondevice", "ondevice_kat"), config,
              run, "report.json and report.html", tools=("matplotlib",),
              exports=("report.json", "report.html"), artifacts={"report.json": "report.v1"})
