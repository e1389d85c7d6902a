"""The pipeline end to end through the CLI: skip, restore, rebuild, tamper, kill, lock.

These tests are about the cache protocol, which every stage shares, so they only run the
two cheap stages, `validate` and `data` (no torch): a "build" here is `build --until
validate` plus `build --until data` (neither is upstream of the other), merged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import (
        DIGITS_MANIFEST,
        NPZ_MANIFEST,
        build_json,
        edgebuild_cmd,
        run_cli,
        write,
    )
except ImportError:
    from conftest import DIGITS_MANIFEST, NPZ_MANIFEST, build_json, edgebuild_cmd, run_cli, write

STAGES = ["validate", "data"]
DATA = ("--until", "data")
STAGE_LINE = re.compile(r"^(\w+)\.(\w+)\s+(built|restored|up to date)\s+\d+\.\d\ds\s+[0-9a-f]{12}$")



def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "EDGEBUILD_CACHE"}


def _data(project: Path, *extra: str, env: dict | None = None) -> dict:
    """`build --json --until data`: the data stage only."""
    result = build_json(project, *DATA, *extra, env=env)
    for stages in result.values():
        assert list(stages) == ["data"], result
    return result


def _build(project: Path, *extra: str, env: dict | None = None) -> dict:
    """validate and data, as two `build --json --until ...` runs, merged per manifest."""
    merged: dict[str, dict] = {}
    for until in STAGES:
        for name, stages in build_json(project, "--until", until, *extra, env=env).items():
            assert list(stages) == [until], stages
            merged.setdefault(name, {}).update(stages)
    return merged


def _manifest(project: Path) -> Path:
    return project / "manifests" / "small.yaml"


def _set_seed(project: Path, seed: int) -> None:
    path = _manifest(project)
    text = re.sub(r"(?m)^seed: \d+$", f"seed: {seed}", path.read_text())
    assert f"seed: {seed}\n" in text
    path.write_text(text)


def _statuses(result: dict, name: str = "small") -> dict[str, str]:
    return {stage: values["status"] for stage, values in result[name].items()}


def _stage_lines(stderr: str) -> list[tuple[str, str, str]]:
    return [m.groups() for m in map(STAGE_LINE.match, stderr.splitlines()) if m]


def _status_line(stdout: str, stage: str) -> str:
    match = re.search(rf"(?m)^  {stage}\s+(.+)$", stdout)
    assert match, stdout
    return match.group(1).strip()


def _save_npz(path: Path, seed: int = 0) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    np.savez(path, x=rng.normal(size=(60, 1, 4, 4)).astype(np.float32), y=np.arange(60) % 3)


@pytest.fixture
def npz_project(tmp_path: Path) -> Path:
    _save_npz(tmp_path / "data.npz")
    write(tmp_path / "edgebuild.yaml", NPZ_MANIFEST)
    return tmp_path


def _entries(cache: Path, stage: str) -> list[Path]:
    return sorted(cache.glob(f"{stage}/*/*/meta.json"))


# --- skip and rebuild ---------------------------------------------------------------------


def test_first_build_builds_second_is_uptodate(digits_project):
    first = {}
    for until in STAGES:
        result = run_cli(["build", "--json", "--until", until], digits_project)
        assert result.returncode == 0, result.stderr
        parsed = json.loads(result.stdout)  # stdout is exactly one JSON object
        assert sorted(parsed) == ["failures", "manifests", "stages", "tally"]
        assert parsed["failures"] == []
        assert [(s["manifest"], s["stage"]) for s in parsed["stages"]] == [("small", until)]
        assert parsed["stages"][0]["outcome"] == "built" and parsed["tally"] == {"built": 1}
        assert list(parsed["manifests"]) == ["small"]
        assert list(parsed["manifests"]["small"]) == [until]
        values = parsed["manifests"]["small"][until]
        assert set(values) == {"status", "key", "seconds", "digest"}
        assert values["status"] == "built"
        assert re.fullmatch(r"[0-9a-f]{64}", values["key"])
        assert re.fullmatch(r"[0-9a-f]{64}", values["digest"])
        assert isinstance(values["seconds"], int | float) and values["seconds"] >= 0
        assert _stage_lines(result.stderr) == [("small", until, "built")], result.stderr
        first[until] = values
    small = digits_project / "build" / "small"
    assert (small / "validate" / "graph.json").is_file()
    assert (small / "data" / "data.npz").is_file()
    info = json.loads((small / "data" / "data.json").read_text())
    assert info["classes"] == [str(i) for i in range(10)]

    for until in STAGES:
        result = run_cli(["build", "--json", "--until", until], digits_project)
        assert result.returncode == 0, result.stderr
        again = json.loads(result.stdout)["manifests"]["small"][until]
        assert again["status"] == "uptodate"
        assert (again["key"], again["digest"]) == (first[until]["key"], first[until]["digest"])
        # a no-op build prints its summary table: a header and one line per manifest
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and lines[0].split()[:2] == ["manifest", "stages"], lines
        assert re.match(r"small\s+up to date\s+\d+\.\ds", lines[1]), lines
        verbose = run_cli(["build", "-v", "--until", until], digits_project)
        assert _stage_lines(verbose.stderr) == [("small", until, "up to date")], verbose.stderr


def test_revert_restores_from_cache(digits_project):
    first = _build(digits_project)
    assert _statuses(first) == {s: "built" for s in STAGES}
    _set_seed(digits_project, 2)
    second = _build(digits_project)
    assert _statuses(second) == {"validate": "uptodate", "data": "built"}
    assert second["small"]["data"]["key"] != first["small"]["data"]["key"]
    _set_seed(digits_project, 1)
    third = _build(digits_project)
    assert _statuses(third) == {"validate": "uptodate", "data": "restored"}
    assert third["small"]["data"]["key"] == first["small"]["data"]["key"]
    assert third["small"]["data"]["digest"] == first["small"]["data"]["digest"]
    assert len(_entries(digits_project / "cache", "data")) == 2


def test_editing_epochs_touches_neither_validate_nor_data(digits_project):
    _build(digits_project)
    path = _manifest(digits_project)
    path.write_text(path.read_text().replace("epochs: 2", "epochs: 3"))
    assert "epochs: 3" in path.read_text()
    assert _statuses(_build(digits_project)) == {s: "uptodate" for s in STAGES}


def test_editing_the_model_rebuilds_validate_only(digits_project):
    _build(digits_project)
    path = _manifest(digits_project)
    path.write_text(path.read_text().replace("out: 8,", "out: 4,"))
    assert _statuses(_build(digits_project)) == {"validate": "built", "data": "uptodate"}


# --- tamper -------------------------------------------------------------------------------


@pytest.mark.parametrize("tamper", ["modify", "delete", "extra"])
def test_tampered_output_is_restored(digits_project, tamper):
    _build(digits_project)
    target = digits_project / "build" / "small" / "data" / "data.json"
    original = target.read_bytes()
    if tamper == "modify":
        target.write_text(target.read_text().replace('"classes"', '"klasses"'))
    elif tamper == "delete":
        target.unlink()
    else:
        (target.parent / "notes.txt").write_text("mine")
    status = run_cli(["status"], digits_project)
    assert status.returncode == 0, status.stderr
    assert _status_line(status.stdout, "data") == "would be restored from cache"
    assert "modified or deleted" in status.stdout
    assert _status_line(status.stdout, "validate") == "up to date"

    result = _data(digits_project)
    assert _statuses(result) == {"data": "restored"}
    assert target.read_bytes() == original
    assert not (target.parent / "notes.txt").exists()
    assert _statuses(_data(digits_project)) == {"data": "uptodate"}


def test_same_size_edit_is_caught_despite_the_stat_fast_path(digits_project):
    _data(digits_project)
    target = digits_project / "build" / "small" / "data" / "data.json"
    original = target.read_bytes()
    info = target.stat()
    target.write_bytes(original.replace(b'"classes"', b'"CLASSES"'))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert target.stat().st_size == info.st_size
    assert _statuses(_data(digits_project)) == {"data": "restored"}
    assert target.read_bytes() == original


def test_status_explains_a_seed_edit(digits_project):
    _build(digits_project)
    _set_seed(digits_project, 2)
    status = run_cli(["status"], digits_project)
    assert status.returncode == 0, status.stderr
    assert _status_line(status.stdout, "validate") == "up to date"
    assert _status_line(status.stdout, "data") == "would run"
    assert re.search(r"seed: 1 -> 2", status.stdout), status.stdout
    # status changes nothing
    assert _statuses(_data(digits_project)) == {"data": "built"}


def test_status_names_a_changed_data_file_once(npz_project):
    """A data file's edit is named by the file; the stages downstream say which upstream
    moved, by name: no digest is repeated down the pipeline."""
    build_json(npz_project, "--until", "train")
    _save_npz(npz_project / "data.npz", seed=7)
    status = run_cli(["status"], npz_project)
    assert status.returncode == 0, status.stderr
    assert f"data file {npz_project / 'data.npz'}: its content changed" in status.stdout
    assert "upstream data will run first" in status.stdout
    assert not re.search(r"[0-9a-f]{16}", status.stdout), status.stdout
    build_json(npz_project, "--until", "train")
    _save_npz(npz_project / "data.npz")  # reverted: everything comes back from the cache
    status = run_cli(["status"], npz_project)
    assert _status_line(status.stdout, "train") == "would be restored from cache"
    assert "upstream changed: data\n" in status.stdout
    assert not re.search(r"[0-9a-f]{16}", status.stdout), status.stdout


def test_status_of_a_fresh_project(digits_project):
    status = run_cli(["status"], digits_project)
    assert status.returncode == 0, status.stderr
    assert _status_line(status.stdout, "validate") == "would run"
    assert _status_line(status.stdout, "data") == "would run"
    assert "never built" in status.stdout
    assert not (digits_project / "build" / "small").exists()


# --- content, not mtime -------------------------------------------------------------------


def test_data_file_keyed_by_content_not_mtime(npz_project):
    data = npz_project / "data.npz"
    first = _build(npz_project)
    assert _statuses(first, "tiny") == {s: "built" for s in STAGES}

    later = time.time() + 1000
    os.utime(data, (later, later))
    assert _statuses(_data(npz_project), "tiny") == {"data": "uptodate"}

    _save_npz(data, seed=1)
    changed = _build(npz_project)
    assert _statuses(changed, "tiny") == {"validate": "uptodate", "data": "built"}
    assert changed["tiny"]["data"]["key"] != first["tiny"]["data"]["key"]

    _save_npz(data, seed=0)  # the original content again, with a new mtime
    assert _statuses(_data(npz_project), "tiny") == {"data": "restored"}


def test_vanished_data_file_is_a_user_error(npz_project):
    _data(npz_project)
    assert run_cli(["check"], npz_project).returncode == 0
    (npz_project / "data.npz").unlink()
    result = run_cli(["build", "--json", *DATA], npz_project)
    assert result.returncode == 2, result.stderr
    assert "data.npz" in result.stderr
    assert "not found" in result.stderr
    assert "Traceback" not in result.stderr


# --- parallel, concurrency ----------------------------------------------------------------


def test_parallel_build_of_two_manifests(tmp_path):
    write(tmp_path / "manifests" / "one.yaml", DIGITS_MANIFEST.format(name="one"))
    write(tmp_path / "manifests" / "two.yaml", DIGITS_MANIFEST.format(name="two")
          .replace("seed: 1", "seed: 2").replace("out: 8,", "out: 4,"))
    for until in STAGES:
        result = run_cli(["build", "--json", "-j", "2", "--until", until], tmp_path)
        assert result.returncode == 0, result.stderr
        outcomes = json.loads(result.stdout)["manifests"]
        assert outcomes == {name: {until: outcomes[name][until]} for name in ("one", "two")}
        for name in ("one", "two"):
            assert outcomes[name][until]["status"] == "built"
            assert (tmp_path / "build" / name / until).is_dir()
        assert sorted(_stage_lines(result.stderr)) == [("one", until, "built"),
                                                        ("two", until, "built")]
    # doit keeps its dependency DB in memory: our state records are the only truth
    assert not list((tmp_path / "build").rglob("*.sqlite3"))

    again = _build(tmp_path, "-j", "2")
    for name in ("one", "two"):
        assert _statuses(again, name) == {s: "uptodate" for s in STAGES}


def test_two_processes_share_the_cache(digits_project):
    procs = [subprocess.Popen(edgebuild_cmd() + ["build", "--json", *DATA], cwd=digits_project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, env=_env())
             for _ in range(2)]
    outcomes = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr
        outcomes.append(json.loads(stdout)["manifests"]["small"]["data"])
    statuses = [o["status"] for o in outcomes]
    assert statuses.count("built") <= 1, statuses
    assert set(statuses) <= {"built", "restored", "uptodate"}
    assert outcomes[0]["digest"] == outcomes[1]["digest"]
    verify = run_cli(["cache", "verify"], digits_project)
    assert verify.returncode == 0, verify.stderr
    assert len(_entries(digits_project / "cache", "data")) == 1
    assert _statuses(_data(digits_project)) == {"data": "uptodate"}


# --- interrupted builds -------------------------------------------------------------------

HANG_SCRIPT = textwrap.dedent("""\
    import dataclasses, pathlib, sys, time
    import edgebuild.pipeline.stages as stages
    from edgebuild import cli

    marker, seconds = pathlib.Path(sys.argv[1]), float(sys.argv[2])
    original = stages.STAGES["data"].run

    def run(ctx):
        original(ctx)
        marker.write_text("in data stage")
        time.sleep(seconds)

    stages.STAGES["data"] = dataclasses.replace(stages.STAGES["data"], run=run)
    sys.exit(cli.main(["build", "-j", "1", *sys.argv[3:]]))
    """)


def _sigint_as_a_terminal_gives_it() -> None:
    """For preexec_fn: SIGINT at its default, as a shell starts a program. An ignored SIGINT
    is inherited across exec, and Python then never turns it into KeyboardInterrupt: run
    under a pytest worker in which something earlier left SIGINT ignored, the hanging build
    slept through the test's Ctrl-C (CI, twice)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_hanging_build(project: Path, scratch: Path, seconds: float = 60,
                         *extra: str) -> subprocess.Popen:
    """`build --until data` whose data stage writes its output, then sleeps `seconds`."""
    script = scratch / "hang.py"
    script.write_text(HANG_SCRIPT)
    marker = scratch / "marker"
    proc = subprocess.Popen([sys.executable, str(script), str(marker), str(seconds), *DATA,
                             *extra], cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=_env(), preexec_fn=_sigint_as_a_terminal_gives_it)
    deadline = time.monotonic() + 60
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the build exited early: {proc.communicate()}")
        assert time.monotonic() < deadline, "the data stage never started"
        time.sleep(0.05)
    return proc


