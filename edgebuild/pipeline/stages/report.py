"""Stage `report`: `report.json` (the contract tests and CI read) and `report.html`.

Both are also exported to `build/<name>/` itself. Every number is copied from an upstream
artifact; nothing is recomputed or typed in here.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from edgebuild.pipeline.stage import Context, Stage

REPORT_VERSION = 1


def config(checked) -> dict:
    return {"name": checked.manifest.name}


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def _optional(ctx: Context, stage: str, name: str) -> dict:
    """An upstream file of a stage that may not exist for this manifest (imported models
    have no training stages, models without a dataset no data stage): {} then."""
    path = ctx.inputs[stage] / name if stage in ctx.inputs else None
    return _read(path) if path is not None and path.is_file() else {}


def accelerator(ctx: Context) -> dict | None:
    """Processors, kernel and data memory maps of an accelerator build (plan stage)."""
    placement = _optional(ctx, "plan", "placement.json")
    if not placement:
        return None
    return {"device": ctx.checked.manifest.target.device.value, "placement": placement,
            "maps": (ctx.inputs["plan"] / "maps.txt").read_text()}


def ondevice(ctx: Context) -> dict | None:
    """On-device training: the C-vs-PyTorch comparison, memory, accuracy before/after."""
    result = _optional(ctx, "ondevice_kat", "ondevice_kat.json")
    if not result:
        return None
    memory = _read(ctx.inputs["ondevice"] / "memory.json")
    tuned = _read(ctx.inputs["ondevice"] / "finetune.json")
    keys = ("steps", "loss_max_abs_diff", "loss_max_rel_diff", "loss_c", "loss_torch",
            "memory_bytes", "instructions_per_step", "grad_max_abs_diff", "grad_max_rel_diff",
            "weight_max_abs_diff", "within_tolerance", "meets_target")
    return {**{k: result[k] for k in keys}, "trainable": memory["trainable"],
            "memory": {k: memory[k] for k in ("by_kind", "flash", "arena", "total_ram")},
            "memory_choices": memory["choices"],
            "cortex_m4_losses_match": result["cortex_m4"].get("m4_within_tolerance"),
            **{k: tuned[k] for k in ("accuracy_before", "accuracy_after",
                                     "frozen_int8_accuracy", "epochs")}}


def collect(ctx: Context) -> dict:
    graph = _read(ctx.inputs["validate"] / "graph.json")
    train = _optional(ctx, "train", "metrics.json")
    qat = _optional(ctx, "qat", "metrics.json")
    quant = _read(ctx.inputs["quantize"] / "quant.json")
    evaluation = _read(ctx.inputs["evaluate"] / "evaluation.json")
    data = _optional(ctx, "data", "data.json")
    plan = _read(ctx.inputs["plan"] / "plan.json")
    kat = _read(ctx.inputs["kat"] / "kat.json")
    report = {
        "version": REPORT_VERSION,
        "name": ctx.checked.manifest.name,
        "metrics": {
            "float_accuracy": train.get("test_accuracy"),
            "qat_accuracy": qat.get("test_accuracy"),
            "int_accuracy": evaluation.get("int_accuracy"),
            "params": graph["params"],
            "macs": graph["macs"],
            "int_vs_fakequant_mismatches": evaluation["int_vs_fakequant_mismatches"],
            "test_samples": evaluation["samples"],
            "c_vs_reference": {k: kat["c_vs_reference"][k] for k in ("samples", "mismatches")},
            "cortex_m4": kat["cortex_m4"],
            "memory": {**plan["memory"], "weight_bytes": plan["weight_bytes"]},
        },
        "tiles": tile_rows(plan),
        "quantization": {"method": quant["method"], "rounding": quant["rounding"],
                         "layers": quant["layers"]},
        "layers": graph["nodes"],
        "training": {"float": {"best_epoch": train.get("best_epoch"), "epochs": train.get("epochs")},
                     "qat": {"best_epoch": qat.get("best_epoch"), "epochs": qat.get("epochs")}},
        "confusion": {"labels": data["classes"], "matrix": evaluation["confusion"]} if data else None,
        "data": {"counts": data["counts"], "classes": len(data["classes"])} if data else None,
        "accelerator": accelerator(ctx),
    }
    for key in ("kat_samples", "kat_vs_reference_mismatches"):
        if key in evaluation:
            report["metrics"][key] = evaluation[key]
    report["metrics"]["kat_vectors"] = kat.get("vectors")
    report["metrics"]["ondevice"] = ondevice(ctx)
    return report


def tile_rows(plan: dict) -> list[dict]:
    """Per layer (and per fused pool): tile shape, tiles, bytes moved, L1 in use."""
    rows = []
    for step in plan["steps"]:
        for key, suffix in (("pool_tile", " (pool)"), ("tile", "")):
            tile = step.get(key)
            if tile:
                rows.append({"layer": step["layer"] + suffix, **tile})
    return rows


def run(ctx: Context) -> None:
    from edgebuild.train import plots

    report = collect(ctx)
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


def _table(rows: list[dict], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in columns)
                   + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _accelerator_html(report: dict) -> str:
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


def _ondevice_html(report: dict) -> str:
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


def render_html(report: dict, images: dict[str, Path]) -> str:
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
<h2>Layers</h2>{layers}
<h2>Memory: L1 tiles and traffic</h2>{tiles}
<h2>Quantization ({html.escape(report["quantization"]["method"])}, rounding {html.escape(report["quantization"]["rounding"])})</h2>{quant}
{_accelerator_html(report)}
{_ondevice_html(report)}
<h2>Figures</h2>{figures}
</body></html>
"""


STAGE = Stage("report", 6, ("validate", "data", "train", "qat", "quantize", "evaluate", "plan",
                           "kat", "ondevice", "ondevice_kat"), config,
              run, "report.json and report.html", tools=("matplotlib",),
              exports=("report.json", "report.html"))
