"""report.html: the build's report for people, rendered from report.json's content.

A headline block first (edgebuild/report/headline.py: the figures a newcomer looks for, coloured
by their verdicts), then one section per stage — data, training, QAT, quantization and
evaluation, the model's layers, the memory plan, the accelerator, the known-answer test
and firmware, on-device training — each a table with units and the figures that go with
it. Numbers are formatted here, never computed: every figure on the page is in
report.json (the headline's verdicts too), so the page and the file cannot disagree.

Formatting: accuracies as percentages with two decimals, bytes as KiB with one (exact
bytes on hover), counts with thousands separators, losses with four significant digits;
a figure the build does not have is `—`. Each headline figure carries its report.json
path and value (`data-key`, `data-value`) for tools and tests.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgebuild.report.headline import (
    ACCURACY_DROP_WARN,
    MISSING,
    Headline,
    Usage,
    amount,
    count,
    kat_text,
    percent,
    share,
    size,
)

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1150px;padding:0 1em;color:#202124}
h1{margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0}td,th{border:1px solid #ddd;padding:3px 9px}
th{background:#f1f3f4;text-align:left}td{text-align:right}td:first-child{text-align:left}
.headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:10px}
.card{border:2px solid #dadce0;border-radius:8px;padding:8px 12px;background:#f8f9fa}
.card .label{font-size:.85em;color:#5f6368}.card .value{font-size:1.45em;font-weight:600}
.card .note{font-size:.8em;color:#5f6368}
.verdict-pass{border-color:#188038;background:#e6f4ea}
.verdict-warn{border-color:#e37400;background:#fef7e0}
.verdict-fail{border-color:#d93025;background:#fce8e6}
.figure{overflow-x:auto}.figure img{display:block;margin:.5em 0}
.muted{color:#5f6368}pre{background:#f8f9fa;padding:8px;overflow-x:auto}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _fixed(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _loss(value: float | None) -> str:
    return MISSING if value is None else f"{value:.4g}"


def _bytes(value: int | None) -> str:
    """A table cell: KiB for reading, the exact bytes on hover."""
    if value is None:
        return MISSING
    return f'<span title="{value:,} bytes">{_e(size(value))}</span>'


def _shape(shape: Sequence[int]) -> str:
    return "×".join(str(d) for d in shape)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Cells are HTML already (escaped where they hold text)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pairs(rows: Sequence[tuple[str, str]]) -> str:
    return table(("figure", "value"), [(_e(label), value) for label, value in rows])


def _image(path: Path | None, alt: str) -> str:
    """An embedded PNG at its own size (scrolls sideways rather than shrinking its text)."""
    if path is None or not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<div class="figure"><img alt="{_e(alt)}" src="data:image/png;base64,{data}"></div>'


# ---- headline ---------------------------------------------------------------------------

def _card(card: str, label: str, value: str, note: str, key: str, raw: object,
          verdict: str | None = None) -> str:
    """One headline figure: `key` is its path in report.json's `headline`, `raw` its value
    there; `verdict` colours it."""
    css = f" verdict-{verdict}" if verdict else ""
    return (f'<div class="card{css}" id="hl-{card}" data-key="{_e(key)}" '
            f"data-value='{_e(json.dumps(raw))}' data-verdict=\"{_e(verdict or '')}\">"
            f'<div class="label">{_e(label)}</div><div class="value">{_e(value)}</div>'
            f'<div class="note">{_e(note)}</div></div>')


def _usage_card(card: str, label: str, usage: Usage, key: str, what: str) -> str:
    return _card(card, label, amount(usage.used, usage.unit),
                 f"{share(usage)} of {amount(usage.budget, usage.unit)} ({what})",
                 f"{key}.used", usage.used, usage.verdict)


def headline_html(h: Headline) -> str:
    cards = [_card("device", "target", h.device, "target.device", "device", h.device)]
    cards += _accuracy_cards(h)
    cards += [_usage_card("ram", "RAM (activations)", h.ram, "ram", "target.memory.l2"),
              _usage_card("flash", "flash (weights)", h.flash, "flash", "target.memory.flash")]
    cards += [_instructions_card(h), _kat_card(h)]
    cards += _ondevice_cards(h) + _accelerator_cards(h)
    return f'<section class="headline" id="headline">{"".join(cards)}</section>'


def _accuracy_cards(h: Headline) -> list[str]:
    accuracy = h.accuracy
    samples = "no dataset" if h.test_samples is None else f"test set, {h.test_samples:,} samples"
    drop = accuracy.drop_points
    change = "no float model to compare" if drop is None else \
        f"{abs(drop):.2f} points {'below' if drop > 0 else 'above'} float" if drop else \
        "same as float"
    return [_card("float-accuracy", "float accuracy", percent(accuracy.floating), samples,
                  "accuracy.float", accuracy.floating),
            _card("int8-accuracy", "int8 accuracy", percent(accuracy.int8), change,
                  "accuracy.int8", accuracy.int8, accuracy.verdict)]


def _instructions_card(h: Headline) -> str:
    figures = h.instructions
    if figures.count is None:
        note = f"skipped: {figures.skipped}" if figures.skipped else "not counted"
    else:
        kernels = figures.kernels or "kernels not recorded"
        note = f"{kernels} kernels"
        if figures.reference_count is not None and figures.kernels != "reference":
            note += f" (reference kernels: {figures.reference_count:,})"
        if figures.cycles is not None:
            note += f"; about {figures.cycles:,} cycles (estimated, no wait states)"
    return _card("instructions", "Cortex-M4 instructions / inference", count(figures.count), note,
                 "instructions.count", figures.count)


def _kat_card(h: Headline) -> str:
    kat = h.kat
    note = f"{kat.mismatches:,} of {kat.samples:,} samples differ (C vs integer reference)"
    if kat.known_answer_mismatches is not None:
        note += f"; {kat.known_answer_mismatches:,} differ from the known answer"
    note += "; Cortex-M4: " + (kat.cortex_m4 or "skipped")
    return _card("kat", "known-answer test", kat_text(kat), note, "kat.mismatches",
                 kat.mismatches, kat.verdict)


def _ondevice_cards(h: Headline) -> list[str]:
    trained = h.ondevice
    if trained is None:
        return []
    checked = "matches PyTorch" if trained.matches_pytorch else "differs from PyTorch"
    on_m4 = {None: "Cortex-M4 skipped", True: "also on the Cortex-M4",
             False: "not on the Cortex-M4"}[trained.cortex_m4_matches]
    return [_card("ondevice-accuracy", "on-device training: accuracy",
                  f"{percent(trained.accuracy_before, 1)} → {percent(trained.accuracy_after, 1)}",
                  "held-out, under drift: before → after", "ondevice.accuracy_after",
                  trained.accuracy_after, trained.accuracy_verdict),
            _usage_card("ondevice-ram", "on-device training: RAM", trained.ram, "ondevice.ram",
                        "target.memory.l2"),
            _card("ondevice-instructions", "instructions per training step",
                  count(trained.instructions_per_step), "Cortex-M4 (QEMU)",
                  "ondevice.instructions_per_step", trained.instructions_per_step),
            _card("ondevice-check", "training code", checked, on_m4, "ondevice.matches_pytorch",
                  trained.matches_pytorch, trained.verdict)]


def _accelerator_cards(h: Headline) -> list[str]:
    use = h.accelerator
    if use is None:
        return []
    return [_usage_card("processors", "accelerator processors", use.processors,
                        "accelerator.processors", h.device),
            _usage_card("data-memory", "data memory", use.data_memory,
                        "accelerator.data_memory", h.device),
            _usage_card("kernel-memory", "kernel memory", use.kernel_memory,
                        "accelerator.kernel_memory", h.device),
            _usage_card("bias-memory", "bias memory", use.bias_memory,
                        "accelerator.bias_memory", h.device)]


# ---- sections, one per stage ------------------------------------------------------------

def _section(title: str, body: str, anchor: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>' if body else ""


SHOWN_CLASS_NAMES = 100  # names listed in the data section; the rest are counted


def data_html(report: dict[str, Any]) -> str:
    """Samples per split and the classes, by name: the dataset's own names (npz `classes`,
    a .ts file's labels) where it has them, so that the page speaks of `sandal`, not `5`."""
    data = report.get("data")
    if not data:
        return ""
    rows = [(split, count(n)) for split, n in data["counts"].items()]
    rows.append(("classes", count(data["classes"])))
    labels = (report.get("confusion") or {}).get("labels") or []
    if labels:
        shown = ", ".join(map(str, labels[:SHOWN_CLASS_NAMES]))
        more = len(labels) - SHOWN_CLASS_NAMES
        rows.append(("class names (output order)",
                     _e(shown + (f", ... ({more} more)" if more > 0 else ""))))
    return _section("Data", _pairs(rows), "data")