def _assert_resumes_cleanly(project: Path) -> None:
    cache = project / "cache"
    assert _entries(cache, "data") == []
    assert not (project / "build" / "small" / "data").exists()
    assert _statuses(_data(project)) == {"data": "built"}
    assert len(_entries(cache, "data")) == 1
    verify = run_cli(["cache", "verify"], project)
    assert verify.returncode == 0, verify.stderr
    assert "0 corrupt" in verify.stderr
    assert _statuses(_data(project)) == {"data": "uptodate"}


def test_sigkill_mid_stage_leaves_no_entry(digits_project, tmp_path_factory):
    proc = _start_hanging_build(digits_project, tmp_path_factory.mktemp("hang"))
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # the killed stage's work exists only as a temp dir, never as (part of) an entry
    assert list((digits_project / "cache" / "tmp").glob("data-*"))
    assert not list((digits_project / "cache").glob("data/*/*"))
    _assert_resumes_cleanly(digits_project)


def test_ctrl_c_mid_stage_exits_cleanly(digits_project, tmp_path_factory):
    proc = _start_hanging_build(digits_project, tmp_path_factory.mktemp("hang"))
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert "interrupted" in stderr
    # an interrupted stage removes its own temp dir
    assert not list((digits_project / "cache" / "tmp").glob("data-*"))
    _assert_resumes_cleanly(digits_project)


