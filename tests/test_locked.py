"""`build --locked` (CI): what moved is named, stage by stage; `--json` lists every stage.

A tiny npz project (one linear layer, 60 samples) keeps each build to seconds; the stages
up to `quantize` exercise data files, training and the stages after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write

UNTIL = ["--until", "quantize"]


def _data(root: Path, seed: int = 0) -> None:
    npz_data(root / "data.npz", seed)


@pytest.fixture(scope="module")
def locked(tmp_path_factory) -> Path:
    """A built project with its edgebuild.lock (copied per test by `project`)."""
    root = tmp_path_factory.mktemp("locked")
    _data(root)
    write(root / "edgebuild.yaml", NPZ_MANIFEST)
    result = run_cli(["build", *UNTIL], root)
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture
def project(locked: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "p"
    shutil.copytree(locked, target, symlinks=True)
    return target


def _locked(root: Path) -> tuple[int, str, dict]:
    result = run_cli(["build", "--locked", "--json", *UNTIL], root)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stderr, json.loads(result.stdout)


def _edit_lock(root: Path, change) -> None:
    path = root / "edgebuild.lock"
    body = json.loads(path.read_text())
    change(body)
    path.write_text(json.dumps(body))


def test_an_unchanged_project_passes_with_every_stage_listed(project):
    code, err, result = _locked(project)
    assert code == 0, err
    stages = [(s["manifest"], s["stage"]) for s in result["stages"]]
    assert stages == [("tiny", s) for s in ("data", "train", "qat", "quantize")]
    assert {s["outcome"] for s in result["stages"]} == {"up-to-date"}
    assert result["tally"] == {"up-to-date": 4}


def test_a_deleted_tree_is_restored_from_the_cache_by_key(project):
    import shutil

    shutil.rmtree(project / "build")
    code, err, result = _locked(project)
    assert code == 0, err
    assert result["tally"] == {"restored-local": 4}, result["stages"]


def test_a_changed_data_file_is_named(project):
    _data(project, seed=1)
    code, err, result = _locked(project)
    assert code == 1
    failed = [s for s in result["stages"] if s["outcome"] == "failed"]
    assert [s["stage"] for s in failed] == ["data"]
    assert "data file data.npz changed" in failed[0]["message"]
    assert [s["outcome"] for s in result["stages"][1:]] == ["skipped"] * 3


def test_a_changed_setting_is_named_with_its_path(project):
    manifest = project / "edgebuild.yaml"
    manifest.write_text(manifest.read_text().replace("out: 3, flatten: true",
                                                     "out: 3, flatten: true, bias: false"))
    code, err, _ = _locked(project)
    assert code == 1
    assert "tiny.train (edgebuild.yaml)" in err
    assert "manifest setting model.layers.fc.bias changed" in err


def test_another_tool_version_is_named(project):
    def older_numpy(body):
        body["provenance"]["environment"]["tools"]["numpy"] = "1.0.0"
        for entry in body["manifests"]["tiny"].values():
            entry["key"] = "0" * 64  # as if the lock was written with that numpy
    _edit_lock(project, older_numpy)
    code, err, _ = _locked(project)
    assert code == 1
    assert f"tool numpy {np.__version__} (lock: 1.0.0)" in err


def test_a_manifest_the_lock_does_not_know_fails(project):
    write(project / "manifests" / "other.yaml",
          NPZ_MANIFEST.replace("name: tiny", "name: other").replace("data.npz", "../data.npz"))
    (project / "edgebuild.yaml").rename(project / "manifests" / "tiny.yaml")
    text = (project / "manifests" / "tiny.yaml").read_text()
    (project / "manifests" / "tiny.yaml").write_text(text.replace("data.npz", "../data.npz"))
    code, err, result = _locked(project)
    assert code == 1
    assert "stage other.data (manifests/other.yaml) is not in edgebuild.lock" in err


def test_other_bytes_under_the_locked_key_name_the_output_file(project):
    def tamper(body):
        entry = body["manifests"]["tiny"]["train"]
        entry["digest"] = "f" * 64
        entry["outputs"]["float.npz"] = "f" * 16
    _edit_lock(project, tamper)
    code, err, result = _locked(project)
    assert code == 1
    failed = next(s for s in result["stages"] if s["outcome"] == "failed")
    assert failed["stage"] == "train"
    message = failed["message"]
    assert "train (float.npz) differs from edgebuild.lock although its inputs match" in message
    assert "--remote" in message and "train.reproducible" in message


def test_locked_never_rewrites_the_lock(project):
    before = (project / "edgebuild.lock").read_text()
    _data(project, seed=2)
    assert _locked(project)[0] == 1
    assert (project / "edgebuild.lock").read_text() == before


def test_reproducible_false_keys_unpinned_kernels_and_promises_no_bytes(project):
    manifest = project / "edgebuild.yaml"
    manifest.write_text(manifest.read_text().replace("train: {epochs: 1, batch: 16}",
                                                     "train: {epochs: 1, batch: 16, "
                                                     "reproducible: false}"))
    result = run_cli(["build", *UNTIL], project)
    assert result.returncode == 0, result.stderr
    state = json.loads((project / "build" / "tiny" / ".state" / "train.json").read_text())
    assert state["material"]["tools"]["torch-kernels"] == "native"
    assert state["material"]["config"]["train"]["reproducible"] is False

    def other_machine(body):  # another CPU trained other bytes under the same key
        body["manifests"]["tiny"]["train"]["digest"] = "e" * 64
    _edit_lock(project, other_machine)
    relaxed = run_cli(["build", *UNTIL], project)
    assert relaxed.returncode == 0, relaxed.stderr  # no promise of bytes across machines
    _edit_lock(project, other_machine)
    code, err, _ = _locked(project)
    assert code == 1 and "differs from edgebuild.lock although its inputs match" in err
