"""The no-op index (edgebuild/build/index.py): a no-op is answered from stats alone, and anything
that could change a verdict sends the build down the full path, which answers correctly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from edgebuild.build import index
from edgebuild.build import project as projects
from edgebuild.cli import main

UNTIL = ["--until", "quantize"]  # validate/data/train/qat/quantize: seconds, several stages


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A built project, copied fresh for each test (`project`)."""
    from conftest import DIGITS_MANIFEST

    root = tmp_path_factory.mktemp("index")
    (root / "manifests").mkdir()
    text = DIGITS_MANIFEST.format(name="small")
    (root / "manifests" / "small.yaml").write_text(text)
    cwd = os.getcwd()
    try:
        os.chdir(root)
        assert main(["build", *UNTIL]) == 0
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture
def project(built, tmp_path, monkeypatch) -> Path:
    import shutil

    copy = tmp_path / "p"
    shutil.copytree(built, copy, symlinks=True, copy_function=shutil.copy2)
    monkeypatch.chdir(copy)
    # the copy has new inodes: one full check re-vouches for it
    assert main(["build", *UNTIL]) == 0
    return copy


class Loads:
    """Counts full-path builds (projects.load parses the manifests)."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        real = projects.load

        def counted(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(projects, "load", counted)


def _build(capsys, *extra: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["build", "--json", *UNTIL, *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def _statuses(result: dict) -> dict[str, str]:
    return {stage: v["status"] for stage, v in result["manifests"]["small"].items()}


def test_a_noop_is_answered_without_parsing_a_manifest(project, monkeypatch, capsys):
    loads = Loads(monkeypatch)
    code, result, err = _build(capsys)
    assert code == 0 and loads.count == 0
    assert set(_statuses(result).values()) == {"uptodate"}
    assert len(_statuses(result)) >= 4
    assert "up to date" in err
    assert "doit" not in err


def _touch_output(root: Path) -> None:
    target = next(p for p in (root / "build" / "small" / "train").rglob("*") if p.is_file())
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 10**9))


def _extra_output(root: Path) -> None:
    (root / "build" / "small" / "qat" / "stray.txt").write_text("not from a stage")


def _delete_output(root: Path) -> None:
    next(p for p in (root / "build" / "small" / "quantize").rglob("*") if p.is_file()).unlink()


def _edit_manifest(root: Path) -> None:
    path = root / "manifests" / "small.yaml"
    path.write_text(path.read_text() + "# a comment changes the bytes, not the settings\n")


def _rewrite_state(root: Path) -> None:
    state = root / "build" / "small" / ".state" / "qat.json"
    state.write_text(state.read_text())


def _index_file(root: Path) -> Path:
    """This environment's index file (the fixture's copy also holds the original's)."""
    return Path(index.path_of(root / "build", index.environment(root / "cache")))


def _corrupt_index(root: Path) -> None:
    _index_file(root).write_text("{not json")


def _other_code(root: Path) -> None:
    path = _index_file(root)
    index = json.loads(path.read_text())
    index["environment"]["code"] = "0" * 64  # as after editing edgebuild's own sources
    path.write_text(json.dumps(index))


@pytest.mark.parametrize("change, expected", [
    (_touch_output, {"train": "uptodate"}),  # same bytes: still current
    (_extra_output, {"qat": "restored"}),
    (_delete_output, {"quantize": "restored"}),
    (_edit_manifest, {}),
    (_rewrite_state, {}),
    (_corrupt_index, {}),
    (_other_code, {}),
])
def test_anything_that_moved_takes_the_full_path(project, monkeypatch, capsys, change, expected):
    change(project)
    loads = Loads(monkeypatch)
    code, result, _ = _build(capsys)
    assert code == 0 and loads.count == 1
    statuses = _statuses(result)
    assert {s: v for s, v in statuses.items() if v != "uptodate"} == \
        {s: v for s, v in expected.items() if v != "uptodate"}
    assert not (project / "build" / "small" / "qat" / "stray.txt").exists()
    # and the index vouches again
    code, result, _ = _build(capsys)
    assert code == 0 and loads.count == 1
    assert set(_statuses(result).values()) == {"uptodate"}


def test_a_broken_lock_promise_is_not_hidden_by_the_index(project, monkeypatch, capsys):
    lock = project / "edgebuild.lock"
    data = json.loads(lock.read_text())
    data["manifests"]["small"]["qat"]["digest"] = "f" * 64
    lock.write_text(json.dumps(data))
    loads = Loads(monkeypatch)
    code, result, err = _build(capsys)
    assert code == 1 and loads.count == 1
    assert "qat" in err and "differs from edgebuild.lock although its inputs match" in err
    assert "lock ffffffffffffffff" in err
    assert [f["task"] for f in result["failures"] if f["kind"] != "skipped"] == ["small.qat"]
    assert json.loads(lock.read_text())["manifests"]["small"]["qat"]["digest"] == "f" * 64
    # --relock accepts the bytes built and records them
    code, _, _ = _build(capsys, "--relock")
    assert code == 0
    assert json.loads(lock.read_text())["manifests"]["small"]["qat"]["digest"] != "f" * 64