def test_second_process_waits_and_finds_the_stage_up_to_date(digits_project, tmp_path_factory):
    """While one build realizes a stage, another on the same project waits for it and then
    finds it current: it neither rebuilds it nor re-materializes it (which would swap
    build/<name>/<stage> and its state record away under the first build's downstream
    stages, failing them with "upstream ... has no output yet")."""
    first = _start_hanging_build(digits_project, tmp_path_factory.mktemp("hang"), 3, "--json")
    second = subprocess.Popen(edgebuild_cmd() + ["build", "--json", *DATA], cwd=digits_project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, env=_env())
    out1, err1 = first.communicate(timeout=60)
    out2, err2 = second.communicate(timeout=60)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    one = json.loads(out1)["manifests"]["small"]["data"]
    two = json.loads(out2)["manifests"]["small"]["data"]
    assert one["status"] == "built"
    assert two["status"] == "uptodate", two
    assert two["digest"] == one["digest"]


# --- the lock file ------------------------------------------------------------------------


def test_locked_builds(digits_project):
    first = _build(digits_project)
    lock = digits_project / "edgebuild.lock"
    assert lock.is_file()
    text = lock.read_text()
    body = json.loads(text)
    assert text == json.dumps(body, indent=2, sort_keys=True) + "\n"  # sorted, stable
    for stage in STAGES:
        entry = body["manifests"]["small"][stage]
        assert (entry["key"], entry["digest"]) == (first["small"][stage]["key"],
                                                    first["small"][stage]["digest"])
        built = digits_project / "build" / "small" / stage
        assert entry["outputs"] == {
            p.relative_to(built).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            for p in sorted(built.rglob("*")) if p.is_file()}
    assert body["provenance"]["inputs"]["small"]["fields"]["seed"]

    for until in STAGES:
        ok = run_cli(["build", "--locked", "--until", until], digits_project)
        assert ok.returncode == 0, ok.stderr

    _set_seed(digits_project, 2)
    drift = run_cli(["build", "--locked", *DATA], digits_project)
    assert drift.returncode == 1, drift.stderr
    assert re.search(r"stage small\.data\b.*manifest setting seed changed", drift.stderr), \
        drift.stderr
    assert "edgebuild.lock" in drift.stderr
    assert "Traceback" not in drift.stderr
    assert lock.read_text() == text  # --locked never rewrites the lock

    # a developer builds seed 2 (warming the cache), then reverts manifest and lock
    _data(digits_project)
    assert lock.read_text() != text
    _set_seed(digits_project, 1)
    lock.write_text(text)
    shutil.rmtree(digits_project / "build")
    for until in STAGES:
        restored = run_cli(["build", "--locked", "--json", "--until", until], digits_project)
        assert restored.returncode == 0, restored.stderr
        outcome = json.loads(restored.stdout)["manifests"]["small"][until]
        assert outcome["status"] == "restored"
        assert outcome["digest"] == first["small"][until]["digest"]
    assert lock.read_text() == text


