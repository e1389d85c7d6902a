"""The CLI's commands: init, check, clean, cache gc / verify, -C, exit statuses.

Builds stop at the cheap stages (`--until validate` / `--until data`): no training here.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
from pathlib import Path

import pytest

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import build_json, run_cli
except ImportError:
    from conftest import build_json, run_cli


def _set_seed(project: Path, seed: int) -> None:
    path = project / "manifests" / "small.yaml"
    text = re.sub(r"(?m)^seed: \d+$", f"seed: {seed}", path.read_text())
    assert f"seed: {seed}\n" in text
    path.write_text(text)


def _build(project: Path, *extra: str) -> dict[str, dict]:
    """`build --until data` of the `small` manifest: {"data": outcome}."""
    found = build_json(project, "--until", "data", *extra)["small"]
    assert list(found) == ["data"]
    return found


def _entries(cache: Path) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for meta in cache.glob("*/*/*/meta.json"):
        found.setdefault(meta.parent.parent.parent.name, set()).add(meta.parent.name)
    return found


def _assert_user_error(result, *fragments: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


# --- init ---------------------------------------------------------------------------------


def test_init_scaffolds_a_project_that_checks_and_builds(tmp_path):
    project = tmp_path / "kws"
    project.mkdir()
    result = run_cli(["init"], project)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in project.iterdir()) == [".git", ".gitignore", "edgebuild.yaml"]
    staged = subprocess.run(["git", "ls-files"], cwd=project, capture_output=True, text=True)
    assert staged.stdout.split() == [".gitignore", "edgebuild.yaml"]  # staged, not committed
    ignored = (project / ".gitignore").read_text().split()
    assert "build/" in ignored and "cache/" in ignored
    assert re.search(r"(?m)^name: digits$", (project / "edgebuild.yaml").read_text())

    check = run_cli(["check"], project)
    assert check.returncode == 0, check.stderr
    assert "edgebuild.yaml: ok (digits:" in check.stderr

    built = build_json(project, "--until", "data")
    assert built["digits"]["data"]["status"] == "built"
    assert (project / "build" / "digits" / "data" / "data.npz").is_file()


def test_init_into_a_new_directory_with_a_name(tmp_path):
    result = run_cli(["init", "sub/dir", "--name", "kws_small"], tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = tmp_path / "sub" / "dir" / "edgebuild.yaml"
    assert re.search(r"(?m)^name: kws_small$", manifest.read_text())
    check = run_cli(["check", "sub/dir"], tmp_path)
    assert check.returncode == 0, check.stderr
    assert "kws_small" in check.stderr


def test_init_refuses_an_existing_manifest(tmp_path):
    (tmp_path / "edgebuild.yaml").write_text("name: mine\n")
    result = run_cli(["init"], tmp_path)
    _assert_user_error(result, "already exists")
    assert (tmp_path / "edgebuild.yaml").read_text() == "name: mine\n"
    assert not (tmp_path / ".gitignore").exists()


def test_init_refuses_a_project_with_manifests_dir(digits_project):
    before = (digits_project / "manifests" / "small.yaml").read_text()
    _assert_user_error(run_cli(["init"], digits_project), "already exists")
    assert not (digits_project / "edgebuild.yaml").exists()
    assert (digits_project / "manifests" / "small.yaml").read_text() == before


@pytest.mark.parametrize("name", ["a b", "1abc", "a-b", ""])
def test_init_rejects_a_bad_name(tmp_path, name):
    result = run_cli(["init", "--name", name], tmp_path)
    _assert_user_error(result, "--name")
    assert not (tmp_path / "edgebuild.yaml").exists()


def test_init_leaves_git_alone_inside_a_work_tree(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert run_cli(["init", "inner"], tmp_path).returncode == 0
    assert not (tmp_path / "inner" / ".git").exists()  # the outer repository's owner decides


def test_init_no_git(tmp_path):
    assert run_cli(["init", "--no-git"], tmp_path).returncode == 0
    assert not (tmp_path / ".git").exists() and (tmp_path / "edgebuild.yaml").is_file()


def test_init_keeps_an_existing_gitignore(tmp_path):
    (tmp_path / ".gitignore").write_text("*.pyc\n")
    assert run_cli(["init"], tmp_path).returncode == 0
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n"
    assert (tmp_path / "edgebuild.yaml").is_file()


# --- clean --------------------------------------------------------------------------------


def test_clean_removes_build_and_keeps_cache(digits_project):
    _build(digits_project)
    cache_before = _entries(digits_project / "cache")
    assert set(cache_before) == {"data"}
    result = run_cli(["clean"], digits_project)
    assert result.returncode == 0, result.stderr
    assert not (digits_project / "build").exists()
    assert _entries(digits_project / "cache") == cache_before
    assert (digits_project / "manifests" / "small.yaml").is_file()
    # the kept cache restores everything
    assert _build(digits_project)["data"]["status"] == "restored"


def test_clean_cache_removes_both(digits_project):
    _build(digits_project)
    result = run_cli(["clean", "--cache"], digits_project)
    assert result.returncode == 0, result.stderr
    assert not (digits_project / "build").exists()
    assert not (digits_project / "cache").exists()
    assert (digits_project / "manifests" / "small.yaml").is_file()
    assert _build(digits_project)["data"]["status"] == "built"


def test_clean_cache_honours_cache_dir(digits_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("c") / "cache"
    _build(digits_project, "--cache-dir", str(elsewhere))
    assert _entries(elsewhere)
    result = run_cli(["clean", "--cache", "--cache-dir", str(elsewhere)], digits_project)
    assert result.returncode == 0, result.stderr
    assert not elsewhere.exists()
    assert not (digits_project / "build").exists()


# --- cache gc -----------------------------------------------------------------------------


def test_gc_keeps_referenced_and_removes_unreferenced_entries(digits_project):
    _set_seed(digits_project, 2)
    seed2 = _build(digits_project)
    _set_seed(digits_project, 1)
    seed1 = _build(digits_project)
    assert seed1["data"]["status"] == "built"
    cache = digits_project / "cache"
    assert _entries(cache)["data"] == {seed1["data"]["key"], seed2["data"]["key"]}

    result = run_cli(["cache", "gc", "--max-size", "1B"], digits_project)
    assert result.returncode == 0, result.stderr
    assert f"deleted data/{seed2['data']['key'][:16]}" in result.stderr
    assert "deleted 1 entries" in result.stderr
    assert _entries(cache) == {"data": {seed1["data"]["key"]}}

    verify = run_cli(["cache", "verify"], digits_project)
    assert verify.returncode == 0, verify.stderr
    assert "1 entries, 0 corrupt" in verify.stderr
    assert _build(digits_project)["data"]["status"] == "uptodate"

    # the removed one is rebuilt when needed again
    _set_seed(digits_project, 2)
    again = _build(digits_project)
    assert again["data"]["status"] == "built"
    assert again["data"]["digest"] == seed2["data"]["digest"]


def test_gc_keeps_entries_named_by_the_lock_file(digits_project):
    seed1 = _build(digits_project)
    lock_text = (digits_project / "edgebuild.lock").read_text()
    _set_seed(digits_project, 2)
    seed2 = _build(digits_project)
    (digits_project / "edgebuild.lock").write_text(lock_text)  # a committed lock: seed 1
    result = run_cli(["cache", "gc", "--max-size", "1B"], digits_project)
    assert result.returncode == 0, result.stderr
    # seed 1 is in the lock, seed 2 in the build tree: both stay
    assert _entries(digits_project / "cache")["data"] == {seed1["data"]["key"],
                                                          seed2["data"]["key"]}


def test_gc_by_age_spares_recent_entries(digits_project):
    _build(digits_project)
    (digits_project / "build" / "small" / ".state" / "data.json").unlink()  # unreferenced
    (digits_project / "edgebuild.lock").unlink()
    result = run_cli(["cache", "gc", "--max-age", "1"], digits_project)
    assert result.returncode == 0, result.stderr
    assert "deleted 0 entries" in result.stderr
    assert len(_entries(digits_project / "cache")["data"]) == 1
    result = run_cli(["cache", "gc", "--max-age", "0"], digits_project)
    assert result.returncode == 0, result.stderr
    assert "deleted 1 entries" in result.stderr
    assert _entries(digits_project / "cache") == {}


@pytest.mark.parametrize("args, fragment", [
    (["--max-size", "banana"], "--max-size"),
    (["--max-age", "-1"], "--max-age"),
])
def test_gc_rejects_bad_limits(digits_project, args, fragment):
    _assert_user_error(run_cli(["cache", "gc", *args], digits_project), fragment)


# --- cache verify -------------------------------------------------------------------------


def test_verify_reports_and_deletes_a_corrupt_entry(digits_project):
    built = _build(digits_project)
    key = built["data"]["key"]
    entry = digits_project / "cache" / "data" / key[:2] / key
    victim = entry / "out" / "data.json"
    assert not victim.stat().st_mode & stat.S_IWUSR  # entries are read-only
    victim.chmod(0o644)
    victim.write_text(victim.read_text().replace('"classes"', '"klasses"'))

    result = run_cli(["cache", "verify"], digits_project)
    assert result.returncode == 1, result.stderr
    assert f"corrupt data/{key[:16]}" in result.stderr
    assert "data.json: content changed" in result.stderr
    assert "1 entries, 1 corrupt" in result.stderr
    assert entry.is_dir()  # reported, not deleted

    result = run_cli(["cache", "verify", "--delete"], digits_project)
    assert result.returncode == 0, result.stderr
    assert f"corrupt data/{key[:16]}" in result.stderr
    assert not entry.exists()

    result = run_cli(["cache", "verify"], digits_project)
    assert result.returncode == 0, result.stderr
    assert "0 entries, 0 corrupt" in result.stderr


def test_a_corrupt_entry_is_rebuilt_not_restored(digits_project):
    built = _build(digits_project)
    key = built["data"]["key"]
    victim = digits_project / "cache" / "data" / key[:2] / key / "out" / "data.json"
    victim.chmod(0o644)
    victim.write_text("{}\n")
    (digits_project / "build" / "small" / "data" / "data.json").unlink()
    again = _build(digits_project)["data"]
    assert again["status"] == "built"
    assert again["digest"] == built["data"]["digest"]
    assert json.loads((digits_project / "build" / "small" / "data" / "data.json").read_text())
    assert run_cli(["cache", "verify"], digits_project).returncode == 0


# --- global options and exit statuses -----------------------------------------------------


def test_dash_c_runs_in_another_directory(digits_project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    result = run_cli(["-C", str(digits_project), "build", "--json", "--until", "data"], elsewhere)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["manifests"]["small"]["data"]["status"] == "built"
    assert (digits_project / "build" / "small" / "data" / "data.npz").is_file()
    assert (digits_project / "cache").is_dir()
    assert list(elsewhere.iterdir()) == []

    status = run_cli(["-C", str(digits_project), "status"], elsewhere)
    assert status.returncode == 0, status.stderr
    assert re.search(r"(?m)^  data\s+up to date$", status.stdout), status.stdout


def test_dash_c_to_a_missing_directory_is_a_user_error(tmp_path):
    _assert_user_error(run_cli(["-C", str(tmp_path / "nope"), "check"], tmp_path), "nope")


def test_unknown_command_is_a_usage_error(tmp_path):
    result = run_cli(["frobnicate"], tmp_path)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_option_is_a_usage_error(digits_project):
    result = run_cli(["build", "--frobnicate"], digits_project)
    assert result.returncode == 2
    assert "unrecognized arguments" in result.stderr
    assert not (digits_project / "build").exists()


def test_no_manifest_here_is_a_user_error(tmp_path):
    _assert_user_error(run_cli([], tmp_path), "edgebuild init")
    _assert_user_error(run_cli(["status"], tmp_path), "edgebuild init")
    assert not (tmp_path / "build").exists()


def test_jobs_must_be_positive(digits_project):
    _assert_user_error(run_cli(["build", "-j", "0", "--until", "data"], digits_project), "--jobs")
    assert not (digits_project / "build" / "small").exists()


@pytest.mark.parametrize("args", [[], ["build"], ["cache"], ["cache", "gc"], ["init"]])
def test_help_works_everywhere(tmp_path, args):
    result = run_cli([*args, "--help"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: edgebuild")
    assert list(tmp_path.iterdir()) == []


def test_cache_needs_an_action(tmp_path):
    result = run_cli(["cache"], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_until_choices_are_the_registered_stages():
    """`build --until` offers exactly the pipeline's stages, in order (ondevice included)."""
    from edgebuild import cli
    from edgebuild.pipeline.stages import STAGES

    assert list(cli.STAGE_NAMES) == list(STAGES)
