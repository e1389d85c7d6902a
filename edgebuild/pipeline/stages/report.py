"""Stage `report`: `report.json` (the contract tests and CI read) and `report.html`.

Both are also exported to `build/<name>/` itself. Every number is copied from an upstream
stage's record (read through its loader) into the report's record (edgebuild/report/report.py),
which also judges the headline; nothing is recomputed or typed in here. report.html
(edgebuild/report/reportpage.py) and its figures (edgebuild/report/figures.py) are rendered from the
report's JSON form, what report.json holds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Callable

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model.evaluation import Evaluation
    from edgebuild.model.graph import Graph
    from edgebuild.pipeline.validation import Checked
    from edgebuild.report import report as reports
    from edgebuild.report.katresult import KatResult
    from edgebuild.train.metrics import Metrics

T = TypeVar("T")  # an upstream stage's record


def config(checked: Checked) -> JSONObject:
    """The name, and what the headline judges by that no upstream output holds: the
    device and the flash budget (the l2 budget is in plan.json)."""
    target = checked.manifest.target
    return {"name": checked.name, "device": target.device.value,
            "flash": target.memory.flash}


def _optional(ctx: Context[Checked], stage: str, load: Callable[[Path], T],
              name: str | None = None) -> T | None:
    """An upstream record of a stage that may not exist for this manifest (imported models
    have no training stages, models without a dataset no data stage), or a file a stage
    writes only for some manifests (`name`): None then."""
    if stage not in ctx.inputs or (name and not (ctx.inputs[stage] / name).is_file()):
        return None
    return load(ctx.inputs[stage])


def accelerator(ctx: Context[Checked]) -> reports.Accelerator | None:
    """Processors, kernel and data memory maps of an accelerator build (plan stage)."""
    from edgebuild.report.report import Accelerator
    from edgebuild.targets.max7800x import profile
    from edgebuild.targets.max7800x.placement import Placement
    from edgebuild.targets.max7800x.placement.occupancy import occupancy
    from edgebuild.targets.max7800x.program.record import FILE, ProgramRecord

    placement = _optional(ctx, "plan", Placement.load, "placement.json")
    if placement is None:
        return None
    device = ctx.checked.manifest.target.device.value
    program = _optional(ctx, "accelerator", ProgramRecord.load, FILE)
    return Accelerator(device, placement, (ctx.inputs["plan"] / "maps.txt").read_text(),
                       occupancy(placement, profile.profile(device)), program,
                       "codegen/" if program is not None else None)


def ondevice(ctx: Context[Checked]) -> reports.OndeviceSummary | None:
    """On-device training: the C-vs-PyTorch comparison, memory, accuracy before/after."""
    from edgebuild.ondevice.finetune import FineTune
    from edgebuild.ondevice.memory import TrainingMemory
    from edgebuild.report.report import OndeviceSummary, TrainingRam
    from edgebuild.report.trainingkat import TrainingKat, TrainingRun

    result = _optional(ctx, "ondevice_kat", TrainingKat.load, "ondevice_kat.json")
    if result is None:
        return None
    memory = TrainingMemory.load(ctx.inputs["ondevice"])
    tuned = FineTune.load(ctx.inputs["ondevice"])
    m4 = result.cortex_m4
    return OndeviceSummary(
        result.steps, result.losses.loss_max_abs_diff, result.losses.loss_max_rel_diff,
        result.loss_c, result.loss_torch, result.memory_bytes, result.instructions_per_step,
        result.tensors.grad_max_abs_diff, result.tensors.grad_max_rel_diff,
        result.tensors.weight_max_abs_diff,
        result.losses.within_tolerance, result.losses.meets_target, memory.trainable,
        TrainingRam(memory.by_kind, memory.flash, memory.arena, memory.total_ram,
                    memory.l1_peak, memory.l1_budget, memory.l2_bytes,
                    memory.l2_lower_bound, memory.l2_budget,
                    memory.traffic, memory.traffic_lower_bound,
                    tuple(p.to_json() for p in memory.passes if p.tiled)),
        memory.choices,
        m4.comparison.within_tolerance if isinstance(m4, TrainingRun) else None,
        tuned.accuracy_before, tuned.accuracy_after, tuned.frozen_int8_accuracy, tuned.epochs)


def metrics(ctx: Context[Checked], graph: Graph, train: Metrics | None, qat: Metrics | None,
            evaluation: Evaluation, plan: MemoryPlan, kat: KatResult) -> reports.ReportMetrics:
    from edgebuild.report.report import HostTotals, MemoryFigures, ReportMetrics

    assert plan.memory is not None  # the plan stage writes the memory totals (tile_steps)
    return ReportMetrics(
        None if train is None else train.test_accuracy,
        None if qat is None else qat.test_accuracy, evaluation.int_accuracy, graph.params,
        graph.macs, evaluation.int_vs_fakequant_mismatches, evaluation.samples,
        HostTotals(kat.c_vs_reference.samples, kat.c_vs_reference.mismatches), kat.cortex_m4,
        MemoryFigures(plan.memory, plan.weight_bytes), kat.vectors, ondevice(ctx),
        evaluation.kat_samples, evaluation.kat_vs_reference_mismatches)


def collect(ctx: Context[Checked]) -> reports.Report:
    from edgebuild.data.info import DataInfo
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model.evaluation import Evaluation
    from edgebuild.model.graph import Graph
    from edgebuild.model.quantization import Quantization
    from edgebuild.report import report as reports
    from edgebuild.report.katresult import KatResult
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
        ctx.checked.name, figures, tile_rows(plan),
        reports.QuantSummary(quant.method, quant.rounding, quant.layers), graph.nodes,
        _phase(train), _phase(qat), confusion, counts, placed,
        headline=reports.headline_of(figures, target.device.value, target.memory.flash,
                                     None if placed is None else placed.occupancy))


def _phase(metrics: Metrics | None) -> reports.Phase:
    from edgebuild.report.report import Phase

    return Phase() if metrics is None else Phase(metrics.best_epoch, metrics.epochs)


def tile_rows(plan: MemoryPlan) -> tuple[reports.TileRow, ...]:
    """Per layer (and per fused pool): tile shape, tiles, bytes moved, L1 in use."""
    from edgebuild.report.report import TileRow

    return tuple(TileRow(step.layer + suffix, step.tiles[key]) for step in plan.steps
                 for key, suffix in (("pool_tile", " (pool)"), ("tile", ""))
                 if key in step.tiles)


def run(ctx: Context[Checked]) -> None:
    from edgebuild.report import reportpage

    report = collect(ctx).to_json()
    (ctx.out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    (ctx.out / "report.html").write_text(reportpage.render(report, figures(ctx, report)))
    ctx.log(f"report: {_summary(report)}")


def figures(ctx: Context[Checked], report: dict[str, Any]) -> dict[str, Path]:
    """The figures report.html shows, by name: the training stages' curves as they drew
    them, the rest drawn here from the report's content (edgebuild/report/figures.py)."""
    from edgebuild.report import figures as draw

    images = {f"{stage}_curves": ctx.inputs[key] / "curves.png"
              for stage, key in (("float", "train"), ("qat", "qat"))
              if key in ctx.inputs and (ctx.inputs[key] / "curves.png").is_file()}
    out = ctx.out
    if report["confusion"]:
        draw.confusion(report["confusion"]["matrix"], report["confusion"]["labels"],
                       images.setdefault("confusion", out / "confusion.png"))
    draw.layer_macs(report["layers"], images.setdefault("layer_macs", out / "layers.png"))
    m4_layers = report["metrics"]["cortex_m4"].get("layers")
    if m4_layers:
        draw.layer_cycles(m4_layers, images.setdefault("layer_cycles", out / "cycles.png"))
    if report["tiles"]:
        draw.tiles(report["tiles"], report["metrics"]["memory"]["l1_budget"],
                   images.setdefault("tiles", out / "memory.png"))
    accelerator = report["accelerator"]
    if accelerator and "occupancy" in accelerator:
        placement, use = accelerator["placement"], accelerator["occupancy"]
        draw.data_memory(placement["data_memory"], use["data_by_instance"],
                         use["instance_bytes"], accelerator["device"],
                         images.setdefault("data_memory", out / "data_memory.png"))
        draw.kernel_memory(placement["kernel_memory"], use["processors"], use["quadrants"],
                           use["kernel_words"], accelerator["device"],
                           images.setdefault("kernel_memory", out / "kernel_memory.png"))
        draw.processor_map(placement["layers"], use["processors"], use["quadrants"],
                           accelerator["device"],
                           images.setdefault("processor_map", out / "processor_map.png"))
    trained = report["metrics"]["ondevice"]
    if trained:
        from edgebuild.train import plots

        plots.training_losses(trained["loss_c"], trained["loss_torch"],
                              images.setdefault("ondevice", out / "ondevice.png"))
    return images


def _summary(report: dict[str, Any]) -> str:
    """The stage's log line: the headline's accuracies, memory, Cortex-M4 instructions and
    known-answer test (`-`: a figure the build does not have)."""
    from edgebuild.report import headline as headlines

    head, dash = headlines.Headline.from_json(report["headline"]), "-"
    return (f"float {headlines.percent(head.accuracy.floating, missing=dash)}  int8 "
            f"{headlines.percent(head.accuracy.int8, missing=dash)}  RAM "
            f"{headlines.used(head.ram)}  flash {headlines.used(head.flash)}  M4 "
            f"{headlines.instructions_text(head.instructions, dash)}  KAT "
            f"{headlines.kat_text(head.kat)}")


STAGE = Stage("report", ("validate", "data", "train", "qat", "quantize", "evaluate", "plan",
                           "accelerator", "kat", "ondevice", "ondevice_kat"), config,
              run, "report.json and report.html", tools=("matplotlib",),
              exports=("report.json", "report.html"), artifacts={"report.json": "report.v1"},
              facets=())