def training_html(report: dict[str, Any], stage: str, title: str, accuracy: float | None,
                  curves: Path | None) -> str:
    """One training stage (`float` or `qat`): epochs, the epoch kept and its figures, the
    test accuracy, and the stage's loss/accuracy curves."""
    phase = report["training"][stage]
    if not phase["epochs"]:
        return ""
    best = next((e for e in phase["epochs"] if e["epoch"] == phase["best_epoch"]), None)
    rows = [("epochs run", count(len(phase["epochs"]))),
            ("epoch kept (best validation)", count(phase["best_epoch"] or None))]
    if best:
        rows += [("training accuracy at that epoch", percent(best["train_acc"])),
                 ("validation accuracy at that epoch", percent(best["val_acc"])),
                 ("validation loss at that epoch", _loss(best["val_loss"]))]
    rows.append(("test accuracy", percent(accuracy)))
    return _section(title, _pairs(rows) + _image(curves, f"{title} curves"), stage)


def quantization_html(report: dict[str, Any], confusion: Path | None) -> str:
    quant, m = report["quantization"], report["metrics"]
    summary = _pairs([
        ("method", _e(quant["method"])), ("rounding", _e(quant["rounding"])),
        ("integer (int8) test accuracy", percent(m["int_accuracy"])),
        ("test samples", count(m["test_samples"])),
        ("integer outputs that differ from fake-quant", count(m["int_vs_fakequant_mismatches"]))])
    rows = [(_e(q["name"]), _e(q["op"]), str(q["bits"]), str(q["shift"]),
             f"{q['weight_min']}..{q['weight_max']}", f"{q['weights_clipped_pct']:.2f}%",
             MISSING if q["saturated_pct"] is None else f"{q['saturated_pct']:.2f}%",
             "yes" if q["wide"] else "no") for q in quant["layers"]]
    layers = table(("layer", "op", "weight bits", "output shift", "weight range",
                    "weights clipped", "activations saturated", "wide (32-bit) output"), rows)
    figure = f"<h3>Confusion matrix (integer model, test set)</h3>{_image(confusion, 'confusion')}" \
        if confusion else ""
    return _section("Quantization and evaluation", summary + layers + figure, "quantization")


