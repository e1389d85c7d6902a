"""The report's headline (edgebuild/report/headline.py, edgebuild/report/report.py
`headline_of`), its page (edgebuild/report/reportpage.py) and the terminal summary that shows the same record: figures a
build does not have are `—` (`-` in the terminal) and crash nothing, verdicts follow the
thresholds, and the page groups the metrics by stage with units. Unit tier: hand-written
report.json content, no build (tests/test_report_browser.py renders real builds)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from edgebuild.cli import summary
from edgebuild.core.resources import schemas_dir
from edgebuild.report import headline as figures
from edgebuild.report import reportpage
from edgebuild.report.headline import FAIL, PASS, WARN, Accuracy, Headline, Kat, Usage
from edgebuild.report.report import ReportMetrics, headline_of
from edgebuild.targets.max7800x.placement.occupancy import Occupancy, _bytes_used
from edgebuild.targets.max7800x.placement.regions import Region

FIRMWARE = {"bss": 16616, "code_bytes": 16852, "data": 112, "insn_per_mac": 2.1499,
            "instructions": 260322, "kat": "pass", "kernels": "optimized", "cycles": 382150,
            "reference_insn_per_mac": 23.299, "reference_instructions": 2821233, "text": 32460}
MEMORY = {"arena_bytes": 1792, "arena_lower_bound": 1792, "l1_budget": 16384, "l1_peak": 9600,
          "l2_budget": 131072, "state_bytes": 0, "tiled_layers": [], "traffic_bytes": 19808,
          "traffic_lower_bound": 19808, "weight_bytes": 15608}
ONDEVICE = {
    "accuracy_after": 1.0, "accuracy_before": 0.7, "cortex_m4_losses_match": True, "epochs": 10,
    "frozen_int8_accuracy": 0.675, "grad_max_abs_diff": 1.2e-07, "grad_max_rel_diff": 1.1e-07,
    "instructions_per_step": 5874092, "loss_c": [0.54, 0.08], "loss_torch": [0.54, 0.08],
    "loss_max_abs_diff": 1.2e-07, "loss_max_rel_diff": 1.5e-07, "meets_target": True,
    "memory": {"arena": 2400, "by_kind": {"activation": 15456, "l1": 2048}, "flash": 0,
               "total_ram": 40760, "l1_peak": 2048, "l1_budget": 2048, "l2_bytes": 38712,
               "l2_lower_bound": 30104, "l2_budget": 131072, "traffic": 52000,
               "traffic_lower_bound": 48000,
               "tiled": [{"layer": "conv3", "phase": "weight", "kernel": "conv", "tiled": True,
                          "rows": 10, "channels": 8, "tiles": 8, "l1_bytes": 2048,
                          "traffic": 30000, "lower_bound": 26000}]},
    "memory_bytes": 36312, "memory_choices": [{"layers": ["fc"], "ram": 9624}], "steps": 2,
    "trainable": ["conv3", "fc"], "weight_max_abs_diff": 1.2e-07, "within_tolerance": True}


def metrics(**changes: object) -> dict:
    """report.json `metrics` of a digits build on a cortex-m4 target, with `changes`."""
    base = {"c_vs_reference": {"mismatches": 0, "samples": 359}, "cortex_m4": dict(FIRMWARE),
            "float_accuracy": 0.9916434540389972, "int_accuracy": 0.9888579387186629,
            "int_vs_fakequant_mismatches": 0, "kat_vectors": "integer reference", "macs": 121088,
            "memory": dict(MEMORY), "ondevice": None, "params": 15338,
            "qat_accuracy": 0.9916434540389972, "test_samples": 359}
    return {**base, **changes}


def head(occupancy: Occupancy | None = None, device: str = "cortex-m4", **changes: object
         ) -> Headline:
    return headline_of(ReportMetrics.from_json(metrics(**changes)), device, 512 * 1024,
                       occupancy)


def report(**changes: object) -> dict:
    """A whole report.json's content around `metrics(**changes)` (no dataset, no training:
    the sections an imported model has), with its headline."""
    layers = [{"in_shapes": [[1, 8, 8]], "inputs": ["input"], "macs": 9216, "name": "conv1",
               "op": "conv2d", "out_shape": [16, 8, 8], "params": 160},
              {"in_shapes": [[16, 8, 8]], "inputs": ["conv1"], "macs": 0, "name": "flat",
               "op": "flatten", "out_shape": [1024], "params": 0}]
    quant = {"method": "imported", "rounding": "half_up", "layers": [
        {"bias_bits": 16, "bits": 8, "name": "conv1", "op": "conv2d", "saturated_pct": None,
         "scale_exp": 0, "shift": -7, "weight_max": 71, "weight_min": -63,
         "weights_clipped_pct": 0.0, "wide": False}]}
    content = {"version": 1, "name": "imported", "metrics": metrics(**changes), "tiles": [],
               "quantization": quant, "layers": layers,
               "training": {"float": {"best_epoch": None, "epochs": None},
                            "qat": {"best_epoch": None, "epochs": None}},
               "confusion": None, "data": None, "accelerator": None}
    content["headline"] = headline_of(ReportMetrics.from_json(content["metrics"]), "host",
                                      512 * 1024, None).to_json()
    return content


def cards(page: str) -> dict[str, tuple[str, str, str]]:
    """Headline card id -> (verdict, value text, data-value) of a rendered page."""
    found = re.findall(r'<div class="card[^"]*" id="hl-([a-z0-9-]+)" data-key="[^"]*" '
                       r"data-value='([^']*)' data-verdict=\"([a-z]*)\">.*?"
                       r'<div class="value">([^<]*)</div>', page)
    return {card: (verdict, value, raw) for card, raw, verdict, value in found}


# ---- verdicts and formatting ------------------------------------------------------------

def test_usage_passes_within_its_budget_and_fails_over_it():
    assert Usage(1792, 131072).verdict == PASS and Usage(131072, 131072).verdict == PASS
    assert Usage(131073, 131072).verdict == FAIL
    assert figures.share(Usage(1792, 131072)) == "1.4%"
    assert figures.share(Usage(3, 524288)) == "<0.1%" and figures.share(Usage(0, 10)) == "0.0%"
    assert figures.share(Usage(5, 0)) == figures.MISSING and Usage(5, 0).percent is None
    assert figures.used(Usage(1792, 131072)) == "1.8 KiB / 128.0 KiB"
    assert figures.used(Usage(52, 64, "processors")) == "52 processors / 64 processors"


def test_accuracy_warns_when_int8_drops_more_than_two_points():
    assert Accuracy(0.95, 0.94).verdict == PASS
    assert Accuracy(0.95, 0.93).verdict == PASS  # exactly 2 points
    assert Accuracy(0.95, 0.9299).verdict == WARN
    assert Accuracy(0.90, 0.91).verdict == PASS and Accuracy(0.90, 0.91).drop_points < 0
    for missing in (Accuracy(None, 0.9), Accuracy(None, None), Accuracy(0.9, None)):
        assert missing.verdict is None and missing.drop_points is None


def test_the_known_answer_test_fails_on_any_mismatch():
    assert Kat(359, 0, None, "pass").verdict == PASS
    assert Kat(359, 0, None, None).verdict == PASS  # Cortex-M4 skipped: the host's verdict
    assert Kat(359, 3, None, "pass").verdict == FAIL
    assert Kat(1, 0, 2, "pass").verdict == FAIL  # the supplied known answer differs
    assert figures.kat_text(Kat(359, 3, None, "pass")) == "FAIL (3)"
    assert figures.kat_text(None) == figures.MISSING


def test_numbers_are_rounded_for_people():
    assert figures.percent(0.9916434540389972) == "99.16%"
    assert figures.percent(0.9916434540389972, 1) == "99.2%"
    assert figures.percent(None) == "—" and figures.percent(None, missing="-") == "-"
    assert figures.size(1023) == "1023 B" and figures.size(1792) == "1.8 KiB"
    assert figures.count(260322) == "260,322" and figures.count(None) == "—"


# ---- the headline from the report's metrics ---------------------------------------------

def test_headline_of_a_cortex_m4_build():
    h = head()
    assert h.device == "cortex-m4" and h.test_samples == 359
    assert h.accuracy.verdict == PASS and round(h.accuracy.drop_points, 2) == 0.28
    assert h.ram == Usage(1792, 131072) and h.flash == Usage(15608, 512 * 1024)
    assert (h.instructions.count, h.instructions.kernels) == (260322, "optimized")
    assert h.instructions.reference_count == 2821233
    assert h.kat.verdict == PASS and h.ondevice is None and h.accelerator is None
    assert Headline.from_json(h.to_json()) == h
    assert Headline.from_json(json.loads(json.dumps(h.to_json()))).to_json() == h.to_json()


def test_ram_counts_the_state_kept_outside_the_arena():
    h = head(memory={**MEMORY, "state_bytes": 208})
    assert h.ram.used == 1792 + 208


def test_ram_is_all_the_planned_ram_when_the_plan_counts_it():
    """A plan that counts the kernels' workspace and L1 (ram_bytes) is the RAM shown: the
    arena alone would hide the scratch buffers the C allocates."""
    h = head(memory={**MEMORY, "workspace_bytes": 2304, "l1_peak": 912, "ram_bytes": 5008})
    assert h.ram == Usage(5008, 131072)
    assert head(memory={**MEMORY, "ram_bytes": 200000}).ram.verdict == FAIL


def test_missing_figures_are_none_and_verdicts_follow_thresholds():
    h = head(float_accuracy=None, qat_accuracy=None, int_accuracy=None,
             cortex_m4={"skipped": "no arm-none-eabi-gcc"})
    assert h.accuracy.verdict is None and h.test_samples is None
    assert h.instructions.count is None and h.instructions.skipped == "no arm-none-eabi-gcc"
    assert h.kat.cortex_m4 is None and h.kat.verdict == PASS
    assert head(int_accuracy=0.95).accuracy.verdict == WARN
    assert head(memory={**MEMORY, "arena_bytes": 200000}).ram.verdict == FAIL
    assert head(c_vs_reference={"samples": 359, "mismatches": 2}).kat.verdict == FAIL


def test_on_device_training_adds_its_figures():
    h = head(ondevice=ONDEVICE)
    assert h.ondevice is not None and h.ondevice.ram == Usage(38712, 131072)
    assert h.ondevice.verdict == PASS and h.ondevice.instructions_per_step == 5874092
    worse = head(ondevice={**ONDEVICE, "cortex_m4_losses_match": False}).ondevice
    assert worse is not None and worse.verdict == FAIL
    page = reportpage.headline_html(h)
    assert {"ondevice-accuracy", "ondevice-ram", "ondevice-instructions", "ondevice-check"} \
        <= set(cards(page))
    assert cards(page)["ondevice-accuracy"][1] == "70.0% → 100.0%"


def test_headline_json_matches_the_report_schema():
    schema = json.loads((schemas_dir() / "artifacts" / "report.v1.schema.json").read_text())
    occupancy = Occupancy(52, 64, 4, (80, 272) + (0,) * 14, 32768, 1712, 49152, 90, 2048)
    validator = jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/headline"})
    for h in (head(), head(occupancy, "max78000"), head(ondevice=ONDEVICE),
              head(float_accuracy=None, int_accuracy=None, cortex_m4={"skipped": "why"})):
        assert not list(validator.iter_errors(h.to_json())), h


# ---- accelerator occupancy --------------------------------------------------------------

def test_data_memory_counts_each_byte_once_and_skips_write_gaps():
    solid = Region("a", 0, 0, 4, 16, 4, 0, 1)  # bytes 0..63
    later = Region("b", 0, 0, 4, 4, 4, 2, 3)  # bytes 0..15 again, at later steps
    gapped = Region("c", 0, 1024, 8, 4, 4, 0, 1)  # 4 words, every other word
    assert _bytes_used([solid]) == 64 and _bytes_used([solid, later]) == 64
    assert _bytes_used([gapped]) == 16 and _bytes_used([solid, later, gapped]) == 80
    assert _bytes_used([]) == 0


def test_accelerator_occupancy_in_the_headline():
    occupancy = Occupancy(52, 64, 4, (80, 272) + (0,) * 14, 32768, 1712, 49152, 90, 2048)
    assert Occupancy.from_json(occupancy.to_json()) == occupancy
    use = head(occupancy, "max78000").accelerator
    assert use is not None
    assert use.processors == Usage(52, 64, "processors")
    assert use.data_memory == Usage(352, 16 * 32768)
    assert use.kernel_memory == Usage(1712, 49152, "words")
    assert use.bias_memory == Usage(90, 2048)


# ---- the page ---------------------------------------------------------------------------

def test_the_headline_shows_dashes_for_what_a_build_lacks():
    content = report(float_accuracy=None, qat_accuracy=None, int_accuracy=None,
                     cortex_m4={"skipped": "no arm-none-eabi-gcc"})
    page = reportpage.render(content, {})
    shown = cards(page)
    for card in ("float-accuracy", "int8-accuracy", "instructions"):
        assert shown[card][1] == "—" and shown[card][2] == "null", card
    assert shown["int8-accuracy"][0] == ""  # nothing to judge: no colour
    assert shown["kat"][:2] == ("pass", "pass")
    assert "skipped: no arm-none-eabi-gcc" in page
    assert "ondevice-ram" not in shown and "processors" not in shown


def test_the_headline_is_coloured_by_its_verdicts():
    shown = cards(reportpage.render(report(int_accuracy=0.95), {}))
    assert shown["int8-accuracy"][0] == WARN and shown["float-accuracy"][0] == ""
    assert shown["ram"][:2] == (PASS, "1.8 KiB") and shown["flash"][0] == PASS
    over = report(memory={**MEMORY, "arena_bytes": 200000},
                  c_vs_reference={"samples": 359, "mismatches": 2})
    shown = cards(reportpage.render(over, {}))
    assert shown["ram"][0] == FAIL and shown["kat"][:2] == (FAIL, "FAIL (2)")
    assert 'class="card verdict-fail" id="hl-ram"' in reportpage.render(over, {})


def test_headline_values_are_report_json_values():
    content = report()
    shown = cards(reportpage.render(content, {}))
    h = content["headline"]
    assert json.loads(shown["float-accuracy"][2]) == h["accuracy"]["float"]
    assert shown["float-accuracy"][1] == "99.16%" and shown["int8-accuracy"][1] == "98.89%"
    assert json.loads(shown["ram"][2]) == h["ram"]["used"] == 1792
    assert json.loads(shown["instructions"][2]) == h["instructions"]["count"]
    assert shown["instructions"][1] == "260,322"


def test_metrics_are_grouped_by_stage_with_units_and_no_raw_dicts():
    page = reportpage.render(report(), {})
    assert [title for title in re.findall(r"<h2>([^<]*)</h2>", page)] == [
        "Quantization and evaluation", "Model: layers", "Memory plan",
        "Known-answer test and firmware"]
    assert "0.9916434540389972" not in page.replace("data-value='0.9916434540389972'", "")
    assert "{'" not in page and "{&#x27;" not in page  # no dict printed as text
    assert '<td><span title="1,792 bytes">1.8 KiB</span></td>' in page  # the arena
    assert "<td>optimized (this firmware)</td><td>260,322</td>" in page
    assert "1×8×8" in page and "<b>121,088</b>" in page


def test_a_report_json_without_a_headline_still_renders():
    content = report()
    del content["headline"]
    page = reportpage.render(content, {})
    assert 'id="headline"' not in page and "<h2>Memory plan</h2>" in page


def test_ondevice_and_training_sections_render(tmp_path: Path):
    content = report(ondevice=ONDEVICE)
    epochs = [{"epoch": 1, "lr": 0.003, "train_acc": 0.5, "train_loss": 1.5, "val_acc": 0.6,
               "val_loss": 1.2345678}]
    content["training"]["float"] = {"best_epoch": 1, "epochs": epochs}
    content["data"] = {"classes": 10, "counts": {"train": 1295, "val": 143, "test": 359}}
    page = reportpage.render(content, {"float_curves": tmp_path / "absent.png"})
    assert "<h2>Training (float)</h2>" in page and "<h2>Data</h2>" in page
    assert "<td>1.235</td>" in page and "<td>60.00%</td>" in page
    assert "<h2>On-device training (conv3, fc)</h2>" in page
    assert "<img" not in page  # a figure file that is not there is left out


# ---- the terminal summary shows the same record -----------------------------------------

def test_the_summary_table_reads_the_headline(tmp_path: Path):
    (tmp_path / "report.json").write_text(json.dumps(report(int_accuracy=None)))
    h = summary._headline(tmp_path)
    assert h is not None
    assert summary._figures(h) == ("99.2%", "-", "1.8 KiB / 128.0 KiB",
                                   "15.2 KiB / 512.0 KiB", "260,322", "382,150", "pass")


@pytest.mark.parametrize("text", ["", "{", "[]", '{"metrics": {}}', '{"headline": {"ram": 1}}'])
def test_the_summary_survives_a_bad_or_old_report(tmp_path: Path, text: str):
    (tmp_path / "report.json").write_text(text)
    assert summary._headline(tmp_path) is None
    assert summary._figures(None) == ("-",) * 7
    assert summary._headline(tmp_path / "absent") is None


def test_the_processor_map_draws_each_layers_input_and_output_processors(tmp_path):
    """report.html's processor map: one row per hardware layer; a PNG whose pixels differ
    between a layer that reads processors 0-3 and one that writes them."""
    import matplotlib.image as mpimg
    import numpy as np

    from edgebuild.report import figures as draw

    layers = [{"name": "a", "processors": "0x000000000000000f", "output_processors": "0xf0"},
              {"name": "b", "processors": "0xf0", "output_processors": "0x000000000000000f"}]
    draw.processor_map(layers, 64, 4, "max78000", tmp_path / "map.png")
    picture = mpimg.imread(tmp_path / "map.png")
    assert picture.shape[1] > picture.shape[0] > 50
    assert len(np.unique(picture.reshape(-1, picture.shape[2]), axis=0)) > 4
