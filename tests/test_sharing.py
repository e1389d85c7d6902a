"""The shared remote cache in real builds (`edgebuild` subprocesses): a fresh clone with
the remote recomputes nothing and gets byte-identical outputs; a remote that is
unreachable, refuses the credentials or is read-only costs one line, never the build
(exit 2 under --locked); a tampered remote blob is recomputed; `cache push|pull|ls`.

The remote is moto's S3 server (tests/s3server.py, IAM enforced) or a local directory;
the project is one linear layer on 60 samples, built completely (C project and host
known-answer test included) in about ten seconds.
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write
from s3server import Keys, S3Server, running

pytestmark = pytest.mark.slow

STAGES = ["validate", "data", "train", "qat", "quantize", "onnx", "evaluate", "plan", "codegen",
          "kat", "report"]


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    """A project as committed: manifest, data, edgebuild.lock (built once, no remote)."""
    root = tmp_path_factory.mktemp("origin")
    npz_data(root / "data.npz")
    write(root / "edgebuild.yaml", NPZ_MANIFEST)
    result = run_cli(["build"], root)
    assert result.returncode == 0, result.stderr
    return root


def _clone(origin: Path, where: Path) -> Path:
    """What a fresh clone has: no build tree, no cache."""
    where.mkdir(parents=True)
    for name in ("edgebuild.yaml", "data.npz", "edgebuild.lock"):
        shutil.copy(origin / name, where / name)
    return where


def _build(root: Path, *args: str, env: dict | None = None) -> tuple[int, str, dict]:
    result = run_cli(["build", "--json", *args], root, env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stderr, json.loads(result.stdout) if result.stdout else {}


def _tree(root: Path) -> dict[str, bytes]:
    build = root / "build" / "tiny"
    return {p.relative_to(build).as_posix(): p.read_bytes()
            for p in sorted(build.rglob("*")) if p.is_file() and ".state" not in p.parts}


def _outcomes(result: dict) -> dict[str, str]:
    return {s["stage"]: s["outcome"] for s in result["stages"]}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_fresh_clone_with_the_remote_recomputes_nothing(origin, s3, tmp_path):
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    first = _clone(origin, tmp_path / "first")
    code, err, result = _build(first, "--remote", url, "--push", env=s3.env())
    assert code == 0, err
    assert set(_outcomes(result).values()) == {"built"}  # own cache: computed, then pushed

    second = _clone(origin, tmp_path / "second")
    code, err, result = _build(second, "--locked", env={**s3.env(), "EDGEBUILD_REMOTE": url})
    assert code == 0, err
    assert _outcomes(result) == {stage: "restored-remote" for stage in STAGES}
    assert result["tally"] == {"restored-remote": len(STAGES)}
    assert _tree(second) == _tree(first) == _tree(origin)


def test_the_remote_can_be_a_project_setting(origin, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    first = _clone(origin, tmp_path / "first")
    (first / "edgebuild.toml").write_text('[cache]\nremote = "../shared"\n')
    assert _build(first, env={"EDGEBUILD_REMOTE_PUSH": "1"})[0] == 0  # CI's variable
    second = _clone(origin, tmp_path / "second")
    (second / "edgebuild.toml").write_text('[cache]\nremote = "../shared"\n')
    code, err, result = _build(second)
    assert code == 0, err
    assert set(_outcomes(result).values()) == {"restored-remote"}
    offline = _clone(origin, tmp_path / "offline")
    (offline / "edgebuild.toml").write_text('[cache]\nremote = "../shared"\n')
    code, err, result = _build(offline, "--until", "data", "--remote", "")  # '' = none
    assert code == 0 and set(_outcomes(result).values()) == {"built"}, err


def test_a_bad_settings_file_is_a_user_error(origin, tmp_path):
    root = _clone(origin, tmp_path / "p")
    (root / "edgebuild.toml").write_text("[cache]\nremote = 3\n")
    result = run_cli(["build"], root)
    assert result.returncode == 2
    assert "edgebuild.toml: [cache] remote: expected a non-empty string" in result.stderr
    (root / "edgebuild.toml").write_text("[cache]\nremtoe = 'x'\n")
    result = run_cli(["build"], root)
    assert result.returncode == 2 and "remtoe: unknown key (allowed: remote)" in result.stderr


@pytest.mark.parametrize("failure", ["unreachable", "credentials"])
def test_an_unusable_remote_costs_one_line_not_the_build(origin, s3, tmp_path, failure):
    root = _clone(origin, tmp_path / "p")
    env = s3.env(Keys("AKIAWRONGWRONGWRONG1", "wrong")) if failure == "credentials" else \
        {**s3.env(), "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    code, err, result = _build(root, "--until", "data", "--remote", url, env=env)
    assert code == 0, err
    assert set(_outcomes(result).values()) == {"built"}
    notes = [line for line in err.splitlines() if url in line]
    assert len(notes) == 1 and "building with the local cache only" in notes[0], err
    if failure == "credentials":
        assert "credentials" in notes[0]
    shutil.rmtree(root / "build")
    code, err, _ = _build(root, "--locked", "--until", "data", "--remote", url, env=env)
    assert code == 2 and "--locked needs the remote cache" in err, err


def test_a_read_only_remote_restores_and_pushes_nothing(origin, s3, tmp_path):
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    writer = _clone(origin, tmp_path / "writer")
    assert _build(writer, "--until", "train", "--remote", url, "--push", env=s3.env())[0] == 0
    reader = _clone(origin, tmp_path / "reader")
    code, err, result = _build(reader, "--until", "qat", "--remote", url, "--push",
                               env=s3.env(s3.ro))
    assert code == 0, err
    assert "read-only for these credentials" in err
    assert _outcomes(result) == {"data": "restored-remote", "train": "restored-remote",
                                 "qat": "built"}
    listing = run_cli(["cache", "ls", "--remote", url], writer, s3.env())
    assert listing.returncode == 0, listing.stderr
    assert sorted(line.split()[1] for line in listing.stdout.splitlines()) == ["data", "train"]


def test_a_build_writes_nothing_to_the_remote_unless_asked(origin, s3, tmp_path):
    """Read-only is the default: a developer's build with write credentials reads the team's
    results and writes none of its own; --push (or EDGEBUILD_REMOTE_PUSH=1, CI) writes."""
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    dev = _clone(origin, tmp_path / "dev")
    code, err, _ = _build(dev, "--until", "train", "--remote", url, env=s3.env())
    assert code == 0 and "read-only" not in err, err
    listing = run_cli(["cache", "ls", "--remote", url], dev, s3.env())
    assert listing.returncode == 0 and listing.stdout == "", listing.stdout
    shutil.rmtree(dev / "build")  # restored from the local cache: pushes what the remote lacks
    code, err, _ = _build(dev, "--until", "train", "--remote", url,
                          env={**s3.env(), "EDGEBUILD_REMOTE_PUSH": "1"})
    assert code == 0, err
    listing = run_cli(["cache", "ls", "--remote", url], dev, s3.env())
    assert sorted(line.split()[1] for line in listing.stdout.splitlines()) == ["data", "train"]
    bad = run_cli(["build", "--until", "data"], dev, {"EDGEBUILD_REMOTE_PUSH": "maybe"})
    assert bad.returncode == 2 and "EDGEBUILD_REMOTE_PUSH='maybe'" in bad.stderr


def test_a_tampered_remote_blob_is_recomputed_never_used(origin, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    first = _clone(origin, tmp_path / "first")
    assert _build(first, "--until", "train", "--remote", str(shared), "--push")[0] == 0
    train = json.loads((first / "build" / "tiny" / ".state" / "train.json").read_text())
    blob = shared / "v1" / "blobs" / train["files"]["float.npz"][2][:2] / \
        train["files"]["float.npz"][2]
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    blob.write_bytes(bytes(data))
    second = _clone(origin, tmp_path / "second")
    code, err, result = _build(second, "--until", "train", "--remote", str(shared), "--push")
    assert code == 0, err
    assert _outcomes(result) == {"data": "restored-remote", "train": "built"}
    assert "float.npz" in err and "train" in err
    assert (second / "build" / "tiny" / "train" / "float.npz").read_bytes() == \
        (first / "build" / "tiny" / "train" / "float.npz").read_bytes()
    third = _clone(origin, tmp_path / "third")  # the rebuild repaired the remote
    code, err, result = _build(third, "--until", "train", "--remote", str(shared))
    assert code == 0 and set(_outcomes(result).values()) == {"restored-remote"}, err


def test_cache_push_pull_and_ls(origin, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    project = _clone(origin, tmp_path / "p")
    shutil.copytree(origin / "build", project / "build")
    shutil.copytree(origin / "cache", project / "cache")
    pushed = run_cli(["cache", "push", "--remote", str(shared)], project)
    assert pushed.returncode == 0, pushed.stderr
    assert f"cache push: {len(STAGES)} entries uploaded, 0 already on" in pushed.stderr
    again = run_cli(["cache", "push", "--remote", str(shared)], project)
    assert f"0 entries uploaded, {len(STAGES)} already on" in again.stderr

    fresh = _clone(origin, tmp_path / "fresh")
    pulled = run_cli(["cache", "pull", "--remote", str(shared)], fresh)
    assert pulled.returncode == 0, pulled.stderr
    assert f"cache pull: {len(STAGES)} entries fetched, 0 already local, 0 not on" \
        in pulled.stderr
    code, err, result = _build(fresh, "--locked")  # no remote: all from the local cache
    assert code == 0 and set(_outcomes(result).values()) == {"restored-local"}, err

    listing = run_cli(["cache", "ls", "--remote", str(shared)], fresh)
    assert sorted(line.split()[1] for line in listing.stdout.splitlines()) == sorted(STAGES)
    assert all(line.startswith("*") for line in listing.stdout.splitlines())
    nothing = run_cli(["cache", "ls"], fresh, {"EDGEBUILD_REMOTE": ""})
    assert nothing.returncode == 2 and "no remote cache" in nothing.stderr