def model_html(report: dict[str, Any], macs: Path | None) -> str:
    rows = [(_e(n["name"]), _e(n["op"]), _e(", ".join(_shape(s) for s in n["in_shapes"])),
             _e(_shape(n["out_shape"])), count(n["params"]), count(n["macs"]))
            for n in report["layers"]]
    m = report["metrics"]
    rows.append(("<b>total</b>", "", "", "", f"<b>{count(m['params'])}</b>",
                 f"<b>{count(m['macs'])}</b>"))
    note = '<p class="muted">Instructions and estimated cycles per layer on the Cortex-M4: ' \
           '<a href="#kat">Known-answer test and firmware</a>.</p>'
    return _section("Model: layers", table(("layer", "op", "input (C×H×W)", "output", "params",
                                            "MACs"), rows) + _image(macs, "MACs per layer") + note,
                    "model")


def memory_html(report: dict[str, Any], tiles: Path | None) -> str:
    mem = report["metrics"]["memory"]
    summary = _pairs([
        ("activation arena (RAM)", _bytes(mem["arena_bytes"])),
        ("arena lower bound (largest live set)", _bytes(mem["arena_lower_bound"])),
        ("state outside the arena (buffers)", _bytes(mem["state_bytes"])),
        ("kernels' workspace (RAM)", _bytes(mem.get("workspace_bytes", 0))),
        ("RAM in all (arena, state, workspace, L1)", _bytes(mem.get("ram_bytes", 0))),
        ("RAM budget (target.memory.l2)", _bytes(mem["l2_budget"])),
        ("weights and biases (flash)", _bytes(mem["weight_bytes"])),
        ("L1 peak", _bytes(mem["l1_peak"])), ("L1 budget (target.memory.l1)",
                                               _bytes(mem["l1_budget"])),
        ("L2 <-> L1 traffic per inference", _bytes(mem["traffic_bytes"])),
        ("traffic lower bound", _bytes(mem["traffic_lower_bound"])),
        ("tiled layers", _e(", ".join(mem["tiled_layers"]) or "none"))])
    rows = [(_e(t["layer"]), "yes" if t["tiled"] else "no", f"{t['rows']} × {t['channels']}",
             count(t["tiles"]), _bytes(t["l1_bytes"]), _bytes(t["bytes_in"]),
             _bytes(t["bytes_out"])) for t in report["tiles"]]
    tiles_table = "<h3>L1 tiles per layer</h3>" + table(
        ("layer", "tiled", "tile (rows × channels)", "tiles", "L1 in use", "L2 -> L1",
         "L1 -> L2"), rows) if rows else ""
    return _section("Memory plan", summary + tiles_table + _image(tiles, "L1 tiles"), "memory")


