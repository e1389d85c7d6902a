"""End-to-end for the generated C project: KAT on every test sample, reproducibility,
export into a user's tree, budgets checked before compiling, a failing compiler."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from conftest import build_json, run_cli

pytestmark = pytest.mark.slow

MANIFEST = """\
name: tiny
seed: 5
dataset: {{format: sklearn-digits, limit: {{train: 600, test: 150}}}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}}
    - {{name: conv2, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu, pool: {{mode: avg, size: 2}}}}
    - {{name: skip, op: conv2d, out: 8, kernel: 1, inputs: [conv2], act: relu}}
    - {{name: sum, op: add, inputs: [conv2, skip]}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: 2, batch: 64}}
qat: {{epochs: 1}}
target: {{device: cortex-m4, memory: {{l1: 16KiB, l2: {l2}, flash: {flash}}}}}
"""


def make(root: Path, l2: str = "64KiB", flash: str = "256KiB") -> Path:
    (root / "manifests").mkdir(parents=True, exist_ok=True)
    (root / "manifests" / "tiny.yaml").write_text(MANIFEST.format(l2=l2, flash=flash))
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = make(tmp_path_factory.mktemp("cproject"))
    result = build_json(root)["tiny"]
    assert result["kat"]["status"] == "built"
    return root


def test_kat_covers_every_test_sample(built):
    metrics = json.loads((built / "build" / "tiny" / "report.json").read_text())["metrics"]
    assert metrics["c_vs_reference"] == {"samples": 150, "mismatches": 0}
    outputs = __import__("numpy").load(built / "build" / "tiny" / "kat" / "outputs.npy")
    assert outputs.dtype.name == "int64" and outputs.shape == (150, 10)
    m4 = metrics["cortex_m4"]
    if shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm"):
        assert m4["kat"] == "pass" and m4["instructions"] > 0 and m4["insn_per_mac"] > 0
        assert m4["text"] > metrics["memory"]["weight_bytes"] and m4["code_bytes"] > 0
        # a cortex-m4 target: the count is the optimized kernels', the second the reference
        assert m4["kernels"] == "optimized" and m4["reference_instructions"] > m4["instructions"]
        html = (built / "build" / "tiny" / "report.html").read_text()
        assert f"<td>optimized (this firmware)</td><td>{m4['instructions']:,}</td>" in html
        assert f"<td>reference</td><td>{m4['reference_instructions']:,}</td>" in html
    else:
        assert "skipped" in m4
    assert metrics["memory"]["arena_bytes"] <= 1.05 * metrics["memory"]["arena_lower_bound"]


def test_the_header_turns_raw_test_samples_into_the_kat_inputs(built, tmp_path):
    """cnn.h's conversion (digits: minmax, one offset and scale) turns the raw test samples,
    as the data stage read and split them, into the known-answer vectors' inputs and into
    every test input of data.npz, bit for bit, on the host and the Cortex-M4 (QEMU)."""
    import numpy as np
    import yaml
    from test_header import run_check

    from edgebuild.data import FORMATS
    from edgebuild.manifest import Manifest
    from edgebuild.pipeline.stages import data as data_stage

    manifest = Manifest.model_validate(yaml.safe_load(MANIFEST.format(l2="64KiB",
                                                                      flash="256KiB")))
    spec = manifest.dataset
    raw = FORMATS[spec.format].load(spec, built / "manifests")
    rng = np.random.default_rng(manifest.seed)  # the data stage's split, step by step
    splits = data_stage._split(raw, spec.split, spec.limit, rng)
    with np.load(built / "build" / "tiny" / "data" / "data.npz") as arrays:
        expected = arrays["x_test"]
    project = tmp_path / "c"
    shutil.copytree(built / "build" / "tiny" / "codegen", project)
    for path in project.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    header = (project / "model" / "cnn.h").read_text()
    assert "TINY_CNN_NUM_CLASSES 10" in header and '    "9",\n};' in header
    lines = run_check(project, "tiny", splits["test"][0], expected, kat=True)
    assert lines == ["raw -> int8: 0 mismatches in 150 samples"] * len(lines)


def test_two_clean_builds_give_identical_c_projects(built, tmp_path):
    other = make(tmp_path / "again")
    build_json(other, "--until", "codegen")
    first, second = built / "build" / "tiny" / "codegen", other / "build" / "tiny" / "codegen"
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(second).as_posix() for p in second.rglob("*") if p.is_file())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    text = "".join((first / n).read_text() for n in names)
    assert str(built) not in text and str(tmp_path) not in text


def test_export_refreshes_model_files_and_keeps_user_code(built, tmp_path):
    firmware = tmp_path / "firmware" / "nn"
    firmware.mkdir(parents=True)
    (firmware / "app.c").write_text("int app(void) { return 1; }\n")
    result = run_cli(["export", "--to", str(firmware)], built)
    assert result.returncode == 0, result.stderr
    assert (firmware / "cnn.h").exists() and (firmware / "weights.c").exists()
    assert (firmware / "app.c").read_text() == "int app(void) { return 1; }\n"
    assert run_cli(["export", "--to", str(firmware)], built).returncode == 0  # refresh
    (firmware / "cnn.c").chmod(stat.S_IRUSR | stat.S_IWUSR)
    (firmware / "cnn.c").write_text("/* my edit */\n")
    refused = run_cli(["export", "--to", str(firmware)], built)
    assert refused.returncode == 2 and "edited since the last export" in refused.stderr
    assert (firmware / "cnn.c").read_text() == "/* my edit */\n"
    forced = run_cli(["export", "--to", str(firmware), "--force"], built)
    assert forced.returncode == 0 and "cnn_run" in (firmware / "cnn.c").read_text()
    assert (firmware / "app.c").exists()


def test_export_refuses_to_overwrite_foreign_files(built, tmp_path):
    (tmp_path / "cnn.h").write_text("/* someone else's */\n")
    result = run_cli(["export", "--to", str(tmp_path)], built)
    assert result.returncode == 2 and "not written by edgebuild" in result.stderr
    assert (tmp_path / "cnn.h").read_text() == "/* someone else's */\n"


@pytest.mark.parametrize("l2,flash,field,message", [
    ("512B", "256KiB", "target.memory.l2", "needs at least"),
    ("64KiB", "1KiB", "target.memory.flash", "need"),
])
def test_budgets_are_checked_before_training(tmp_path, l2, flash, field, message):
    root = make(tmp_path / "p", l2=l2, flash=flash)
    result = run_cli(["build"], root)
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and message in result.stderr and "is too small" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / "build" / "tiny" / "train").exists()  # `check` found it (memory/budget.py)


def test_failing_compiler_is_shown_and_keeps_the_good_project(built, tmp_path):
    root = tmp_path / "p"
    shutil.copytree(built, root, symlinks=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "cc"
    fake.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo fake-cc 1.0; exit 0; }\n"
                    "echo 'main.c:1: error: fake compiler says no' >&2\nexit 1\n")
    fake.chmod(0o755)
    before = (root / "build" / "tiny" / "kat" / "kat.json").read_text()
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = run_cli(["build"], root, env=env)
    assert result.returncode == 1, result.stderr
    assert "fake compiler says no" in result.stderr and "host build failed" in result.stderr
    assert (root / "build" / "tiny" / "kat" / "kat.json").read_text() == before
    assert (root / "build" / "tiny" / "codegen" / "model" / "cnn.c").exists()


def test_generated_project_is_warning_free(built, tmp_path):
    import subprocess

    project = tmp_path / "c"
    shutil.copytree(built / "build" / "tiny" / "codegen", project)
    for path in project.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    strict = "-std=c99 -O2 -Wall -Wextra -Wpedantic -Werror"
    host = subprocess.run(["make", "-s", "cnn_kat", f"CFLAGS={strict}"], cwd=project,
                          capture_output=True, text=True, timeout=300)
    assert host.returncode == 0, host.stderr
    if shutil.which("arm-none-eabi-gcc"):
        m4 = subprocess.run(["make", "-s", "m4", f"M4_CFLAGS={strict} -ffunction-sections "
                             "-fdata-sections"], cwd=project, capture_output=True, text=True,
                            timeout=300)
        assert m4.returncode == 0, m4.stderr


def test_every_conv_tiled_runs_bit_exact_on_host_and_m4(built, tmp_path):
    """The same model with a 340-byte L1 (single-buffered): every conv is tiled through L1
    and the C output still equals the integer reference on every test sample (host) and the
    KAT (QEMU)."""
    root = tmp_path / "p"
    shutil.copytree(built / "cache", root / "cache")  # training restored, not rerun
    make(root)
    path = root / "manifests" / "tiny.yaml"
    path.write_text(path.read_text().replace(
        "memory: {l1: 16KiB", "tiling: {double_buffer: false}, memory: {l1: 340B"))
    result = build_json(root)["tiny"]
    assert result["train"]["status"] == "restored" and result["kat"]["status"] == "built"
    report = json.loads((root / "build" / "tiny" / "report.json").read_text())
    memory = report["metrics"]["memory"]
    assert {"conv1", "conv2", "skip"} <= set(memory["tiled_layers"])
    assert memory["l1_peak"] <= memory["l1_budget"] == 340
    assert memory["traffic_bytes"] >= memory["traffic_lower_bound"] > 0
    for key in ("arena_bytes", "arena_lower_bound", "l2_budget"):
        assert memory[key] > 0
    assert report["metrics"]["c_vs_reference"] == {"samples": 150, "mismatches": 0}
    if shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm"):
        assert report["metrics"]["cortex_m4"]["kat"] == "pass"
    assert any(row["tiled"] and row["tiles"] > 1 for row in report["tiles"])
    assert "eb_conv2d_tiled" in (root / "build" / "tiny" / "codegen" / "model" / "cnn.c").read_text()
