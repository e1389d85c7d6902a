"""End to end with a transposed convolution and a reshape: manifest -> train -> qat ->
quantize -> evaluate -> plan -> C (Cortex-M4 target: optimized conv kernels next to the
reference transposed-conv loops) -> KAT on every test sample. About 15 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_json

pytestmark = pytest.mark.slow

UPSAMPLING = """\
name: up
seed: 3
dataset: {format: sklearn-digits}
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu, pool: {mode: max, size: 2}}
    - {name: up, op: conv_transpose2d, out: 8, bias: false}
    - {name: bn, op: batchnorm, act: relu}
    - {name: conv2, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu, pool: {mode: max, size: 2}}
    - {name: as_1d, op: reshape, shape: [8, 16]}
    - {name: conv3, op: conv1d, out: 8, kernel: 3, pad: 1, act: relu}
    - {name: fc, op: linear, out: 10, flatten: true, wide: true}
train: {epochs: 1, batch: 64, optimizer: {adam: {lr: 0.01}}}
qat: {epochs: 1}
target: {device: cortex-m4, memory: {l1: L1}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("upsampling")
    (root / "manifests").mkdir()
    (root / "manifests" / "up.yaml").write_text(UPSAMPLING.replace("L1", "16KiB"))
    result = build_json(root)["up"]
    assert {stage["status"] for stage in result.values()} == {"built"}
    return root


def test_c_and_fake_quant_equal_the_integer_reference(project):
    build = project / "build" / "up"
    metrics = json.loads((build / "report.json").read_text())["metrics"]
    assert metrics["int_vs_fakequant_mismatches"] == 0
    assert metrics["c_vs_reference"]["mismatches"] == 0
    assert metrics["c_vs_reference"]["samples"] > 300  # every test sample, not one
    graph = json.loads((build / "validate" / "graph.json").read_text())
    shapes = {node["name"]: node["out_shape"] for node in graph["nodes"]}
    assert shapes["up"] == [8, 8, 8] and shapes["as_1d"] == [8, 16]


def test_transposed_conv_and_reshape_in_the_c_project(project):
    build = project / "build" / "up"
    cnn = (build / "codegen" / "model" / "cnn.c").read_text()
    assert "eb_conv_transpose2d(&P_up, T_conv1, up_w_up, up_b_up, T_up);" in cnn  # BN: a bias
    assert "EB_CONV2D(&P_conv3, T_conv2," in cnn  # the reshape is a view of conv2's output
    plan = json.loads((build / "plan" / "plan.json").read_text())
    assert plan["views"] == {"as_1d": "conv2"}
    assert not any(step["layer"] == "as_1d" for step in plan["steps"])


def test_a_small_l1_tiles_the_transposed_conv_and_reruns_only_plan_and_after(project):
    path = project / "manifests" / "up.yaml"
    path.write_text(UPSAMPLING.replace("L1", "1KiB"))  # 'up' needs 1248 bytes whole
    try:
        statuses = {s: v["status"] for s, v in build_json(project)["up"].items()}
        assert {statuses[s] for s in ("train", "qat", "quantize", "evaluate")} == {"uptodate"}
        assert statuses["plan"] == statuses["kat"] == "built"
        build = project / "build" / "up"
        plan = json.loads((build / "plan" / "plan.json").read_text())
        tile = next(step["tile"] for step in plan["steps"] if step["layer"] == "up")
        assert tile["tiled"] and tile["l1_bytes"] <= 1024 and "up" in plan["memory"][
            "tiled_layers"]
        cnn = (build / "codegen" / "model" / "cnn.c").read_text()
        assert "eb_conv_transpose2d_tiled(&P_up, &T_TILE_up, eb_kt_up, 0," in cnn
        report = json.loads((build / "report.json").read_text())
        assert report["metrics"]["c_vs_reference"]["mismatches"] == 0
    finally:
        path.write_text(UPSAMPLING.replace("L1", "16KiB"))
