"""End-to-end: manifest -> train -> qat -> quantize -> evaluate -> report, and the caching
promises of the training stages. Small epochs; marked slow (CI still runs them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import build_json, run_cli
from test_linking import link_and_run

pytestmark = pytest.mark.slow

SMALL = """\
name: small
seed: 3
dataset: {{format: sklearn-digits}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, bias: false}}
    - {{name: bn1, op: batchnorm, act: relu}}
    - {{name: conv2, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu, pool: {{mode: max, size: 2}}}}
    - {{name: drop, op: dropout, p: 0.1}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: {epochs}, batch: 64, optimizer: {{adam: {{lr: 0.01}}}}}}
qat: {{epochs: {qat_epochs}, weight_bits: 8}}
quantize: {{rounding: {rounding}}}
"""


def manifest(**changes) -> str:
    values = {"epochs": 4, "qat_epochs": 1, "rounding": "half_up", **changes}
    return SMALL.format(**values)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    (root / "manifests").mkdir()
    (root / "manifests" / "small.yaml").write_text(manifest())
    first = build_json(root)["small"]
    assert {s["status"] for s in first.values()} == {"built"}
    return root


def statuses(result: dict) -> dict[str, str]:
    return {stage: v["status"] for stage, v in result["small"].items()}


def test_report_contract(project):
    report = json.loads((project / "build" / "small" / "report.json").read_text())
    metrics = report["metrics"]
    for key in ("float_accuracy", "qat_accuracy", "int_accuracy", "params", "macs",
                "int_vs_fakequant_mismatches"):
        assert key in metrics
    assert metrics["int_vs_fakequant_mismatches"] == 0
    assert metrics["float_accuracy"] > 0.8 and metrics["int_accuracy"] > 0.8
    assert metrics["params"] == 8 * 9 + 16 + 16 * 8 * 9 + 16 + 16 * 16 * 10 + 10
    assert [row["name"] for row in report["quantization"]["layers"]] == ["conv1", "conv2", "fc"]
    assert all("saturated_pct" in row and "shift" in row for row in report["quantization"]["layers"])
    html = (project / "build" / "small" / "report.html").read_text()
    assert "<img" in html and 'id="hl-int8-accuracy" data-key="accuracy.int8"' in html
    m4 = metrics["cortex_m4"]
    if "skipped" not in m4:  # a host target: its firmware has the reference kernels only
        assert m4["kernels"] == "reference"
        assert f"<td>reference (this firmware)</td><td>{m4['instructions']:,}</td>" in html


def test_editing_qat_keeps_training(project):
    path = project / "manifests" / "small.yaml"
    path.write_text(manifest(qat_epochs=2))
    result = statuses(build_json(project))
    assert result["train"] == "uptodate" and result["data"] == "uptodate"
    assert result["qat"] == "built"
    path.write_text(manifest())
    result = statuses(build_json(project))
    assert result["train"] == "uptodate" and result["qat"] == "restored"


def test_editing_rounding_keeps_training_and_qat(project):
    path = project / "manifests" / "small.yaml"
    path.write_text(manifest(rounding="floor"))
    result = statuses(build_json(project))
    assert result["train"] == "uptodate" and result["qat"] == "uptodate"
    assert result["quantize"] == "built" and result["evaluate"] == "built"
    report = json.loads((project / "build" / "small" / "report.json").read_text())
    assert report["quantization"]["rounding"] == "floor"
    assert report["metrics"]["int_vs_fakequant_mismatches"] == 0
    path.write_text(manifest())
    result = statuses(build_json(project))
    assert result["quantize"] == "restored" and result["train"] == "uptodate"


def test_training_is_deterministic(project, tmp_path):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(manifest())
    result = build_json(tmp_path, "--until", "qat")["small"]
    assert result["train"]["status"] == "built"
    for stage, name in (("train", "float.npz"), ("qat", "folded.npz")):
        assert (tmp_path / "build" / "small" / stage / name).read_bytes() == \
            (project / "build" / "small" / stage / name).read_bytes()


NAN_AT_EPOCH_3 = """
import math, sys
import edgebuild.train.loop as training
real_epoch, calls = training._epoch, []
def epoch(*args, **kwargs):
    calls.append(1)
    loss, acc = real_epoch(*args, **kwargs)
    return (math.nan if len(calls) == 3 else loss), acc
