"""A user's import of a real vendor model builds end to end: `edgebuild import-ai8x` of the
vendor's face-identification network (streaming layers, input through the FIFOs, a
Cortex-M4 emulation far over the MAX78000's 128 KiB of RAM) with izer's checkpoint and
sample, then a full `edgebuild build`. The accelerator program must equal izer's, the host
KAT pass, the Cortex-M4 run be skipped with the reason, and the report say what runs where.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ai8x_cases
import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow

CASE = "vendor_faceid"
# check's warning: the emulation's RAM (arena and kernels' workspace, as the planner sizes
# them) against the MAX78000's 128 KiB of SRAM
NEED = re.compile(r"target\.memory\.l2: warning: Cortex-M4 emulation: needs (\d+) bytes of RAM, "
                  r"the MAX78000 has 131072")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("vendor")
    case = ai8x_cases.load_case(CASE)
    checkpoint, sample = ai8x_cases.write_inputs(case, root / "in")
    result = run_cli(["import-ai8x", str(case.network), "--checkpoint", str(checkpoint),
                      "--sample", str(sample), "--device", case.device.lower(),
                      "--name", CASE, "-o", str(root / "project")], root)
    assert result.returncode == 0, result.stderr
    check = run_cli(["check", f"{CASE}.yaml"], root / "project")
    assert check.returncode == 0, check.stderr
    found = NEED.search(check.stderr)
    assert found and int(found[1]) > 131072, check.stderr  # the warning, with the need
    (root / "need").write_text(found[1])
    result = run_cli(["build", f"{CASE}.yaml", "--cache-dir", str(root / "cache")],
                     root / "project")
    assert result.returncode == 0, result.stderr
    (root / "build.log").write_text(result.stderr)
    return root


def test_the_accelerator_program_is_izers(built):
    from edgebuild.targets.max7800x.program import program, reader

    project = built / "project" / "build" / CASE / "max7800x"
    expected = ai8x_cases.expected_program(ai8x_cases.load_case(CASE))
    assert ai8x_cases.compare(expected, reader.read(project)) == []
    stored = ai8x_cases.CASES / CASE / "program.json.gz"
    assert program.differences(reader.load(stored), reader.read(project), 0) == []
    result = run_cli(["compare-ai8x", str(project), str(stored)], built)
    assert result.returncode == 0 and result.stdout.startswith("identical"), result.stdout


def test_the_report_says_which_code_runs_where(built):
    report = json.loads((built / "project" / "build" / CASE / "report.json").read_text())
    skipped = report["metrics"]["cortex_m4"]["skipped"]
    need = (built / "need").read_text()
    assert skipped.startswith(f"Cortex-M4 emulation: needs {need} bytes of RAM, the MAX78000 "
                              "has 131072 — host KAT only")  # what check said
    assert report["metrics"]["c_vs_reference"]["mismatches"] == 0
    assert report["metrics"]["kat_vectors"] == "known answer"
    accelerator = report["accelerator"]
    assert accelerator["program"]["project"] == "max7800x/"
    assert accelerator["emulation"] == "codegen/"
    log = (built / "build.log").read_text()
    assert f"{CASE}: accelerator program in" in log and "host KAT only" in log