def accelerator_html(report: dict[str, Any], data_memory: Path | None,
                     kernel_memory: Path | None, processor_map: Path | None = None) -> str:
    acc = report.get("accelerator")
    if not acc:
        return ""
    rows = [(_e(layer["name"]), _e(layer["op"]), _e(layer["processors"]),
             _e(layer["output_processors"]), f"0x{layer['in_offset']:04x}",
             f"0x{layer['out_offset']:04x}", f"{layer['in_passes']}/{layer['out_passes']}",
             MISSING if layer["kernel"] is None else
             f"{layer['kernel']['start']}..{layer['kernel']['start'] + layer['kernel']['words'] - 1}")
            for layer in acc["placement"]["layers"]]
    placement = table(("layer", "op", "processors", "output processors", "input offset",
                       "output offset", "passes in/out", "kernel words"), rows)
    maps = f"<details><summary>memory maps as text</summary><pre>{_e(acc['maps'])}</pre></details>"
    return _section(f"Accelerator: {acc['device']}", _where(acc) + placement
                    + _image(processor_map, "processor map") + _image(data_memory, "data memory") + _image(kernel_memory, "kernel memory")
                    + maps, "accelerator")


def _where(acc: dict[str, Any]) -> str:
    """Which code runs where: the accelerator program (an MSDK project) and the Cortex-M4
    software emulation of the same network (the host KAT and the fallback)."""
    program = acc.get("program")
    if not program:
        return ""
    emulation = f"the Cortex-M4 software emulation of the same network is in " \
                f"<code>{_e(acc.get('emulation') or 'codegen/')}</code> (the host known-answer " \
                "test and the fallback)"
    if program.get("unsupported"):
        return f"<p>No accelerator program: {_e(program['unsupported'])}; {emulation}.</p>"
    return (f"<p>The accelerator program ({program['layers']} layers, "
            f"{_bytes(program['kernel_bytes'])} of kernels, {program['bias_bytes']} bias bytes) "
            f"is the MSDK project in <code>{_e(program['project'])}</code>; {emulation}.</p>")