training._epoch = epoch
from edgebuild.cli import main
sys.exit(main(["build"]))
"""


def test_nan_loss_stops_with_the_epoch_and_keeps_weights(tmp_path):
    """A loss that turns NaN in epoch 3 (injected: clamped models rarely diverge on their
    own) stops the build with a user error naming the epoch, keeps epoch 2's weights
    outside the cache, and publishes nothing."""
    import subprocess
    import sys

    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(manifest(epochs=5))
    result = subprocess.run([sys.executable, "-c", NAN_AT_EPOCH_3], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stderr
    assert "NaN" in result.stderr and "epoch 3" in result.stderr
    assert "Traceback" not in result.stderr
    failed = tmp_path / "build" / "small" / "train.failed"
    assert (failed / "last_good.npz").exists() and (failed / "metrics.json").exists()
    assert len(json.loads((failed / "metrics.json").read_text())) == 2
    assert not list((tmp_path / "cache").glob("train/*/*/meta.json"))


def test_post_training_quantization_warns_with_cost(tmp_path):
    text = manifest().replace("qat: {epochs: 1, weight_bits: 8}",
                              "qat: {enabled: false, weight_bits: 4}")
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(text)
    result = run_cli(["build"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "post-training quantization" in result.stderr and "cost" in result.stderr
    report = json.loads((tmp_path / "build" / "small" / "report.json").read_text())
    assert report["metrics"]["qat_accuracy"] is None
    assert report["quantization"]["method"] == "ptq-max"
    assert report["metrics"]["int_vs_fakequant_mismatches"] == 0


@pytest.mark.parametrize("bad,message", [
    ("qat: {epochs: 1, weight_bits: 3}", "weight_bits"),
    ("qat: {epochs: 1, overrides: {nope: {weight_bits: 4}}}", "override names no"),
    ("qat: {epochs: 1, overrides: {bn1: {weight_bits: 4}}}", "override names no"),
])
def test_bad_quantization_policy(tmp_path, bad, message):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(
        manifest().replace("qat: {epochs: 1, weight_bits: 8}", bad))
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "small.yaml:" in result.stderr


def test_batchnorm_after_activation_is_rejected(tmp_path):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(manifest().replace(
        "{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, bias: false}",
        "{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}"))
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2 and "act: none" in result.stderr, result.stderr


def test_examples_meet_accuracy_targets(examples_build, tmp_path):
    names = sorted(str(p.parent.parent.relative_to(examples_build))  # each build's state
                   for p in examples_build.glob("**/.state/report.json"))
    # vowels.yaml lists two targets: one training, two builds
    assert {"digits", "vowels/cortex-m4", "digits_conv", "vowels/small_l1"} <= set(names)
    for name in names:
        metrics = json.loads((examples_build / name / "report.json").read_text())["metrics"]
        report = json.loads((examples_build / name / "report.json").read_text())
        if report["quantization"]["method"] == "imported-tflite":  # no fake-quant network:
            assert metrics["int_vs_fakequant_mismatches"] is None  # LiteRT's answer checks it
        else:
            assert metrics["int_vs_fakequant_mismatches"] == 0
        assert metrics["c_vs_reference"]["mismatches"] == 0
        if metrics["float_accuracy"] is None:  # imported: checked by the toolchain's answer
            assert metrics["kat_vs_reference_mismatches"] == 0, (name, metrics)
            assert metrics["kat_vectors"] == "known answer"
            continue
        assert metrics["float_accuracy"] - metrics["int_accuracy"] <= 0.01, (name, metrics)
        memory = metrics["memory"]
        assert memory["arena_bytes"] <= 1.05 * memory["arena_lower_bound"], (name, memory)
    small = json.loads((examples_build / "vowels/small_l1" / "report.json").read_text())
    memory = small["metrics"]["memory"]
    assert {"conv1", "conv2", "conv3"} <= set(memory["tiled_layers"])
    assert memory["l1_peak"] <= memory["l1_budget"] == 1024
    m4 = json.loads((examples_build / "digits_conv" / "report.json").read_text())[
        "metrics"]["cortex_m4"]
    if "skipped" not in m4:  # exact instruction counts: the same binary counts the same
        assert m4["insn_per_mac"] <= 1.5 and m4["reference_insn_per_mac"] > 3 * m4["insn_per_mac"]
    digits = json.loads((examples_build / "digits" / "report.json").read_text())["metrics"]
    assert digits["float_accuracy"] >= 0.97
    dscnn = json.loads((examples_build / "kws_dscnn" / "report.json").read_text())["metrics"]
    assert dscnn["int_accuracy"] >= 0.9, dscnn  # depthwise-separable, bit-exact above
    # several examples' C in one program: prefixed symbols let them link; every KAT passes
    # (Cortex-M4 kernels with depthwise and tiled layers, a stateful buffer model)
    built = {"digits": "digits", "vowels": "vowels/small_l1", "kws_dscnn": "kws_dscnn",
             "motions_stream": "motions_stream"}  # C prefix -> build
    together = list(built)
    program = tmp_path / "together"
    for name, build in built.items():
        shutil.copytree(examples_build / build / "codegen" / "model", program / name)
        shutil.copy(examples_build / build / "codegen" / "kat" / "kat_vectors.h", program / name)
    ran = link_and_run(program, together)
    assert ran.returncode == 0 and ran.stdout.split() == [
        word for name in together for word in (f"{name}_", "0")], ran.stdout
