"""Builds on a Dask cluster: a `LocalCluster` of 2 worker processes and moto's S3 server
as the shared remote cache give the same artifacts as a local build; a cluster build
without a remote cache, or with a scheduler nobody runs, is a user error (exit 2)."""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write
from s3server import S3Server, configured, running

pytestmark = pytest.mark.slow
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def scheduler(s3: S3Server) -> Iterator[str]:
    """Two worker processes, one thread each, started with the S3 credentials."""
    with configured(s3.env()), distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def _project(root: Path) -> Path:
    """Two manifests (a sweep of two seeds) over one data file."""
    root.mkdir(parents=True)
    npz_data(root / "data.npz")
    for seed in (1, 2):
        write(root / "manifests" / f"seed{seed}.yaml",
              NPZ_MANIFEST.replace("name: tiny", f"name: seed{seed}")
              .replace("seed: 1", f"seed: {seed}").replace("path: data.npz",
                                                           "path: ../data.npz"))
    return root


def _trees(root: Path) -> dict[str, bytes]:
    build = root / "build"
    return {p.relative_to(build).as_posix(): p.read_bytes() for p in sorted(build.rglob("*"))
            if p.is_file() and ".state" not in p.parts and ".edgebuild" not in p.parts}


def test_a_cluster_build_gives_the_local_build_s_artifacts(s3, scheduler, tmp_path):
    local = _project(tmp_path / "local")
    here = run_cli(["build", "--json"], local)
    assert here.returncode == 0, here.stderr

    remote = _project(tmp_path / "remote")
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    result = run_cli(["build", "--json", "--scheduler", scheduler, "--remote", url], remote,
                     s3.env())
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    # a stage both manifests share (same key) is built once and restored for the other
    assert set(parsed["tally"]) <= {"built", "restored-local"}, parsed["stages"]
    assert sum(parsed["tally"].values()) == 22 and parsed["tally"]["built"] >= 20
    assert _trees(remote) == _trees(local)
    keys = {(s["manifest"], s["stage"]): s["key"] for s in json.loads(here.stdout)["stages"]}
    assert {(s["manifest"], s["stage"]): s["key"] for s in parsed["stages"]} == keys

    shutil.rmtree(remote / "build")  # the results are on the remote: nothing recomputed
    again = run_cli(["build", "--json", "--scheduler", scheduler, "--remote", url], remote,
                    s3.env())
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["tally"] == {"restored-local": 22}


def test_a_cluster_build_needs_a_remote_cache(scheduler, tmp_path):
    root = _project(tmp_path / "p")
    result = run_cli(["build", "--scheduler", scheduler], root)
    assert result.returncode == 2
    assert "give --remote URL too" in result.stderr and "Traceback" not in result.stderr


def test_an_unreachable_scheduler_is_a_user_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = _project(tmp_path / "p")
    (tmp_path / "shared").mkdir()
    result = run_cli(["build", "--scheduler", f"tcp://127.0.0.1:{port}", "--remote",
                      str(tmp_path / "shared")], root)
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
