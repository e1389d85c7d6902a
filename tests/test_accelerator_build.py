"""Accelerator builds end to end: device numbers, placement artifacts, the exported network
description, the imported reference model's known answer, and what a placement edit reruns."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, build_json, example_project, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory, examples_build) -> Path:
    return example_project(tmp_path_factory.mktemp("accel"), examples_build,
                           "digits_max78000", "mnist_extrasmall")


def test_imported_model_reproduces_the_toolchains_known_answer(project):
    build = project / "build" / "mnist_extrasmall"
    report = json.loads((build / "report.json").read_text())
    assert report["metrics"]["kat_vs_reference_mismatches"] == 0
    assert report["metrics"]["c_vs_reference"]["mismatches"] == 0
    assert report["metrics"]["float_accuracy"] is None  # nothing was trained
    kat = json.loads((build / "kat" / "kat.json").read_text())
    assert kat["vectors"] == "known answer"
    expected = np.load(EXAMPLES / "mnist_extrasmall" / "expected.npy").reshape(1, -1)
    assert np.array_equal(np.load(build / "kat" / "outputs.npy"), expected)  # the host C's output
    assert not (build / "train").exists() and not (build / "qat").exists()


def test_device_number_format_in_quantized_weights(project):
    from edgebuild.core import arrays

    build = project / "build" / "digits_max78000"
    quant = json.loads((build / "quantize" / "quant.json").read_text())
    assert quant["rounding"] == "half_up/trunc" and quant["device"] == "max78000"
    weights = arrays.load(build / "quantize" / "weights.npz")
    for row in quant["layers"]:
        bias = weights[f"{row['name']}.bias"].astype(np.int64)
        assert not (bias % 128).any() and (bias // 128).min() >= -128 and (bias // 128).max() <= 127
        assert -15 - (8 - row["bits"]) <= row["scale_exp"] <= 15 - (8 - row["bits"])
    report = json.loads((build / "report.json").read_text())
    assert report["metrics"]["int_accuracy"] >= 0.95
    assert report["accelerator"]["device"] == "max78000"
    assert "kernel memory" in report["accelerator"]["maps"]
    assert "data_memory.png" not in (build / "report.html").read_text()  # embedded, not linked
    assert '<h2>Accelerator: max78000</h2>' in (build / "report.html").read_text()
    assert '<img alt="data memory"' in (build / "report.html").read_text()
    occupancy = report["accelerator"]["occupancy"]
    assert report["headline"]["accelerator"]["data_memory"]["used"] == \
        sum(occupancy["data_by_instance"]) > 0


def test_exported_network_yaml_reimports_to_the_same_placement(project, tmp_path):
    import yaml

    build = project / "build" / "digits_max78000"
    exported = build / "ai8x" / "network.yaml"
    assert exported.is_file()
    checkpoint = build / "ai8x" / "checkpoint-q.pth.tar"  # the vendor's tool reads the pair
    result = run_cli(["import-ai8x", str(exported), "--input", "1,8,8", "--name", "again",
                      "--checkpoint", str(checkpoint), "-o", str(tmp_path)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    again = yaml.safe_load((tmp_path / "again.yaml").read_text())
    placement = json.loads((build / "plan" / "placement.json").read_text())
    for layer in placement["layers"]:
        entry = again["placement"][layer["name"]]
        assert int(str(entry["processors"]), 0) == int(layer["processors"], 16)
        assert entry["out_offset"] == layer["out_offset"]
    _same_quantized_weights(build, tmp_path / "again" / "weights.npz")


def _same_quantized_weights(build, imported) -> None:
    """The exported checkpoint carries the trained model's integer weights, biases, widths
    and shifts exactly (read back through the importer's checkpoint arithmetic)."""
    from edgebuild.core import arrays

    trained = arrays.load(build / "quantize" / "weights.npz")
    again = arrays.load(imported)
    quant = json.loads((build / "quantize" / "quant.json").read_text())
    for row in quant["layers"]:
        name = row["name"]
        assert np.array_equal(again[f"{name}.weight"], trained[f"{name}.weight"])
        if f"{name}.bias" in trained:
            assert np.array_equal(again[f"{name}.bias"], trained[f"{name}.bias"])
        assert int(again[f"{name}.bits"]) == row["bits"]
        assert int(again[f"{name}.scale_exp"]) == row["scale_exp"]


def test_editing_placement_reruns_only_planning_and_after(project):
    path = project / "manifests" / "digits_max78000.yaml"
    original = path.read_text()
    try:
        path.write_text(original.replace("out_offset: 0x4000", "out_offset: 0x2000"))
        result = build_json(project, "--cache-dir", str(project / "cache"))
        statuses = {s: v["status"] for s, v in result["digits_max78000"].items()}
        assert {statuses[s] for s in ("validate", "data", "train", "qat", "quantize",
                                      "evaluate")} == {"uptodate"}
        assert statuses["plan"] == "built"
        placement = json.loads((project / "build" / "digits_max78000" / "plan" /
                                "placement.json").read_text())
        assert placement["layers"][0]["out_offset"] == 0x2000
        assert placement["layers"][0]["origin"]["out_offset"] == "given"
    finally:
        path.write_text(original)
