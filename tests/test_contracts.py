"""Typed contracts between stages: every JSON file a stage writes is a record's `to_json`,
read back downstream through the record's loader, and matches a versioned JSON Schema
(schemas/artifacts/<artifact>.v<N>.schema.json) checked right after the stage runs.

The round trips run on real artifacts: `manifests/digits.yaml` built with few epochs (a
CPU target: graph, model, data, metrics, quant, evaluation, plan, kat, report), and —
slow — a MAX78000 build (placement) and an on-device training build (layout, backward,
trace, finetune, memory, ondevice_kat).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from edgebuild.build import contracts
from edgebuild.core.errors import StageFailed
from edgebuild.core.resources import schemas_dir
from edgebuild.data.info import DataInfo
from edgebuild.manifest import Model
from edgebuild.manifest import schema as manifest_schema
from edgebuild.memory.plan import MemoryPlan
from edgebuild.model.evaluation import Evaluation
from edgebuild.model.graph import Graph
from edgebuild.model.quantization import Quantization
from edgebuild.ondevice.finetune import FineTune, LossTrace
from edgebuild.ondevice.memory import TrainingMemory
from edgebuild.ondevice.schedule import Schedule
from edgebuild.ondevice.wof import FileLayout
from edgebuild.pipeline.stages import STAGES
from edgebuild.report.katresult import KatResult, Skipped
from edgebuild.report.report import Report, headline_of
from edgebuild.report.trainingkat import TrainingKat
from edgebuild.targets.max7800x.placement import Placement
from edgebuild.targets.max7800x.placement.occupancy import occupancy
from edgebuild.targets.max7800x.profile import profile
from edgebuild.targets.max7800x.program.record import ProgramRecord
from edgebuild.train.metrics import Metrics

SCHEMAS = schemas_dir() / "artifacts"
BASE_ID = "https://edgebuild.dev/schemas/artifacts/"

# schema -> (the record that writes and reads it, whether its file is dumped key-sorted)
RECORDS = {
    "graph.v1": (Graph, False), "model.v1": (Model, True), "data.v1": (DataInfo, True),
    "metrics.v1": (Metrics, True), "quant.v1": (Quantization, True),
    "evaluation.v1": (Evaluation, True), "plan.v1": (MemoryPlan, True),
    "placement.v1": (Placement, True), "kat.v1": (KatResult, True),
    "layout.v1": (FileLayout, False), "backward.v1": (Schedule, False),
    "trace.v1": (LossTrace, False), "finetune.v1": (FineTune, True),
    "memory.v1": (TrainingMemory, False), "ondevice_kat.v1": (TrainingKat, True),
    "report.v1": (Report, True), "accelerator.v1": (ProgramRecord, True),
}


def declared() -> dict[str, tuple[str, str]]:
    """schema -> (stage, file) for every artifact a stage declares."""
    return {name: (stage.name, file) for stage in STAGES.values()
            for file, name in stage.artifacts.items()}


# ---- the schemas ------------------------------------------------------------------------

def test_every_declared_artifact_has_a_schema_and_every_schema_is_declared():
    files = {path.name.removesuffix(".schema.json") for path in SCHEMAS.glob("*.schema.json")}
    assert set(declared()) == files
    assert all(re.fullmatch(r"[a-z_]+\.v[1-9][0-9]*", name) for name in files), files


def test_every_declared_artifact_has_a_record():
    assert set(RECORDS) == set(declared())
    for record, _ in RECORDS.values():
        assert dataclasses.is_dataclass(record) or record is Model
        assert all(hasattr(record, method) for method in ("to_json", "from_json", "load"))


def test_each_file_is_declared_by_one_stage_under_one_name():
    files = [(stage.name, file) for stage in STAGES.values() for file in stage.artifacts]
    assert len(files) == len(set(files))
    assert all(file.endswith(".json") for _, file in files)


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_each_schema_is_a_valid_draft_2020_12_schema_named_by_its_id(path):
    document = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] == BASE_ID + path.name
    assert document["type"] == "object" and document["additionalProperties"] is False
    assert document["title"] and document["description"]


def test_the_model_schema_is_generated_from_the_model_records():
    assert (SCHEMAS / "model.v1.schema.json").read_text() == \
        manifest_schema.render_model_artifact(), (
        "schemas/artifacts/model.v1.schema.json is stale: regenerate it with "
        "`python scripts/regen.py schemas` (a format change that breaks readers adds "
        "model.v2 instead)")


def test_a_stale_generated_schema_is_named_with_the_command_that_remakes_it(
        tmp_path, monkeypatch):
    """An op added without regenerating: the stage that writes model.json fails on the
    committed schema, and says it is stale and how to remake it."""
    message = _check(tmp_path, {"layers": []}, "model.json", "model.v1")
    assert "regen" not in message  # the committed schema is the code's
    monkeypatch.setattr(manifest_schema, "render_model_artifact", lambda: "{}")
    message = _check(tmp_path, {"layers": []}, "model.json", "model.v1")
    assert message.endswith("model.v1.schema.json is stale (the records it is generated from "
                            "have changed): in edgebuild's repository, run "
                            "`python scripts/regen.py schemas`"), message


def test_stages_load_without_jsonschema():
    """A no-op build runs no stage: the schemas and jsonschema are loaded lazily."""
    probe = ("import sys\n"
             "from edgebuild.build import builder, contracts, runner\n"
             "from edgebuild.pipeline.stages import STAGES\n"
             "assert 'jsonschema' not in sys.modules and 'referencing' not in sys.modules\n"
             "assert contracts.validator.cache_info().currsize == 0\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr


# ---- rejecting a bad artifact -----------------------------------------------------------

def _data_info() -> dict:
    return {"classes": ["0", "1"], "sample_shape": [1, 8, 8],
            "counts": {"train": 10, "val": 2, "test": 4}, "input_scale": 1 / 128,
            "normalize": {"method": "minmax", "offset": [8.0], "scale": [8.0]}}


def _check(tmp_path: Path, document: dict, file: str = "data.json",
           name: str = "data.v1") -> str:
    (tmp_path / file).write_text(json.dumps(document))
    with pytest.raises(StageFailed) as failure:
        contracts.check("data", {file: name}, tmp_path)
    return str(failure.value)


def test_a_valid_artifact_passes(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps(DataInfo.from_json(_data_info()).to_json()))
    contracts.check("data", {"data.json": "data.v1", "absent.json": "data.v1"}, tmp_path)


def test_a_wrong_type_names_the_file_the_path_and_the_rule(tmp_path):
    document = _data_info()
    document["counts"]["test"] = "4"
    message = _check(tmp_path, document)
    assert message.startswith("stage data: data.json does not match schema data.v1")
    assert "$.counts.test" in message and "'4' is not of type 'integer'" in message
    assert "properties/counts/properties/test/type" in message


def test_a_missing_key_is_rejected(tmp_path):
    document = _data_info()
    del document["normalize"]["scale"]
    message = _check(tmp_path, document)
    assert "at $.normalize: 'scale' is a required property" in message


def test_an_unknown_key_and_a_value_outside_its_enum_are_rejected(tmp_path):
    document = {**_data_info(), "extra": 1}
    assert "'extra' was unexpected" in _check(tmp_path, document)
    document = _data_info()
    document["normalize"]["method"] = "zscore"
    assert "$.normalize.method" in _check(tmp_path, document)


def test_a_file_that_is_not_json_is_a_stage_failure(tmp_path):
    (tmp_path / "data.json").write_text("{")
    with pytest.raises(StageFailed, match="data.json is not JSON"):
        contracts.check("data", {"data.json": "data.v1"}, tmp_path)


def _kat(firmware: dict) -> dict:
    return {"c_vs_reference": {"samples": 4, "mismatches": 0, "first_mismatches": []},
            "cortex_m4": {"text": 900, "data": 8, "bss": 64, "instructions": 1730123,
                          "insn_per_mac": 1.5, "code_bytes": 400, "kat": "pass",
                          "reference_instructions": 8995006, "reference_insn_per_mac": 7.8,
                          **firmware}, "vectors": "integer reference"}


def test_each_instruction_count_names_its_kernels():
    """kat.json says which kernels `instructions` counts; the summary (the stage's log line)
    labels both counts. A kat.json written before `kernels` existed still loads."""
    for kernels, summary in [
            ("optimized", "1,730,123 instructions (optimized kernels; reference kernels: "
                          "8,995,006 instructions)"),
            ("reference", "1,730,123 instructions (reference kernels)")]:
        document = _kat({"kernels": kernels})
        assert contracts.violation(document, "kat.v1") is None
        result = KatResult.from_json(document)
        assert result.to_json() == document and result.cortex_m4.summary() == summary
    older = _kat({})
    assert contracts.violation(older, "kat.v1") is None
    assert KatResult.from_json(older).to_json() == older
    assert "(kernels not recorded; reference kernels" in KatResult.from_json(
        older).cortex_m4.summary()
    assert contracts.violation(_kat({"kernels": "fast"}), "kat.v1") is not None


def test_cycles_and_layers_are_optional_and_round_trip():
    """Estimated cycles and per-layer figures (kat.json and report.json metrics.cortex_m4):
    written with derived per-MAC figures, read back into the same record; a file without
    them (older) still loads."""
    layer = {"layer": "conv1", "op": "conv2d", "macs": 9216, "weight_bytes": 208,
             "instructions": 57303, "cycles": 81090, "insn_per_mac": 6.2178,
             "cycles_per_mac": 8.7988, "reference_instructions": 315870,
             "reference_cycles": 436532, "reference_insn_per_mac": 34.2741,
             "reference_cycles_per_mac": 47.3668}
    pool = {"layer": "pool", "op": "pool2d", "macs": 0, "weight_bytes": 0,
            "instructions": 900, "cycles": 1200, "insn_per_mac": None, "cycles_per_mac": None}
    document = _kat({"kernels": "optimized", "cycles": 2500000, "cycles_per_mac": 2.2,
                     "reference_cycles": 12000000, "reference_cycles_per_mac": 10.4,
                     "layers": [layer, pool]})
    assert contracts.violation(document, "kat.v1") is None
    result = KatResult.from_json(document)
    assert result.to_json() == document
    assert KatResult.from_json(result.to_json()) == result
    assert result.cortex_m4.summary() == (
        "1,730,123 instructions, 2,500,000 est. cycles (optimized kernels; reference kernels: "
        "8,995,006 instructions, 12,000,000 est. cycles)")
    unpaired = _kat({"cycles": 2500000})
    assert contracts.violation(unpaired, "kat.v1") is not None
    half_layer = _kat({"cycles": 1, "cycles_per_mac": 1.0,
                       "layers": [{**layer, "reference_cycles": None}]})
    assert contracts.violation(half_layer, "kat.v1") is not None


def test_a_declared_artifact_without_a_schema_is_a_stage_failure(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps(_data_info()))
    with pytest.raises(StageFailed, match="data.json: no schema data.v9"):
        contracts.check("data", {"data.json": "data.v9"}, tmp_path)


def test_a_stage_writing_a_bad_artifact_fails_and_publishes_nothing(digits_project, tmp_path,
                                                                    monkeypatch):
    from edgebuild.build import builder
    from edgebuild.pipeline import validation

    checked = validation.load(digits_project / "manifests" / "small.yaml")
    stage = STAGES["validate"]

    def broken(ctx) -> None:
        stage.run(ctx)
        graph = json.loads((ctx.out / "graph.json").read_text())
        (ctx.out / "graph.json").write_text(json.dumps({**graph, "macs": "many"}))

    monkeypatch.setitem(STAGES, "validate", dataclasses.replace(stage, run=broken))
    with pytest.raises(StageFailed) as failure:
        builder.realize(checked, "validate", tmp_path / "build", tmp_path / "cache")
    assert "stage validate: graph.json does not match schema graph.v1" in str(failure.value)
    assert "at $.macs: 'many' is not of type 'integer'" in str(failure.value)
    assert not list((tmp_path / "cache").glob("validate/*/*/meta.json"))
    assert not (tmp_path / "build" / "validate").exists()


# ---- round trips on real artifacts ------------------------------------------------------

@pytest.fixture(scope="module")
def digits_build(examples_build: Path) -> Path:
    """The examples' own build (conftest.examples_build), read only."""
    return examples_build


@pytest.fixture(scope="module")
def device_builds(examples_build: Path) -> Path:
    return examples_build


def artifacts_of(build: Path) -> list[tuple[str, Path]]:
    """(schema, file) of every declared artifact a build wrote."""
    return [(name, build / stage / file) for name, (stage, file) in sorted(declared().items())
            if (build / stage / file).is_file()]


def round_trip(name: str, path: Path) -> None:
    """The file is its record's `to_json`, byte for byte, and the record survives
    to_json -> from_json -> to_json; the file matches its schema."""
    record_type, sort_keys = RECORDS[name]
    text = path.read_text()
    record = record_type.load(path.parent)
    assert json.dumps(record.to_json(), indent=1, sort_keys=sort_keys) + "\n" == text, path
    assert record_type.from_json(record.to_json()).to_json() == record.to_json()
    assert record_type.from_json(record.to_json()) == record
    assert contracts.violation(json.loads(text), name) is None


def test_cpu_build_artifacts_round_trip_through_their_records(digits_build):
    found = artifacts_of(digits_build / "digits")
    assert {name for name, _ in found} == set(RECORDS) - {
        "placement.v1", "layout.v1", "backward.v1", "trace.v1", "finetune.v1", "memory.v1",
        "ondevice_kat.v1", "accelerator.v1"}
    assert (digits_build / "digits" / "train" / "metrics.json").is_file()
    for name, path in found + [("metrics.v1", digits_build / "digits" / "train" / "metrics.json")]:
        round_trip(name, path)


def test_the_report_is_assembled_from_the_upstream_records(digits_build):
    built = digits_build / "digits"
    report = Report.load(built / "report")
    assert report.layers == Graph.load(built / "validate").nodes
    assert report.quantization.layers == Quantization.load(built / "quantize").layers
    assert report.metrics.memory.totals == MemoryPlan.load(built / "plan").memory
    assert report.metrics.cortex_m4 == KatResult.load(built / "kat").cortex_m4
    if not isinstance(report.metrics.cortex_m4, Skipped):  # digits: a cortex-m4 target
        assert report.metrics.cortex_m4.kernels == "optimized"
    assert report.float_training.epochs == Metrics.load(built / "train").epochs
    assert report.confusion.matrix == Evaluation.load(built / "evaluate").confusion
    assert report.accelerator is None and report.metrics.ondevice is None
    # the headline judges the same figures against the manifest's budgets
    assert report.headline == headline_of(report.metrics, "cortex-m4", 512 * 1024, None)
    assert report.headline.ram.budget == report.metrics.memory.totals.l2_budget == 128 * 1024


def test_a_corrupted_real_artifact_is_rejected(digits_build, tmp_path):
    plan = json.loads((digits_build / "digits" / "plan" / "plan.json").read_text())
    plan["steps"][0]["bytes"] = "12"
    message = _check(tmp_path, plan, "plan.json", "plan.v1")
    assert "plan.json" in message and "$.steps[0].bytes" in message and "type" in message
    quant = json.loads((digits_build / "digits" / "quantize" / "quant.json").read_text())
    del quant["layers"][0]["shift"]
    message = _check(tmp_path, quant, "quant.json", "quant.v1")
    assert "at $.layers[0]: 'shift' is a required property" in message


@pytest.mark.slow
def test_device_and_ondevice_artifacts_round_trip_through_their_records(device_builds):
    found = artifacts_of(device_builds / "digits_max78000") + \
        artifacts_of(device_builds / "motions_ondevice")
    assert {name for name, _ in found} == set(RECORDS)
    for name, path in found:
        round_trip(name, path)
    report = Report.load(device_builds / "digits_max78000" / "report")
    assert report.accelerator.placement == Placement.load(
        device_builds / "digits_max78000" / "plan")
    assert report.accelerator.occupancy == occupancy(report.accelerator.placement,
                                                     profile("max78000"))
    assert report.headline.accelerator.data_memory.used == report.accelerator.occupancy.data_used
    assert report.accelerator.program == ProgramRecord.load(
        device_builds / "digits_max78000" / "accelerator")
    assert report.accelerator.emulation == "codegen/"
    ondevice = Report.load(device_builds / "motions_ondevice" / "report").metrics.ondevice
    headline = Report.load(device_builds / "motions_ondevice" / "report").headline.ondevice
    assert headline.ram.used == ondevice.memory.l2_bytes  # the L1 buffer is not L2
    assert ondevice.memory_choices == TrainingMemory.load(
        device_builds / "motions_ondevice" / "ondevice").choices