def test_locked_checks_digests_on_an_up_to_date_tree(project, capsys):
    lock = project / "edgebuild.lock"
    data = json.loads(lock.read_text())
    data["manifests"]["small"]["train"]["key"] = "e" * 64  # a lock from other settings
    lock.write_text(json.dumps(data))
    code, result, err = _build(capsys, "--locked")
    assert code == 1
    assert "small.train" in err and "no longer match edgebuild.lock" in err
    assert "small.train" in [f["task"] for f in result["failures"]]



def test_every_target_of_a_manifest_is_answered(tmp_path, monkeypatch, capsys):
    """A manifest listing two targets has two builds: the index answers for both (it kept
    one entry per file, and a no-op, `--locked` included, listed one target)."""
    from conftest import DIGITS_MANIFEST

    (tmp_path / "manifests").mkdir()
    text = DIGITS_MANIFEST.format(name="two").replace(
        "target: {device: host, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}",
        "target:\n  - {name: big, device: host, memory: {l1: 16KiB, l2: 128KiB}}\n"
        "  - {name: small, device: host, memory: {l1: 4KiB, l2: 128KiB}}")
    assert "name: small" in text
    (tmp_path / "manifests" / "two.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["build", *UNTIL]) == 0
    loads = Loads(monkeypatch)
    for extra in ((), ("--locked",)):
        code, result, _ = _build(capsys, *extra)
        assert code == 0 and loads.count == 0, extra  # answered from the index
        assert sorted(result["manifests"]) == ["two/big", "two/small"], extra


class Answers:
    """The index's own counters of answers (hits: from the index; misses: full path)."""

    def __init__(self) -> None:
        self.start = dict(index.counters)

    def __call__(self) -> tuple[int, int]:
        return (index.counters["hits"] - self.start["hits"],
                index.counters["misses"] - self.start["misses"])


@pytest.mark.parametrize("other", [
    ["--until", "qat"],  # fewer stages
    ["manifests/small.yaml"],  # a manifest named
    ["--cache-dir", "../p/cache"],  # the same cache, spelled another way
])
def test_alternating_argument_sets_both_stay_on_the_fast_path(project, monkeypatch, capsys,
                                                              other):
    loads, answers = Loads(monkeypatch), Answers()
    for _ in range(3):
        for extra in ([], other):
            code, result, _ = _build(capsys, *extra)
            assert code == 0 and set(_statuses(result).values()) == {"uptodate"}, extra
    assert answers() == (6, 0), index.last_miss
    assert loads.count == 0


def test_two_environments_keep_an_index_each(project, monkeypatch, capsys):
    """Another cache directory is another environment: after one full check each, builds
    alternating the two are answered from their own index files."""
    loads, answers = Loads(monkeypatch), Answers()
    other = ["--cache-dir", str(project / "other-cache")]
    code, _, _ = _build(capsys, *other)  # the first build with it: a full check
    assert code == 0 and loads.count == 1 and answers() == (0, 1)
    assert index.last_miss == "no index for this environment"
    for _ in range(2):
        for extra in ([], other):
            code, result, _ = _build(capsys, *extra)
            assert code == 0 and set(_statuses(result).values()) == {"uptodate"}, extra
    assert answers() == (4, 1) and loads.count == 1
    assert _index_file(project).is_file()


def test_index_files_are_bounded(project, monkeypatch, capsys):
    for number in range(index.MAX_ENVIRONMENTS + 2):
        code, _, _ = _build(capsys, "--cache-dir", str(project / f"cache{number}"))
        assert code == 0
    assert len(list((project / "build" / ".edgebuild").glob("index-*.json"))) == \
        index.MAX_ENVIRONMENTS


def test_a_mixed_project_takes_the_fast_path(project, monkeypatch, capsys):
    """Host, two-target and MAX78000 manifests (imported weights) side by side: after one
    full check the no-op of all of them, and of any of them, is answered from the index."""
    import shutil

    from conftest import EXAMPLES

    manifests = project / "manifests"
    shutil.copy(EXAMPLES / "mnist_extrasmall.yaml", manifests)
    shutil.copytree(EXAMPLES / "mnist_extrasmall", manifests / "mnist_extrasmall")
    two = (manifests / "small.yaml").read_text().replace("name: small", "name: two").replace(
        "target: {device: host, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}",
        "target:\n  - {name: big, device: host, memory: {l1: 16KiB, l2: 128KiB}}\n"
        "  - {name: little, device: host, memory: {l1: 4KiB, l2: 128KiB}}")
    (manifests / "two.yaml").write_text(two)
    for number in range(3):
        (manifests / f"copy{number}.yaml").write_text(
            (manifests / "small.yaml").read_text().replace("name: small", f"name: c{number}"))
    code, _, err = _build(capsys)
    assert code == 0, err
    loads, answers = Loads(monkeypatch), Answers()
    names = {"small", "two/big", "two/little", "mnist_extrasmall", "c0", "c1", "c2"}
    for extra in ([], ["manifests/mnist_extrasmall.yaml"], ["manifests/two.yaml"], []):
        code, result, _ = _build(capsys, *extra)
        assert code == 0
        assert set(result["manifests"]) <= names and (extra or set(result["manifests"]) == names)
        assert {v["status"] for stages in result["manifests"].values()
                for v in stages.values()} == {"uptodate"}
    assert answers() == (4, 0), index.last_miss
    assert loads.count == 0
