"""The build writes the MAX7800x accelerator program: for mnist_extrasmall (the published
model imported with `edgebuild import-ai8x`), stage `accelerator` produces an MSDK project in
build/<name>/max7800x/ that programs the device exactly as the vendor's synthesis tool's
project does (its canonical JSON is committed in tests/data/ai8x/), and the report says
which code runs where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, build_json, run_cli

from edgebuild.build import contracts
from edgebuild.manifest import Manifest
from edgebuild.pipeline.stages import STAGES
from edgebuild.pipeline.stages import accelerator as stage
from edgebuild.report import reportpage
from edgebuild.targets.max7800x.program import build, reader, record, text

GOLDEN = Path(__file__).resolve().parent / "data" / "ai8x" / "mnist-extrasmall" / "program.json"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("program")
    (root / "manifests").mkdir()
    shutil.copy(EXAMPLES / "mnist_extrasmall.yaml", root / "manifests")
    shutil.copytree(EXAMPLES / "mnist_extrasmall", root / "manifests" / "mnist_extrasmall")
    return root


def test_the_stage_lists_the_renderers_files():
    assert stage.FILES == text.FILES and stage.PROJECT == record.PROJECT
    assert STAGES["accelerator"].exports == tuple(f"max7800x/{name}" for name in text.FILES)


@pytest.mark.slow
def test_building_mnist_extrasmall_writes_izers_program(project):
    outcomes = build_json(project, "--until", "accelerator")["mnist_extrasmall"]
    assert outcomes["accelerator"]["status"] == "built"
    build = project / "build" / "mnist_extrasmall"
    assert sorted(p.name for p in (build / "max7800x").iterdir()) == sorted(text.FILES)
    assert reader.read(build / "max7800x") == json.loads(GOLDEN.read_text())
    compared = run_cli(["compare-ai8x", "build/mnist_extrasmall/max7800x", str(GOLDEN)], project)
    assert compared.returncode == 0 and compared.stdout.startswith("identical"), compared
    made = record.ProgramRecord.load(build / "accelerator")
    assert (made.layers, made.quadrants, made.bias_bytes, made.output_words) == (4, (0,), 10, 10)


def test_a_cpu_target_has_no_accelerator_stage(project):
    manifest = (project / "manifests" / "mnist_extrasmall.yaml").read_text()
    (project / "manifests" / "cpu.yaml").write_text(
        manifest.replace("name: mnist_extrasmall", "name: cpu")
        .replace("device: max78000", "device: cortex-m4").split("\nplacement:\n")[0] + "\n"
        + "kat: {input: mnist_extrasmall/input.npy, expected: mnist_extrasmall/expected.npy}\n")
    outcomes = build_json(project, "manifests/cpu.yaml", "--until", "plan")["cpu"]
    assert "accelerator" not in outcomes and "plan" in outcomes


@pytest.mark.slow
def test_the_report_says_which_code_runs_where(project):
    build_json(project, "manifests/mnist_extrasmall.yaml")
    report = json.loads((project / "build" / "mnist_extrasmall" / "report.json").read_text())
    accelerator = report["accelerator"]
    assert accelerator["program"]["project"] == "max7800x/"
    assert accelerator["program"]["layers"] == 4
    assert accelerator["emulation"] == "codegen/"


def test_a_layer_the_generator_cannot_program_is_refused_not_miscompiled():
    """A dilated 2-D convolution passes MAX78002's limits (its profile allows dilation), but
    the vendor's tool programs dilation for conv1d only, so the generator has no register
    values to match: the stage records why instead of writing a program that computes
    something else."""
    manifest = Manifest.model_validate({
        "name": "dilated", "model": {"input": [4, 8, 8], "layers": [
            {"name": "a", "op": "conv2d", "out": 4, "kernel": 3, "pad": 2, "dilation": 2,
             "act": "relu"},
            {"name": "fc", "op": "linear", "out": 3, "flatten": True, "wide": True}]},
        "target": {"device": "max78002"}, "kat": {"input": "x.npy"}})
    with pytest.raises(NotImplementedError, match="'a': dilated conv2d"):
        build.for_manifest(manifest, {"a": 8, "fc": 8}, {}, np.zeros((4, 8, 8)), np.zeros(3))
    refused = record.ProgramRecord.refused("max78000", "layer 'sum': add")
    assert record.ProgramRecord.from_json(refused.to_json()) == refused
    assert contracts.violation(refused.to_json(), "accelerator.v1") is None


def test_a_wide_dilated_conv1d_needs_room_before_its_output():
    """A conv1d whose dilated span exceeds 9 taps runs on the 2-D hardware, whose 3-tap
    kernel writes an unused first row (dilation words) just before the output offset. The
    placement takes those bytes while the layer runs: at offset 0 there is no room, over
    the input the layer still reads they would clobber it; both are the placement's
    problems (at `check`, before any training), and an automatic offset leaves the room."""
    from edgebuild.model import folding
    from edgebuild.targets.max7800x import layout

    def manifest(placement):
        return Manifest.model_validate({
            "name": "dilated", "model": {"input": [4, 40], "layers": [
                {"name": "a", "op": "conv1d", "out": 8, "kernel": 3, "dilation": 5,
                 "act": "relu"},
                {"name": "fc", "op": "linear", "out": 3, "flatten": True, "wide": True}]},
            "placement": placement, "target": {"device": "max78000"},
            "kat": {"input": "x.npy"}})

    def problems(placement):
        m = manifest(placement)
        return layout.problems(m, folding.fold_layers(m.model.layers)[0], {"a": 8, "fc": 8})

    found = problems({"a": {"out_offset": 0}})
    assert [path for path, _ in found] == [("placement", "a", "out_offset")]
    assert "an unused row of 20 bytes" in found[0][1] and "at least 0x0014" in found[0][1]
    # on the input's processors (40 words from 0, read by `a` itself) the lead may not
    # reach into the input
    mine = {"output_processors": 0xFF}
    over = problems({"a": {"out_offset": 0xA0 + 0x10, **mine}})
    assert [path for path, _ in over] == [("placement", "a", "out_offset")]
    assert "overwrites the model input" in over[0][1]
    assert problems({"a": {"out_offset": 0xA0 + 0x14, **mine}}) == []
    weights = {"a.weight": np.ones((8, 4, 3), np.int8), "fc.weight": np.ones((3, 8 * 30), np.int8)}
    with pytest.raises(ValueError, match="at least 0x0014"):
        build.for_manifest(manifest({"a": {"out_offset": 0}}), {"a": 8, "fc": 8}, weights,
                           np.zeros((4, 40)), np.zeros(3))
    made = build.for_manifest(manifest({}), {"a": 8, "fc": 8}, weights, np.zeros((4, 40)),
                              np.zeros(3))
    assert made.summary[0].startswith("4x8x5, no pooling, conv2d with kernel size 3x3")


def test_the_report_page_says_which_code_runs_where():
    made = record.ProgramRecord("max78000", text.FILES, 4, (0,), 2536, 10, 10)
    page = reportpage._where({"program": made.to_json(), "emulation": "codegen/"})
    assert "MSDK project in <code>max7800x/</code>" in page and "4 layers" in page
    assert "emulation of the same network is in <code>codegen/</code>" in page
    refused = record.ProgramRecord.refused("max78002", "no address map")
    page = reportpage._where({"program": refused.to_json(), "emulation": "codegen/"})
    assert page.startswith("<p>No accelerator program: no address map;")
    assert reportpage._where({"device": "max78000"}) == ""
