"""One manifest, several targets (manifest.targets): one float training, QAT and
quantization once per number format, a plan, C project, known answer and report per target;
editing one target rebuilds only that target; each target's problems on its own lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_json, run_cli, write

MANIFEST = """\
name: digits
seed: 1
dataset:
  format: sklearn-digits
  split: {val: 0.1, test: 0.2}
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}
    - {name: conv2, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu, pool: {mode: max, size: 2}}
    - {name: fc, op: linear, out: 10, flatten: true, wide: true}
train: {epochs: 1, batch: 64}
qat: {epochs: 1}
target:
  - device: cortex-m4
    memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}
  - device: max78000
  - {name: small, device: host, memory: {l2: 100KiB}}
placement:
  conv1: {processors: 0x0000000000000001, data_format: CHW, out_offset: 0x4000}
"""
TARGETS = ("digits/cortex-m4", "digits/max78000", "digits/small")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("targets")
    write(root / "manifests" / "digits.yaml", MANIFEST)
    return root, build_json(root, "-j", "2")


def _keys(stages: dict, stage: str) -> set[str]:
    return {stages[name][stage]["key"] for name in TARGETS}


@pytest.mark.slow
def test_one_training_then_a_build_per_target(built: tuple[Path, dict]) -> None:
    root, stages = built
    assert set(stages) == set(TARGETS)
    for stage in ("data", "train"):  # the same inputs: built once, restored for the others
        assert len(_keys(stages, stage)) == 1
        assert sorted(stages[t][stage]["status"] for t in TARGETS) == \
            ["built", "restored", "restored"]
    # QAT and quantization once per number format: the two CPUs share one, the MAX78000
    # (8-bit bias, its own rounding) has its own
    for stage in ("qat", "quantize"):
        assert stages["digits/cortex-m4"][stage]["key"] == stages["digits/small"][stage]["key"]
        assert stages["digits/max78000"][stage]["key"] != stages["digits/small"][stage]["key"]
    for stage in ("plan", "codegen", "kat", "report"):
        assert len(_keys(stages, stage)) == 3
    for target in ("cortex-m4", "max78000", "small"):
        here = root / "build" / "digits" / target
        assert (here / "codegen" / "Makefile").is_file()
        report = json.loads((here / "report.json").read_text())
        assert report["metrics"]["c_vs_reference"]["mismatches"] == 0
    plan = json.loads((root / "build/digits/small/.state/plan.json").read_text())
    assert plan["material"]["config"]["target"]["memory"]["l2"] == 100 * 1024


@pytest.mark.slow
def test_the_summary_says_what_was_shared(tmp_path: Path) -> None:
    write(tmp_path / "edgebuild.yaml", MANIFEST.replace(
        "  - device: max78000\n", "").replace("placement:\n  conv1: {processors: "
                                               "0x0000000000000001, data_format: CHW, "
                                               "out_offset: 0x4000}\n", ""))
    result = run_cli(["build"], tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stderr.splitlines()
            if line.startswith("digits/")}
    assert "11 built" in rows["digits/cortex-m4"]
    assert "7 shared, 4 built" in rows["digits/small"]  # validate to evaluate came along


@pytest.mark.slow
def test_editing_one_target_rebuilds_only_that_target(built: tuple[Path, dict]) -> None:
    root, before = built
    path = root / "manifests" / "digits.yaml"
    path.write_text(MANIFEST.replace("memory: {l2: 100KiB}", "memory: {l2: 120KiB}"))
    try:
        after = build_json(root)
    finally:
        path.write_text(MANIFEST)
    for target in ("digits/cortex-m4", "digits/max78000"):
        assert {s["status"] for s in after[target].values()} == {"uptodate"}
    changed = {stage for stage, s in after["digits/small"].items() if s["status"] != "uptodate"}
    assert changed == {"plan", "codegen", "kat", "report"}
    assert after["digits/small"]["train"]["key"] == before["digits/small"]["train"]["key"]


def test_each_targets_problems_on_its_own_lines(tmp_path: Path) -> None:
    text = MANIFEST.replace("memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}",
                            "memory: {l1: 16KiB, l2: 128KiB, flash: 1KiB}")
    text = text.replace("{name: small, device: host, memory: {l2: 100KiB}}",
                        "{name: small, device: hsot}")
    write(tmp_path / "edgebuild.yaml", text)
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2, result.stderr
    lines = text.splitlines()
    flash = next(i for i, line in enumerate(lines, 1) if "flash: 1KiB" in line)
    host = next(i for i, line in enumerate(lines, 1) if "hsot" in line)
    assert f"edgebuild.yaml:{host}:" in result.stderr and "target[2].device" in result.stderr
    assert f"edgebuild.yaml:{flash}:" in result.stderr
    assert "target[0].memory.flash" in result.stderr and "needs at least" in result.stderr
    assert "Traceback" not in result.stderr


def test_labels_must_differ(tmp_path: Path) -> None:
    write(tmp_path / "edgebuild.yaml", MANIFEST.replace(
        "{name: small, device: host, memory: {l2: 100KiB}}", "{device: cortex-m4}"))
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2
    assert "target[3]" not in result.stderr and "target[2].name" in result.stderr
    assert "give each target a distinct `name`" in result.stderr


def test_an_empty_target_list_is_an_error(tmp_path: Path) -> None:
    body = MANIFEST.split("target:")[0] + "target: []\n"
    write(tmp_path / "edgebuild.yaml", body)
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2
    assert "target: an empty list" in result.stderr


def test_check_lists_every_target(tmp_path: Path) -> None:
    write(tmp_path / "edgebuild.yaml", MANIFEST)
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 0, result.stderr
    for target in TARGETS:
        assert f"({target}: 3 layers" in result.stderr