def kat_html(report: dict[str, Any], cycles: Path | None = None) -> str:
    m = report["metrics"]
    host = m["c_vs_reference"]
    rows = [("vectors", _e(m["kat_vectors"])), ("samples", count(host["samples"])),
            ("C outputs that differ from the integer reference", count(host["mismatches"]))]
    if "kat_vs_reference_mismatches" in m:
        rows.append(("integer reference outputs that differ from the known answer",
                     count(m["kat_vs_reference_mismatches"])))
    return _section("Known-answer test and firmware", _pairs(rows) + firmware_html(m["cortex_m4"])
                    + layer_runs_html(m["cortex_m4"], cycles), "kat")


def layer_runs_html(m4: dict[str, Any], figure: Path | None) -> str:
    """Per layer on the M4: instructions and estimated cycles (this firmware's kernels and
    the reference ones), per MAC, and the weight bytes in flash."""
    layers = m4.get("layers") or []
    if not layers:
        return ""
    rows = [(_e(r["layer"]), _e(r["op"]), count(r["macs"]), count(r["instructions"]),
             count(r["cycles"]), _fixed(r.get("insn_per_mac")), _fixed(r.get("cycles_per_mac")),
             _fixed(r.get("reference_cycles_per_mac")), _bytes(r["weight_bytes"]))
            for r in layers]
    head = ("layer", "op", "MACs", "instructions", "est. cycles", "insn/MAC", "cycles/MAC",
            "reference cycles/MAC", "weights")
    return ("<h3>Cortex-M4 per layer (cycles estimated from the instruction mix: "
            "no wait states)</h3>" + table(head, rows) + _image(figure, "cycles per layer"))


def firmware_html(m4: dict[str, Any]) -> str:
    """The Cortex-M4 firmware under QEMU: instructions of one inference, each count with its
    kernels (the optimized kernels where the C runs on a Cortex-M4, else the reference ones; see
    edgebuild/report/katresult.py), and its sizes."""
    if "skipped" in m4:
        return f"<h3>Cortex-M4 (QEMU)</h3><p>skipped: {_e(m4['skipped'])}</p>"
    kernels = m4.get("kernels")
    rows = [(f"{_e(kernels or 'not recorded')} (this firmware)", count(m4["instructions"]),
             _fixed(m4["insn_per_mac"]))]
    if "reference_instructions" in m4 and kernels != "reference":
        rows.append(("reference", count(m4["reference_instructions"]),
                     _fixed(m4["reference_insn_per_mac"])))
    sizes = _pairs([("text (code and constants)", _bytes(m4["text"])),
                    ("of which code", _bytes(m4["code_bytes"])), ("data", _bytes(m4["data"])),
                    ("bss", _bytes(m4["bss"])), ("known-answer test", _e(m4["kat"]))])
    return ("<h3>Cortex-M4 (QEMU): instructions of one inference</h3>"
            + table(("kernels", "instructions", "per MAC"), rows)
            + "<h3>Known-answer firmware (with its test vectors)</h3>" + sizes)


