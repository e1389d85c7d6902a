"""A user building the generated C project by hand (`make run` in build/<name>/codegen/)
neither makes edgebuild's output stale nor loses what make built: the Makefiles put their
products in build/ inside the project, which edgebuild does not track."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write

pytestmark = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="needs make and a C compiler")


def test_make_in_the_generated_project_keeps_the_build_current(tmp_path):
    npz_data(tmp_path / "data.npz")
    write(tmp_path / "edgebuild.yaml", NPZ_MANIFEST)
    assert run_cli(["build"], tmp_path).returncode == 0
    project = tmp_path / "build" / "tiny" / "codegen"
    made = subprocess.run(["make", "-s", "run"], cwd=project, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    binary = project / "build" / "cnn_kat"
    assert binary.is_file()
    assert not (project / "cnn_kat").exists()  # nothing beside the sources

    again = run_cli(["build", "--json"], tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["tally"] == {"up-to-date": 11}, again.stderr
    assert binary.is_file()

    # an output edgebuild does track is edited: restored, and make's products survive it
    (project / "main.c").write_text("broken\n")
    restored = run_cli(["build", "--json"], tmp_path)
    assert restored.returncode == 0, restored.stderr
    outcomes = {s["stage"]: s["outcome"] for s in json.loads(restored.stdout)["stages"]}
    assert outcomes["codegen"] == "restored-local" and outcomes["kat"] == "up-to-date"
    assert binary.is_file() and (project / "main.c").read_text() != "broken\n"
