"""What a build prints: stage lines prefixed with their manifest and stage under -j, the
summary table every build ends with, one line per manifest for a no-op (-v: per stage)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write

from edgebuild.build.console import Prefixed


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two")
    npz_data(root / "data.npz")
    for seed, name in enumerate(("one", "two"), start=1):  # other seeds: other trainings
        write(root / "manifests" / f"{name}.yaml",
              NPZ_MANIFEST.replace("name: tiny", f"name: {name}").replace("seed: 1", f"seed: {seed}")
              .replace("path: data.npz", "path: ../data.npz"))
    return root


def _table(stderr: str) -> dict[str, list[str]]:
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("manifest  "))
    header = re.split(r"\s{2,}", lines[start].strip())
    assert header == ["manifest", "stages", "time", "float", "int8", "RAM / budget",
                      "flash / budget", "M4 insn", "M4 cycles*", "KAT"]
    rows = [line for line in lines[start + 1:] if not line.startswith("* estimated")]
    return {line.split()[0]: re.split(r"\s{2,}", line.strip()) for line in rows}


@pytest.mark.slow
def test_a_build_ends_with_the_summary_and_j_prefixes_stage_lines(two):
    result = run_cli(["build", "-j", "2"], two)
    assert result.returncode == 0, result.stderr
    # the stages' own lines carry their stage: two manifests' QAT logs are told apart
    qat = [line for line in result.stderr.splitlines() if "qat epoch" in line]
    assert qat and all(re.match(r"\[(one|two)\.qat\] qat epoch", line) for line in qat), qat
    assert {line[1:4] for line in qat} == {"one", "two"}
    table = _table(result.stderr)
    assert set(table) == {"one", "two"}
    row = table["one"]
    assert row[1] in ("11 built", "11 restored") or re.fullmatch(r"\d+ \w+(, \d+ \w+)*", row[1])
    assert re.fullmatch(r"\d+\.\d%", row[3]) and re.fullmatch(r"\d+\.\d%", row[4])
    assert row[5].endswith("/ 128.0 KiB") and row[6].endswith("/ 512.0 KiB")
    assert row[9] == "pass"
    if row[7] != "-":  # with the ARM toolchain: more cycles than instructions (loads, branches)
        assert int(row[8].replace(",", "")) > int(row[7].replace(",", ""))

    noop = run_cli(["build"], two)
    assert noop.returncode == 0, noop.stderr
    lines = noop.stderr.splitlines()
    counted = row[7] != "-"  # with the ARM toolchain: cycles, and the footnote that explains them
    assert len(lines) == 3 + counted and {line.split()[0] for line in lines[1:3]} == {"one", "two"}
    assert not counted or lines[3].startswith("* estimated from the instruction mix"), lines
    assert all("up to date" in line for line in lines[1:3]), lines
    verbose = run_cli(["build", "-v"], two)
    assert len([line for line in verbose.stderr.splitlines() if "up to date" in line]) == 24


def test_a_failed_build_s_table_names_the_failed_stage(two, tmp_path):
    import json
    import shutil

    root = tmp_path / "p"
    shutil.copytree(two, root, ignore=shutil.ignore_patterns("build", "cache"))
    assert run_cli(["build", "--until", "data"], root).returncode == 0
    lock = json.loads((root / "edgebuild.lock").read_text())
    lock["manifests"]["one"]["data"]["digest"] = "f" * 64  # a promise the output breaks
    (root / "edgebuild.lock").write_text(json.dumps(lock))
    result = run_cli(["build", "--until", "data"], root)
    assert result.returncode == 1, result.stderr
    table = _table(result.stderr)
    assert table["one"][1] == "FAILED at data" and table["two"][1] == "up to date", table


def test_prefixed_lines():
    import io

    out = io.StringIO()
    stream = Prefixed(out, "[m.s] ")
    stream.write("a\nb")
    stream.write("c\n\nd\n")
    assert out.getvalue() == "[m.s] a\n[m.s] bc\n[m.s] \n[m.s] d\n"
    assert stream.isatty() is False


def test_the_summary_says_which_code_runs_where_on_a_max7800x_build(tmp_path, monkeypatch):
    """A MAX7800x build's line under the table: its accelerator program (the MSDK project)
    or why there is none; other builds get no line."""
    from edgebuild.cli import summary

    monkeypatch.chdir(tmp_path)
    made, refused, cpu = (tmp_path / "build" / n for n in ("m", "r", "c"))
    for directory, accelerator in ((made, {"program": {"project": "max7800x/"}}),
                                   (refused, {"program": {"unsupported": "layer 'sum': add"}}),
                                   (cpu, None)):
        directory.mkdir(parents=True)
        (directory / "report.json").write_text(json.dumps({"accelerator": accelerator}))
    assert summary._where("m", made) == ("m: accelerator program in build/m/max7800x/ (MSDK "
                                         "project); the M4 columns are its Cortex-M4 "
                                         "emulation in codegen/\n")
    assert summary._where("r", refused).startswith("r: no accelerator program (layer 'sum'")
    assert summary._where("c", cpu) == "" and summary._where("x", tmp_path / "nothing") == ""