def ondevice_html(report: dict[str, Any], losses: Path | None) -> str:
    trained = report["metrics"].get("ondevice")
    if not trained:
        return ""
    accuracy = _pairs([
        ("frozen int8 model", percent(trained["frozen_int8_accuracy"])),
        ("before on-device training", percent(trained["accuracy_before"])),
        (f"after {trained['epochs']} epochs on the device", percent(trained["accuracy_after"]))])
    check = _pairs([
        ("steps compared", count(trained["steps"])),
        ("largest loss difference (absolute)", f"{trained['loss_max_abs_diff']:.3g}"),
        ("largest gradient difference (absolute)", f"{trained['grad_max_abs_diff']:.3g}"),
        ("largest weight difference (absolute)", f"{trained['weight_max_abs_diff']:.3g}"),
        ("within float32 tolerance", "yes" if trained["within_tolerance"] else "no"),
        ("instructions per step (Cortex-M4)", count(trained["instructions_per_step"]))])
    memory = trained["memory"]
    plan = _pairs([
        ("L2: training buffers and the inference arena",
         f"{_bytes(memory['l2_bytes'])} of {_bytes(memory['l2_budget'])}"),
        ("L2 needed at once (lower bound)", _bytes(memory["l2_lower_bound"])),
        ("L1 peak (the largest pass or tile)",
         f"{_bytes(memory['l1_peak'])} of {_bytes(memory['l1_budget'])}"),
        ("L2 <-> L1 per step (lower bound)",
         f"{_bytes(memory['traffic'])} ({_bytes(memory['traffic_lower_bound'])})")])
    tiled = table(("layer", "pass", "tile (rows × channels)", "tiles", "L1 in use"), [
        (_e(p["layer"]), _e(p["phase"]), f"{p['rows']} × {p['channels']}", count(p["tiles"]),
         _bytes(p["l1_bytes"])) for p in memory["tiled"]]) if memory["tiled"] else ""
    choices = table(("trainable layers", "RAM"), [(_e(", ".join(c["layers"])), _bytes(c["ram"]))
                                                   for c in trained["memory_choices"]])
    steps = table(("step", "loss (C)", "loss (PyTorch)"), [
        (str(i + 1), _loss(c), _loss(t)) for i, (c, t) in
        enumerate(zip(trained["loss_c"], trained["loss_torch"], strict=True))])
    body = ("<h3>Held-out accuracy under field drift</h3>" + accuracy
            + "<h3>Generated training code against PyTorch</h3>" + check
            + "<h3>Training memory plan</h3>" + plan + tiled
            + "<h3>Training memory per choice of trainable layers</h3>" + choices
            + "<h3>Loss per step</h3>" + steps + _image(losses, "on-device training losses"))
    return _section(f"On-device training ({', '.join(trained['trainable'])})", body, "ondevice")


LEGEND = ('<p class="muted">Green: within budget or passed; amber: int8 accuracy more than '
          f"{ACCURACY_DROP_WARN:g} points below float; red: over budget or failed; {MISSING}: "
          "not available for this build. Every figure is in report.json (`headline`).</p>")


def render(report: dict[str, Any], images: dict[str, Path]) -> str:
    """The page; `images` by figure name: float_curves, qat_curves, confusion, layer_macs,
    tiles, data_memory, kernel_memory, ondevice (each only when drawn)."""
    m, name = report["metrics"], _e(report["name"])
    head = report.get("headline")
    top = headline_html(Headline.from_json(head)) + LEGEND if head else ""
    sections = [
        data_html(report),
        training_html(report, "float", "Training (float)", m["float_accuracy"],
                      images.get("float_curves")),
        training_html(report, "qat", "Quantization-aware training", m["qat_accuracy"],
                      images.get("qat_curves")),
        quantization_html(report, images.get("confusion")),
        model_html(report, images.get("layer_macs")),
        memory_html(report, images.get("tiles")),
        accelerator_html(report, images.get("data_memory"), images.get("kernel_memory"),
                         images.get("processor_map")),
        kat_html(report, images.get("layer_cycles")), ondevice_html(report, images.get("ondevice"))]
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgebuild report: {name}</title>
<style>{STYLE}</style></head>
<body><h1>{name}</h1>
<nav class="muted">edgebuild report &middot; {_contents(sections)}</nav>
{top}
{"".join(section + chr(10) for section in sections)}</body></html>
"""


def _contents(sections: Sequence[str]) -> str:
    """Links to the sections present, by their ids and titles."""
    links = []
    for section in filter(None, sections):
        anchor = section.split('id="', 1)[1].split('"', 1)[0]
        title = section.split("<h2>", 1)[1].split("</h2>", 1)[0]
        links.append(f'<a href="#{anchor}">{title}</a>')
    return " &middot; ".join(links)