def test_locked_without_lock_file_is_a_user_error(digits_project):
    result = run_cli(["build", "--locked", *DATA], digits_project)
    assert result.returncode == 2, result.stderr
    assert "edgebuild.lock" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (digits_project / "build" / "small").exists()


def test_lock_file_drops_removed_manifests(tmp_path):
    write(tmp_path / "manifests" / "one.yaml", DIGITS_MANIFEST.format(name="one"))
    write(tmp_path / "manifests" / "two.yaml", DIGITS_MANIFEST.format(name="two"))
    _data(tmp_path)
    lock = json.loads((tmp_path / "edgebuild.lock").read_text())
    assert sorted(lock["manifests"]) == ["one", "two"]
    (tmp_path / "manifests" / "two.yaml").unlink()
    _data(tmp_path)
    lock = json.loads((tmp_path / "edgebuild.lock").read_text())
    assert sorted(lock["manifests"]) == ["one"]


def test_building_one_manifest_keeps_the_others_in_the_lock_file(tmp_path):
    write(tmp_path / "manifests" / "one.yaml", DIGITS_MANIFEST.format(name="one"))
    write(tmp_path / "manifests" / "two.yaml", DIGITS_MANIFEST.format(name="two"))
    _data(tmp_path)
    before = json.loads((tmp_path / "edgebuild.lock").read_text())
    _data(tmp_path, "manifests/one.yaml")
    after = json.loads((tmp_path / "edgebuild.lock").read_text())
    assert after == before  # "two" stays; "one" rebuilt to the same keys


# --- options ------------------------------------------------------------------------------


def test_until_validate_builds_only_validate(digits_project):
    result = build_json(digits_project, "--until", "validate")
    assert _statuses(result) == {"validate": "built"}
    small = digits_project / "build" / "small"
    assert (small / "validate" / "graph.json").is_file()
    assert sorted(p.name for p in small.iterdir() if not p.name.startswith(".")) == ["validate"]
    assert _entries(digits_project / "cache", "data") == []
    assert [p.parent.parent.parent.name for p in (digits_project / "cache").glob("*/*/*/meta.json")
            ] == ["validate"]


def _make_read_only(cache_dir: Path) -> None:
    """Writes into `cache_dir` fail from now on (root ignores permission bits: then the
    directories a publication needs are replaced by regular files)."""
    if os.geteuid() != 0:
        for path in [cache_dir, *cache_dir.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
        return
    for name in ("tmp", "locks", "stat", "checked"):
        shutil.rmtree(cache_dir / name, ignore_errors=True)
        (cache_dir / name).write_text("")


def test_read_only_cache_serves_restores_and_builds_without_publishing(digits_project,
                                                                       tmp_path_factory):
    shared = tmp_path_factory.mktemp("shared") / "cache"
    assert _statuses(_data(digits_project, "--cache-dir", str(shared))) == {"data": "built"}
    before = sorted(p.relative_to(shared) for p in shared.rglob("meta.json"))
    _make_read_only(shared)
    try:
        shutil.rmtree(digits_project / "build")
        result = run_cli(["build", "--json", *DATA, "--cache-dir", str(shared)], digits_project)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr and "read-only" in result.stderr
        assert {s: v["status"] for s, v in json.loads(result.stdout)["manifests"]["small"].items()
                } == {"data": "restored"}
        assert sorted(p.relative_to(shared) for p in shared.rglob("meta.json")) == before
    finally:
        if os.geteuid() != 0:
            for path in [shared, *shared.rglob("*")]:
                path.chmod(path.stat().st_mode | 0o200)


def test_a_cache_that_cannot_exist_builds_without_caching(digits_project, tmp_path_factory):
    base = tmp_path_factory.mktemp("ro")
    (base / "afile").write_text("")
    cache_dir = base / "afile" / "cache"  # below a regular file: never writable, even by root
    result = run_cli(["build", "--json", *DATA, "--cache-dir", str(cache_dir)], digits_project)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert str(cache_dir) in result.stderr and "read-only" in result.stderr
    assert {s: v["status"] for s, v in json.loads(result.stdout)["manifests"]["small"].items()
            } == {"data": "built"}
    assert (digits_project / "build" / "small" / "data" / "data.npz").is_file()
    assert not [p for p in (digits_project / "build" / "small").iterdir()
                if p.name.startswith(".tmp-")]


def test_cache_dir_and_env_relocate_the_cache(digits_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("caches")
    by_flag, by_env = elsewhere / "flag", elsewhere / "env"

    assert _statuses(_data(digits_project, "--cache-dir", str(by_flag))) == {"data": "built"}
    assert len(_entries(by_flag, "data")) == 1
    assert not (digits_project / "cache").exists()

    shutil.rmtree(digits_project / "build")
    env = {"EDGEBUILD_CACHE": str(by_env)}
    assert _statuses(_data(digits_project, env=env)) == {"data": "built"}
    assert len(_entries(by_env, "data")) == 1
    assert not (digits_project / "cache").exists()

    shutil.rmtree(digits_project / "build")
    assert _statuses(_data(digits_project, env=env)) == {"data": "restored"}
    verify = run_cli(["cache", "verify"], digits_project, env=env)
    assert verify.returncode == 0, verify.stderr
    assert "1 entries, 0 corrupt" in verify.stderr
    # --cache-dir wins over the environment
    shutil.rmtree(digits_project / "build")
    assert _statuses(_data(digits_project, "--cache-dir", str(by_flag), env=env)) == {
        "data": "restored"}
    assert len(_entries(by_env, "data")) == 1
    assert not (digits_project / "cache").exists()
