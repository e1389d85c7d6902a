"""Fault injection: `edgebuild` killed, interrupted, raced, fed corrupt files, denied writes
and disk space.

Every test asserts the exit status, that no "Traceback" reaches stderr, and that every
artifact present in build/<name>/ is byte-identical to a clean build of the same manifest
(or absent). The clean build (`ref`) is made once per module, cold, in its own tree and
cache; trials that test restores start from a copy of its cache. Cache entries are held to
the same standard: an entry whose files differ from the clean build of the manifest its
key belongs to is a wrong entry (`_wrong_entries`).

Random moments come from seeded generators (EDGEBUILD_FAULT_SEED picks other moments),
delays scale with the measured length of the reference build, and independent trials run
two at a time (`_in_pairs`). Processes are found through /proc: every `edgebuild` started
here leads its own session (the supervisor; its worker has its own process group inside
that session), so "kill -9 everything" and "nothing left alive" are about that session.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import NPZ_MANIFEST, edgebuild_cmd, write
except ImportError:
    from conftest import NPZ_MANIFEST, edgebuild_cmd, write

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                                reason="process checks read /proc (Linux)")

# conftest's DIGITS_MANIFEST shrunk: 200 training and 40 test samples, one epoch of
# float training and one of QAT, two convolution channels (a cold build is ~10 s, most of
# it importing torch and compiling the known-answer test)
TINY = """\
name: {name}
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
  limit: {{train: 200, test: 40}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 2, kernel: 3, pad: 1, act: relu}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: {epochs}, batch: 64}}
qat: {{epochs: 1}}
quantize: {{calibration: 64}}
target: {{device: host, memory: {{l1: 16KiB, l2: 128KiB, flash: 512KiB}}}}
"""
NAME = "tiny"
STAGES = ["validate", "data", "train", "qat", "quantize", "onnx", "evaluate", "plan", "codegen",
          "kat", "report"]
CACHE_OWN = ("tmp", "locks", "stat", "checked")  # the cache's directories that hold no entry
NOT_COPIED = ("tmp", "locks", "checked")  # `stat/` (tool versions by binary stat) stays valid
SEED = int(os.environ.get("EDGEBUILD_FAULT_SEED", "20240611"))
STAGE_LINE = re.compile(r"^\S+\.\w+\s+(built|restored|up to date)\s+[\d.]+s\s+[0-9a-f]{12}$")


# --- running edgebuild --------------------------------------------------------------------


def _command() -> list[str]:
    """The console script beside this interpreter: no shell shim (pyenv) in between, so a
    signal sent to the pid reaches the supervisor itself. Else conftest's choice."""
    script = Path(sys.executable).with_name("edgebuild")
    return [str(script)] if script.is_file() else edgebuild_cmd()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "EDGEBUILD_CACHE"}


def _run(args: list[str], cwd: Path, timeout: float = 300,
         preexec: Callable[[], None] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(_command() + args, cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          preexec_fn=preexec)


def _spawn(args: list[str], cwd: Path) -> subprocess.Popen:
    """`edgebuild ARGS` leading a new session (its pid is the session id)."""
    return subprocess.Popen(_command() + args, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def _clean(result: subprocess.CompletedProcess | tuple[str, str], what: str) -> str:
    stderr = result.stderr if isinstance(result, subprocess.CompletedProcess) else result[1]
    assert "Traceback" not in stderr, f"{what}:\n{stderr}"
    assert "KeyboardInterrupt" not in stderr, f"{what}:\n{stderr}"
    return stderr


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _no_success(stdout: str, what: str) -> None:
    """With --json: no stage reported as done (or no JSON at all: the run never began)."""
    if stdout.strip():
        assert not any(json.loads(stdout)["manifests"].values()), f"{what}: {stdout}"


# --- processes (/proc) --------------------------------------------------------------------


def _processes() -> dict[int, tuple[str, int, int, int]]:
    """pid -> (state, ppid, pgid, session) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def _alive(session: int) -> dict[int, int]:
    """pid -> process group of the session's live processes (zombies are dead: a container's
    PID 1 may never reap what it inherits)."""
    return {pid: pgid for pid, (state, _, pgid, sid) in _processes().items()
            if sid == session and state not in ("Z", "X")}


def _alive_group(group: int) -> set[int]:
    """The live processes of a process group (the worker's), wherever their session."""
    return {pid for pid, (state, _, pgid, _) in _processes().items()
            if pgid == group and state not in ("Z", "X")}


def _kill_session(session: int, patience: float = 10) -> None:
    """kill -9 every process group of the session until none is left (a group may fork
    while it is being killed)."""
    deadline = time.monotonic() + patience
    while (alive := _alive(session)) and time.monotonic() < deadline:
        for group in set(alive.values()):
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    assert not _alive(session), f"session {session} survived kill -9: {_alive(session)}"


def _supervising(pid: int) -> int | None:
    """The worker's pid once the supervisor `pid` handles SIGINT and SIGTERM: it installs
    its handlers right after forking the worker into the worker's own process group."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"(?m)^SigCgt:\s*([0-9a-f]+)$", status)
    caught = int(match.group(1), 16) if match else 0
    if not all(caught >> (number - 1) & 1 for number in (signal.SIGINT, signal.SIGTERM)):
        return None
    for child, (state, ppid, pgid, _) in _processes().items():
        if ppid == pid and pgid == child and state not in ("Z", "X"):
            return child
    return None


def _wait(proc: subprocess.Popen, until: float) -> None:
    """Sleep until the monotonic time `until` or until `proc` exits."""
    while proc.poll() is None and time.monotonic() < until:
        time.sleep(0.005)


def _in_pairs(trial: Callable, items: Iterable) -> list:
    """Independent trials two at a time (2 cores); the first failure is raised."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(trial, items))


# --- artifacts and the clean build --------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(root: Path, hidden: bool = False) -> dict[str, str]:
    """sha256 of every file below `root`, by relative path; in a build tree hidden names
    (.state/, the temp directories of killed builds) are not artifacts."""
    if not root.is_dir():
        return {}
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and (hidden or not any(part.startswith(".") for part in rel.parts)):
            found[rel.as_posix()] = _sha(path)
    return found


@dataclass(frozen=True)
class Ref:
    """A clean build: cold cache, one process, nothing injected."""

    root: Path
    outcomes: dict[str, tuple[str, str]]  # stage -> (key, digest)
    artifacts: dict[str, str]  # build/<name>/ relative path -> sha256
    metrics: dict
    build_s: float
    restore_s: float = 0.0

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def stage_files(self, stage: str) -> dict[str, str]:
        prefix = f"{stage}/"
        return {rel[len(prefix):]: sha for rel, sha in self.artifacts.items()
                if rel.startswith(prefix)}


def _outcomes(stdout: str, name: str = NAME) -> dict[str, tuple[str, str]]:
    return {stage: (v["key"], v["digest"])
            for stage, v in json.loads(stdout)["manifests"].get(name, {}).items()}


def _statuses(stdout: str, name: str = NAME) -> dict[str, str]:
    return {stage: v["status"] for stage, v in json.loads(stdout)["manifests"][name].items()}


def _metrics(build_dir: Path) -> dict:
    return json.loads((build_dir / "report.json").read_text())["metrics"]


def _clean_build(root: Path, name: str = NAME, epochs: int = 1) -> Ref:
    write(root / "manifests" / f"{name}.yaml", TINY.format(name=name, epochs=epochs))
    start = time.monotonic()
    result = _run(["build", "--json"], root)
    seconds = time.monotonic() - start
    _clean(result, "clean build")
    assert result.returncode == 0, result.stderr
    assert set(_statuses(result.stdout, name).values()) == {"built"}
    build_dir = root / "build" / name
    return Ref(root, _outcomes(result.stdout, name), _files(build_dir), _metrics(build_dir),
               seconds)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Ref:
    """The clean build, and how long a cold build and a full restore take here."""
    clean = _clean_build(tmp_path_factory.mktemp("reference"))
    again = _project(tmp_path_factory.mktemp("restore"), clean, warm=True)
    start = time.monotonic()
    result = _run(["build", "--json"], again)
    restore_s = time.monotonic() - start
    assert result.returncode == 0, result.stderr
    assert set(_statuses(result.stdout).values()) == {"restored"}
    assert _files(again / "build" / NAME) == clean.artifacts
    return Ref(clean.root, clean.outcomes, clean.artifacts, clean.metrics, clean.build_s,
               restore_s)


def _project(root: Path, ref: Ref | None = None, warm: bool = False,
             name: str = NAME, manifest: str | None = None, epochs: int = 1) -> Path:
    """A project with the tiny manifest; `warm`: with a copy of the reference's cache."""
    write(root / "manifests" / (manifest or f"{name}.yaml"), TINY.format(name=name, epochs=epochs))
    if warm:
        assert ref is not None
        shutil.copytree(ref.cache, root / "cache", ignore=shutil.ignore_patterns(*NOT_COPIED))
    return root


def _assert_no_wrong_artifact(project: Path, ref: Ref, what: str, name: str = NAME) -> None:
    present = _files(project / "build" / name)
    wrong = sorted(rel for rel, sha in present.items() if ref.artifacts.get(rel) != sha)
    assert not wrong, f"{what}: artifacts that differ from the clean build: {wrong}"


def _wrong_entries(cache: Path, refs: list[Ref]) -> list[str]:
    """Cache entries whose files are not those of the clean build of the manifest their key
    belongs to — or whose key no clean build has, or without metadata."""
    expected = {key: ref.stage_files(stage) for ref in refs
                for stage, (key, _) in ref.outcomes.items()}
    wrong = []
    for entry in sorted(cache.glob("*/??/*")):
        stage, key = entry.parent.parent.name, entry.name
        if stage in CACHE_OWN or not entry.is_dir():
            continue
        if not (entry / "meta.json").is_file():
            wrong.append(f"{stage}/{key[:16]}: no meta.json")
        elif key not in expected:
            wrong.append(f"{stage}/{key[:16]}: a key no clean build has")
        elif _files(entry / "out", hidden=True) != expected[key]:
            wrong.append(f"{stage}/{key[:16]}: files differ from the clean build")
    return wrong


def _assert_verified(project: Path, what: str, *extra: str) -> None:
    verify = _run(["cache", "verify", *extra], project)
    _clean(verify, what)
    assert verify.returncode == 0, f"{what}: {verify.stderr}"
    assert " 0 corrupt" in verify.stderr, f"{what}: {verify.stderr}"


def _assert_builds_clean(project: Path, ref: Ref, what: str,
                         verify: bool = True) -> dict[str, str]:
    """A normal build now: exit 0, the clean build's keys, digests, bytes and report
    numbers; no cache entry is wrong and (`verify`) `cache verify` finds none corrupt."""
    result = _run(["build", "--json"], project)
    _clean(result, what)
    assert result.returncode == 0, f"{what}: {result.stderr}"
    assert _outcomes(result.stdout) == ref.outcomes, what
    assert _files(project / "build" / NAME) == ref.artifacts, what
    assert _metrics(project / "build" / NAME) == ref.metrics, what
    if verify:
        _assert_verified(project, what)
    assert not _wrong_entries(project / "cache", [ref]), what
    return _statuses(result.stdout)


def _moments(name: str, count: int, low: float, high: float) -> list[float]:
    rng = random.Random(f"{SEED}:{name}")
    return [round(rng.uniform(low, high), 3) for _ in range(count)]


# --- kill -9 ------------------------------------------------------------------------------


def _kill_trial(ref: Ref, project: Path, delay: float, what: str) -> float | None:
    """kill -9 the build's whole session after `delay` s; None if it was still running, else
    how long the build took."""
    start = time.monotonic()
    proc = _spawn(["build", "--json"], project)
    try:
        _wait(proc, start + delay)
        finished = proc.poll() is not None
        took = time.monotonic() - start
    finally:
        _kill_session(proc.pid)
    out, err = proc.communicate(timeout=30)
    _clean((out, err), what)
    if finished:  # the build was faster than the moment drawn: it must have succeeded
        assert proc.returncode == 0, f"{what}: {err}"
    _assert_no_wrong_artifact(project, ref, f"{what}, right after the kill")
    assert not _wrong_entries(project / "cache", [ref]), f"{what}, right after the kill"
    _assert_builds_clean(project, ref, f"{what}, the build after it")
    return took if finished else None


@pytest.mark.slow
def test_kill_9_during_a_cold_build(ref, tmp_path):
    """Moments up to 0.95 x the reference build's length, measured once: on a shared machine
    whose load falls after that measurement a moment can land after the build ended (that
    trial then checks a finished build: success, no wrong artifact) and is tried again at
    the same fraction of the length that build took; most, not all, must kill a running
    build."""
    delays = _moments("kill-build", 6, 0.05, 0.95 * ref.build_s)

    def trial(item: tuple[int, float]) -> bool:
        n, delay = item
        took = _kill_trial(ref, _project(tmp_path / f"t{n}"), delay,
                           f"kill -9 after {delay} s of a cold build")
        if took is None:
            return True
        again = round(max(0.05, delay / ref.build_s * took), 3)
        return _kill_trial(ref, _project(tmp_path / f"r{n}"), again,
                           f"kill -9 after {again} s of a cold build (again)") is None

    killed = _in_pairs(trial, enumerate(delays))
    assert sum(killed) >= len(delays) - 1, dict(zip(delays, killed, strict=True))


@pytest.mark.slow
def test_kill_9_during_a_restore(ref, tmp_path):
    """Moments up to 1.1 x a restore's length: a few land after it ended (its last writes,
    the lock file and the no-op index, are then covered)."""
    delays = _moments("kill-restore", 8, 0.05, 1.1 * ref.restore_s)
    killed = _in_pairs(lambda trial: _kill_trial(
        ref, _project(tmp_path / f"t{trial[0]}", ref, warm=True), trial[1],
        f"kill -9 after {trial[1]} s of a restore") is None, enumerate(delays))
    assert sum(killed) >= len(delays) // 2, dict(zip(delays, killed, strict=True))


def test_kill_9_of_the_supervisor_alone_leaves_no_process(ref, tmp_path):
    """`kill -9 PID` of the supervisor only, while doit's -j 2 stage processes run: none of
    them may outlive it (they would hold the tree's claim and stall every later build)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("-j is capped at the cores: one core runs stages in-process")
    project = _project(tmp_path, ref, warm=True)
    write(project / "manifests" / "tiny2.yaml", TINY.format(name="tiny2", epochs=1))
    shutil.rmtree(project / "cache" / "validate")  # so that stage processes have work to do
    proc = _spawn(["build", "--json", "-j", "2", "--until", "validate"], project)
    try:
        deadline = time.monotonic() + 60
        stage_processes: list[int] = []
        while proc.poll() is None and not stage_processes and time.monotonic() < deadline:
            worker = _supervising(proc.pid)
            stage_processes = [pid for pid, (state, ppid, _, _) in _processes().items()
                               if worker and ppid == worker and state not in ("Z", "X")]
            time.sleep(0.005)
        assert stage_processes, "doit's stage processes never started"
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        while _alive(proc.pid) and time.monotonic() - killed < 2:
            time.sleep(0.01)
        left = _alive(proc.pid)
    finally:
        _kill_session(proc.pid)
    _clean(proc.communicate(timeout=30), "the killed build")
    assert not left, f"alive 2 s after the supervisor was killed: {left}"
    result = _run(["build", "--json", "-j", "2", "--until", "validate"], project, timeout=60)
    _clean(result, "the build after it")
    assert result.returncode == 0, result.stderr
    assert "waiting for" not in result.stderr, result.stderr
    assert _outcomes(result.stdout)["validate"] == ref.outcomes["validate"]
    _assert_no_wrong_artifact(project, ref, "after the supervisor was killed")


# --- SIGINT, SIGTERM ----------------------------------------------------------------------


def _signal_trial(ref: Ref, project: Path, number: signal.Signals, delay: float,
                  what: str) -> bool:
    """Send `number` after `delay` s (once the supervisor handles signals); True if the
    build was still running then."""
    proc = _spawn(["build", "--json"], project)
    sent = exited = None
    left: dict[int, int] = {}
    try:
        start, worker = time.monotonic(), None
        while proc.poll() is None:
            # a signal before the supervisor handles any is test_signal_during_startup's
            worker = worker or _supervising(proc.pid)
            if worker and time.monotonic() - start >= delay:
                sent = time.monotonic()
                if number == signal.SIGINT:
                    os.killpg(proc.pid, number)  # Ctrl-C: the terminal's (supervisor's) group
                else:
                    os.kill(proc.pid, number)
                break
            time.sleep(0.005)
        out, err = proc.communicate(timeout=30)
        if sent is not None:
            exited = time.monotonic() - sent
            while time.monotonic() - sent < 2 and (_alive(proc.pid) or _alive_group(worker)):
                time.sleep(0.01)
            left = {**_alive(proc.pid), **{pid: worker for pid in _alive_group(worker)}}
    finally:
        _kill_session(proc.pid)
    _clean((out, err), what)
    if sent is None:  # the build was faster than the moment drawn: a complete build
        assert proc.returncode == 0, f"{what}: {err}"
    else:
        assert proc.returncode == 128 + number, f"{what}: status {proc.returncode}\n{err}"
        assert exited is not None and exited < 2, f"{what}: exited {exited} s after it"
        assert not left, f"{what}: alive 2 s after the signal (worker group {worker}): {left}"
        mentions = [line for line in _lines(err) if number.name in line
                    or "interrupt" in line.lower()]
        assert len(mentions) == 1 and number.name in mentions[0], f"{what}:\n{err}"
        assert not out.strip(), f"{what}: stdout {out!r}"
    _assert_no_wrong_artifact(project, ref, f"{what}, right after it")
    assert not _wrong_entries(project / "cache", [ref]), what
    _assert_builds_clean(project, ref, f"{what}, the build after it")
    return sent is not None


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_at_random_moments(ref, tmp_path, number):
    """Very early (0.05-0.3 s: the worker is importing) with a warm cache, and anywhere in
    a cold build."""
    early = [(True, d) for d in _moments(f"{number.name}-early", 3, 0.05, 0.3)]
    later = [(False, d) for d in _moments(f"{number.name}-later", 1, 0.3, 0.9 * ref.build_s)]

    def trial(item: tuple[int, tuple[bool, float]]) -> bool:
        index, (warm, delay) = item
        project = _project(tmp_path / f"t{index}", ref, warm=warm)
        return _signal_trial(ref, project, number, delay, f"{number.name} after {delay} s of "
                             f"a {'restore' if warm else 'cold build'}")

    delivered = _in_pairs(trial, enumerate(early + later))
    assert all(delivered), f"builds that ended before their signal: {delivered}"


SIGNAL_ON_IMPORT = textwrap.dedent("""\
    import importlib.abc, os, sys

    number = int(sys.argv[1])


    class SignalOnImport(importlib.abc.MetaPathFinder):
        # delivers the signal while edgebuild's command line imports its own modules
        def find_spec(self, name, path=None, target=None):
            if name == "edgebuild.core.errors":
                sys.meta_path.remove(self)
                os.kill(os.getpid(), number)
            return None


    sys.meta_path.insert(0, SignalOnImport())
    sys.argv = ["edgebuild", *sys.argv[2:]]
    from edgebuild.cli import entry  # exactly what the console script runs

    sys.exit(entry())
    """)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_startup(ref, tmp_path, number):
    """A signal while the `edgebuild` command imports its own modules (deterministic: an
    import hook sends it), i.e. the 0.05-0.3 s right after a start on a slow machine."""
    project = _project(tmp_path, ref, warm=True)
    script = tmp_path / "signal_on_import.py"
    script.write_text(SIGNAL_ON_IMPORT)
    result = subprocess.run([sys.executable, str(script), str(int(number)), "build", "--json"],
                            cwd=project, env=_env(), capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 128 + number, (result.returncode, result.stderr)
    mentions = [line for line in _lines(result.stderr) if number.name in line]
    assert len(mentions) == 1, result.stderr
    _assert_no_wrong_artifact(project, ref, "after it")


# --- concurrent builds --------------------------------------------------------------------


@pytest.mark.slow
def test_same_name_from_another_manifest_is_refused_while_the_first_builds(
        ref, tmp_path, tmp_path_factory):
    """manifests/a.yaml and manifests/b.yaml (epochs 2) are both named `tiny`: one tree, one
    cache. b, started while a builds, is refused (exit 2); if it ever waits instead and
    builds after a, every cache entry must still be the clean build of its own manifest."""
    _project(tmp_path, manifest="a.yaml")
    _project(tmp_path, manifest="b.yaml", epochs=2)
    first = _spawn(["build", "--json", "manifests/a.yaml"], tmp_path)
    try:
        claim = tmp_path / "build" / NAME / ".state" / "claim.json"
        started, deadline = time.monotonic(), time.monotonic() + 60
        while first.poll() is None and time.monotonic() < deadline:
            text = claim.read_text() if claim.is_file() else ""
            if "a.yaml" in text and time.monotonic() - started >= 1:
                break
            time.sleep(0.01)
        assert first.poll() is None, "a.yaml's build ended before b.yaml's started"
        second = _run(["build", "--json", "manifests/b.yaml"], tmp_path)
        out, err = first.communicate(timeout=300)
    finally:
        _kill_session(first.pid)
    _clean((out, err), "a.yaml")
    _clean(second, "b.yaml")
    assert first.returncode == 0, err
    assert _outcomes(out) == ref.outcomes
    refs = [ref]
    if second.returncode == 2:  # refused: one line naming both manifests and the name
        assert len(_lines(second.stderr)) == 1, second.stderr
        assert "b.yaml" in second.stderr and "a.yaml" in second.stderr, second.stderr
        assert "'tiny'" in second.stderr and "name" in second.stderr, second.stderr
        _no_success(second.stdout, "b.yaml")
        assert _files(tmp_path / "build" / NAME) == ref.artifacts
    else:  # it waited, then built: the tree is b's clean build, entries are each their own
        assert second.returncode == 0, second.stderr
        ref_b = _clean_build(tmp_path_factory.mktemp("reference_b"), epochs=2)
        assert _outcomes(second.stdout) == ref_b.outcomes
        assert _files(tmp_path / "build" / NAME) == ref_b.artifacts
        refs.append(ref_b)
    assert not _wrong_entries(tmp_path / "cache", refs)
    _assert_verified(tmp_path, "after both", "manifests/a.yaml")  # the project has a clash


@pytest.mark.slow
def test_same_manifest_twice_at_once_in_one_tree(ref, tmp_path):
    _project(tmp_path)
    procs = [_spawn(["build", "--json"], tmp_path)]
    time.sleep(0.5)
    procs.append(_spawn(["build", "--json"], tmp_path))
    try:
        results = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            _kill_session(proc.pid)
    for proc, (out, err) in zip(procs, results, strict=True):
        _clean((out, err), "a concurrent build")
        assert proc.returncode == 0, err
        assert _outcomes(out) == ref.outcomes
    statuses = [_statuses(out) for out, _ in results]
    for stage in STAGES:  # built once: the other waited and found it current
        assert [s[stage] for s in statuses].count("built") == 1, statuses
    assert _files(tmp_path / "build" / NAME) == ref.artifacts
    assert not _wrong_entries(tmp_path / "cache", [ref])
    _assert_verified(tmp_path, "after both")


@pytest.mark.slow
def test_same_manifest_in_two_trees_sharing_one_cache(ref, tmp_path):
    shared = tmp_path / "shared-cache"
    trees = [_project(tmp_path / name) for name in ("one", "two")]
    procs = [_spawn(["build", "--json", "--cache-dir", str(shared)], tree) for tree in trees]
    try:
        results = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            _kill_session(proc.pid)
    for proc, tree, (out, err) in zip(procs, trees, results, strict=True):
        _clean((out, err), str(tree))
        assert proc.returncode == 0, err
        assert _outcomes(out) == ref.outcomes
        assert _files(tree / "build" / NAME) == ref.artifacts
    statuses = [_statuses(out) for out, _ in results]
    for stage in STAGES:  # one process built each key, the other restored it
        assert [s[stage] for s in statuses].count("built") <= 1, statuses
    assert not _wrong_entries(shared, [ref])
    _assert_verified(trees[0], "after both", "--cache-dir", str(shared))


@pytest.mark.slow
@pytest.mark.parametrize("device", ["host", "max78000"])
def test_a_renamed_manifest_shares_only_keys_whose_files_are_alike(device, tmp_path):
    """`tiny` and `tiny2` differ only by name, each built cold with its own cache. Where a
    stage's key leaves the name out, so must its files: otherwise one key stands for two
    results, and under -j 2 a manifest got the file its twin built (float.onnx named the
    graph after the manifest). Renaming retrains nothing: the training stages share keys."""
    target = "target: {device: host, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}"
    outcomes = {}
    for name in (NAME, "tiny2"):
        root = tmp_path / name
        write(root / "manifests" / f"{name}.yaml", TINY.format(name=name, epochs=1).replace(
            target, f"target: {{device: {device}}}"))
        result = _run(["build", "--json"], root)
        _clean(result, f"{name} on {device}")
        assert result.returncode == 0, result.stderr
        outcomes[name] = _outcomes(result.stdout, name)
    one, two = outcomes[NAME], outcomes["tiny2"]
    assert one.keys() == two.keys()
    shared = {stage for stage in one if one[stage][0] == two[stage][0]}
    assert {"data", "train", "qat", "quantize"} <= shared
    assert {stage: one[stage][1] for stage in shared} == {stage: two[stage][1] for stage in shared}


@pytest.mark.slow
def test_two_manifests_with_j2(ref, tmp_path, tmp_path_factory):
    """`tiny` and `tiny2` differ only by name: in one tree with -j 2, their stage processes
    race for the keys they share; tiny must be its clean build and tiny2 a clean build of
    tiny2 (made afterwards, alone, from the reference's cache)."""
    _project(tmp_path)
    _project(tmp_path, name="tiny2")
    result = _run(["build", "--json", "-j", "2"], tmp_path)
    _clean(result, "-j 2")
    assert result.returncode == 0, result.stderr
    assert _outcomes(result.stdout) == ref.outcomes
    assert _files(tmp_path / "build" / NAME) == ref.artifacts
    alone = _project(tmp_path_factory.mktemp("tiny2_alone"), ref, warm=True, name="tiny2")
    clean2 = _run(["build", "--json"], alone)
    _clean(clean2, "tiny2 alone")
    assert clean2.returncode == 0, clean2.stderr
    assert _outcomes(result.stdout, "tiny2") == _outcomes(clean2.stdout, "tiny2")
    assert _files(tmp_path / "build" / "tiny2") == _files(alone / "build" / "tiny2")
    ref2 = Ref(alone, _outcomes(clean2.stdout, "tiny2"), _files(alone / "build" / "tiny2"),
               {}, 0)
    assert not _wrong_entries(tmp_path / "cache", [ref, ref2])
    _assert_verified(tmp_path, "after -j 2")


# --- corrupt cache entries ----------------------------------------------------------------


def _writable(path: Path) -> Path:
    path.chmod(path.stat().st_mode | 0o200)  # entries are read-only (a no-op for root)
    return path


def _meta(entry: Path) -> dict:
    return json.loads((entry / "meta.json").read_text())


def _set_meta(entry: Path, text: str) -> None:
    _writable(entry / "meta.json").write_text(text)


def _first_file(entry: Path) -> Path:
    return entry / "out" / sorted(_meta(entry)["files"])[0]


def _restamped(entry: Path) -> str:
    """meta.json claiming another content for one file, its digest made consistent."""
    meta = _meta(entry)
    first = sorted(meta["files"])[0]
    meta["files"][first] = "0" * 64
    files = json.dumps(meta["files"], sort_keys=True, separators=(",", ":")).encode()
    meta["digest"] = hashlib.sha256(files).hexdigest()
    return json.dumps(meta)


CORRUPTIONS: dict[str, tuple[str, Callable[[Path], None]]] = {
    # name: (stage whose entry is corrupted, how)
    "meta-empty-object": ("validate", lambda e: _set_meta(e, "{}")),
    "meta-empty-file": ("data", lambda e: _set_meta(e, "")),
    "meta-truncated": ("quantize", lambda e: _set_meta(e, (e / "meta.json").read_text()[:150])),
    "meta-digest-mismatch": ("plan", lambda e: _set_meta(e, json.dumps(
        {**_meta(e), "digest": "0" * 64}))),
    "meta-files-mismatch": ("codegen", lambda e: _set_meta(e, _restamped(e))),
    "blob-changed": ("evaluate", lambda e: _writable(_first_file(e)).write_bytes(
        bytes([_first_file(e).read_bytes()[0] ^ 1]) + _first_file(e).read_bytes()[1:])),
    "blob-truncated": ("data", lambda e: _writable(_first_file(e)).write_bytes(
        _first_file(e).read_bytes()[:7])),
    "blob-deleted": ("report", lambda e: _first_file(e).unlink()),
    "blob-extra-file": ("validate", lambda e: (e / "out" / "notes.txt").write_text("mine")),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_corrupt_cache_entry(ref, tmp_path, corruption):
    """verify names the entry (exit 1); a build rebuilds it with the right bytes; verify
    --delete removes a corrupt entry (exit 0)."""
    stage, corrupt = CORRUPTIONS[corruption]
    project = _project(tmp_path, ref, warm=True)
    key = ref.outcomes[stage][0]
    entry = project / "cache" / stage / key[:2] / key
    corrupt(entry)

    verify = _run(["cache", "verify"], project)
    _clean(verify, "verify")
    assert verify.returncode == 1, verify.stderr
    assert f"{stage}/{key[:16]}" in verify.stderr and " 1 corrupt" in verify.stderr, verify.stderr

    statuses = _assert_builds_clean(project, ref, corruption, verify=False)  # entries: checked
    assert statuses[stage] == "built", statuses
    assert {s for s, status in statuses.items() if status != "restored"} == {stage}, statuses

    corrupt(entry)
    delete = _run(["cache", "verify", "--delete"], project)
    _clean(delete, "verify --delete")
    assert delete.returncode == 0, delete.stderr
    assert f"{stage}/{key[:16]}" in delete.stderr and "1 deleted" in delete.stderr, delete.stderr
    assert not entry.exists()
    _assert_no_wrong_artifact(project, ref, "after --delete")


# --- corrupt state records and lock files -------------------------------------------------


@pytest.mark.parametrize("record", ["", "{}", "truncated", "[]", "null", '"x"',
                                    '{"key": 1, "digest": [], "material": 0, "files": 3}'])
def test_corrupt_state_record(ref, tmp_path, record):
    project = _project(tmp_path, ref, warm=True)
    first = _run(["build", "--json"], project)
    assert first.returncode == 0, first.stderr
    state = project / "build" / NAME / ".state" / "train.json"
    state.write_text(state.read_text()[:200] if record == "truncated" else record)
    statuses = _assert_builds_clean(project, ref, f"state record {record!r}", verify=False)
    assert statuses["train"] == "restored", statuses


def test_corrupt_noop_index(ref, tmp_path):
    """build/.edgebuild/index-*.json (the no-op index) unreadable or of another shape: the
    full up-to-date check answers instead."""
    project = _project(tmp_path, ref, warm=True)
    assert _run(["build"], project).returncode == 0
    index = next((project / "build" / ".edgebuild").glob("index-*.json"))
    text = index.read_text()
    for record in ("", "{}", "[]", "null", text[:100], '{"version": 1, "manifests": []}'):
        index.write_text(record)
        statuses = _assert_builds_clean(project, ref, f"no-op index {record!r}", verify=False)
        assert set(statuses.values()) == {"uptodate"}, statuses


LOCKS = {
    "empty": "",
    "empty-object": "{}",
    "truncated": '{"version": 1, "manifests": {"tiny": {"validate": {"key": "',
    "binary-garbage": "\x00\xff\xfe garbage \x01",
    "array": "[]",
    "null": "null",
    "string": '"edgebuild"',
    "manifests-array": '{"version": 1, "manifests": []}',
    "manifest-array": '{"version": 1, "manifests": {"tiny": []}}',
    "stage-string": '{"version": 1, "manifests": {"tiny": {"validate": "x"}}}',
    "key-number": '{"version": 1, "manifests": {"tiny": {"validate": {"key": 1, "digest": 2}}}}',
    "version-2": '{"version": 2, "manifests": {}}',
}


@pytest.mark.parametrize("lock", list(LOCKS))
def test_corrupt_lock_file(tmp_path, lock):
    project = _project(tmp_path)
    path = project / "edgebuild.lock"
    path.write_bytes(LOCKS[lock].encode("latin-1"))
    commands = [["build", "--json", "--until", "validate"]]
    if lock in ("empty", "stage-string"):
        commands.append(["build", "--locked", "--until", "validate"])
    for args in commands:
        result = _run(args, project)
        _clean(result, f"lock {lock!r}")
        assert result.returncode == 2, result.stderr
        assert len(_lines(result.stderr)) == 1 and "edgebuild.lock" in result.stderr, \
            result.stderr
        _no_success(result.stdout, lock)
    assert path.read_bytes() == LOCKS[lock].encode("latin-1")
    assert not _files(project / "build" / NAME)


# --- unwritable places --------------------------------------------------------------------


def _unwritable_build(project: Path, how: str) -> None:
    """Root ignores permission bits: then a directory edgebuild must create is a regular
    file (or lies below one); other users also get the permission bits."""
    build = project / "build"
    if how == "build-is-a-file":
        build.write_text("")
    elif how == "tree-is-a-file":
        build.mkdir()
        (build / NAME).write_text("")
    elif how == "state-is-a-file":
        (build / NAME).mkdir(parents=True)
        (build / NAME / ".state").write_text("")
    else:  # "read-only-bits"
        build.mkdir()
        build.chmod(0o555)


@pytest.mark.parametrize("how", [
    "build-is-a-file", "tree-is-a-file", "state-is-a-file",
    pytest.param("read-only-bits", marks=pytest.mark.skipif(
        os.geteuid() == 0, reason="root ignores permission bits")),
])
def test_read_only_build_directory(ref, tmp_path, how):
    project = _project(tmp_path, ref, warm=True)
    _unwritable_build(project, how)
    try:
        result = _run(["build", "--json"], project)
    finally:
        if (project / "build").is_dir():
            (project / "build").chmod(0o755)
    _clean(result, how)
    assert result.returncode == 2, result.stderr
    assert len(_lines(result.stderr)) == 1, result.stderr
    assert "build" in result.stderr, result.stderr
    _no_success(result.stdout, how)
    _assert_no_wrong_artifact(project, ref, how)


@pytest.mark.parametrize("where", ["stage", "moved-aside"])
def test_a_file_where_a_stage_directory_belongs(ref, tmp_path, where):
    """build/<name>/<stage> replaced by a regular file (or one left where a killed
    materialization moves old outputs aside) is an edited output: it is replaced."""
    project = _project(tmp_path, ref, warm=True)
    assert _run(["build"], project).returncode == 0
    target = project / "build" / NAME / ("data" if where == "stage" else ".old-data-0badf00d")
    if target.exists():
        shutil.rmtree(target)
    target.write_text("not a directory")
    if where == "moved-aside":  # make `data` run, which sweeps what it left before
        shutil.rmtree(project / "build" / NAME / "data")
    statuses = _assert_builds_clean(project, ref, where, verify=False)
    assert statuses["data"] == "restored", statuses
    assert not target.exists() or target.is_dir()


def _read_only_cache(cache: Path) -> Callable[[], None]:
    """As tests/test_pipeline.py's _make_read_only, plus permission bits for other users;
    returns the undo (permission bits only)."""
    for name in CACHE_OWN:
        shutil.rmtree(cache / name, ignore_errors=True)
        (cache / name).write_text("")
    if os.geteuid() == 0:
        return lambda: None
    paths = [cache, *cache.rglob("*")]
    for path in paths:
        path.chmod(path.stat().st_mode & ~0o222)
    return lambda: [path.chmod(path.stat().st_mode | 0o200) for path in paths]


def _cache_listing(cache: Path) -> dict[str, str]:
    """The cache's files but the `used` stamps (best effort, for `cache gc`: root, for whom
    the simulated read-only cache is writable, leaves them)."""
    return {p.relative_to(cache).as_posix(): _sha(p) for p in cache.rglob("*")
            if p.is_file() and p.name != "used"}


@pytest.mark.parametrize("warmth", ["warm", "report-missing"])
def test_read_only_cache(ref, tmp_path, warmth):
    """Restores from a read-only cache succeed; a stage it lacks is built, unpublished."""
    project = _project(tmp_path, ref, warm=True)
    if warmth == "report-missing":
        shutil.rmtree(project / "cache" / "report")
    undo = _read_only_cache(project / "cache")
    before = _cache_listing(project / "cache")
    try:
        statuses = _assert_builds_clean(project, ref, f"read-only {warmth} cache")
    finally:
        undo()
    expected = {s: "restored" for s in STAGES}
    if warmth == "report-missing":
        expected["report"] = "built"
    assert statuses == expected
    assert _cache_listing(project / "cache") == before


# --- a full disk --------------------------------------------------------------------------


def _assert_failed_cleanly(result: subprocess.CompletedProcess, ref: Ref, what: str,
                           cause: str) -> str:
    """Exit 1 or 2, no traceback, one root failure whose message (a few lines) matches
    `cause`, its stage named (the stages after it are one "skipped" entry each in --json
    and one summary line on stderr); the stages
    reported done are the clean build's. Returns the failed stage."""
    _clean(result, what)
    assert result.returncode in (1, 2), f"{what}: {result.returncode}\n{result.stderr}"
    failures = json.loads(result.stdout)["failures"] if result.stdout.strip() else []
    roots = [f for f in failures if f["kind"] != "skipped"]
    assert len(roots) == 1, f"{what}: {result.stderr}"
    message = roots[0]["message"]
    assert 1 <= len(_lines(message)) <= 5 and re.search(cause, message), f"{what}: {message}"
    assert re.search(rf"(?m)^{re.escape(roots[0]['task'])}\s+FAILED$", result.stderr), \
        result.stderr
    for failure in failures:
        if failure["kind"] == "skipped":
            assert len(_lines(failure["message"])) == 1, failure
    for stage, outcome in _outcomes(result.stdout).items():
        assert outcome == ref.outcomes[stage], f"{what}: {stage}"
    return roots[0]["task"].split(".", 1)[1]


def _file_size_limit(limit: int) -> Callable[[], None]:
    """For preexec_fn: files may not grow beyond `limit` bytes; a write that would fails
    with EFBIG (SIGXFSZ, which would kill the process instead, is ignored)."""
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limited


@pytest.mark.slow
def test_file_size_limit(ref, tmp_path):
    """RLIMIT_FSIZE (SIGXFSZ ignored: writes fail with EFBIG) just above every file of the
    stages up to codegen: a later stage fails, named, in a few lines; without the limit
    the next build finishes and equals the clean build."""
    sizes = {rel: (ref.root / "build" / NAME / rel).stat().st_size for rel in ref.artifacts}
    limit = max(size for rel, size in sizes.items()
                if rel.split("/")[0] in STAGES[:STAGES.index("codegen") + 1]) + 1
    assert max(sizes.values()) > limit

    project = _project(tmp_path)
    result = _run(["build", "--json"], project, preexec=_file_size_limit(limit))
    stage = _assert_failed_cleanly(result, ref, "RLIMIT_FSIZE",
                                   r"File too large|size limit|File size limit")
    assert STAGES.index(stage) > STAGES.index("codegen"), stage
    _assert_no_wrong_artifact(project, ref, "under the limit")
    assert not _wrong_entries(project / "cache", [ref])
    _assert_builds_clean(project, ref, "without the limit")


@pytest.mark.slow
def test_full_disk(ref, tmp_path):
    """The project on a tmpfs half the size it needs (skipped where mounting is not
    permitted), then the same tmpfs grown."""
    need = sum(p.stat().st_size // 4096 * 4096 + 4096 for p in ref.root.rglob("*"))
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={need // 2}", "tmpfs",
                            str(disk)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mount.stderr.strip()}")
    try:
        project = _project(disk / "project")
        result = _run(["build", "--json"], project)
        _assert_failed_cleanly(result, ref, "a full disk", "No space left on device")
        _assert_no_wrong_artifact(project, ref, "on a full disk")
        assert not _wrong_entries(project / "cache", [ref])
        subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)
        _assert_builds_clean(project, ref, "with space again")
        strays = [p.name for p in project.iterdir() if p.name.endswith(".tmp")]
        assert not strays, f"temp files beside edgebuild.lock: {strays}"
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_lock_file_that_cannot_be_written(ref, tmp_path):
    """The last write of a build, edgebuild.lock, fails (files limited to 100 bytes): one
    line naming the file, no temp file left beside it; the next build writes it."""
    project = _project(tmp_path, ref, warm=True)
    assert _run(["build"], project).returncode == 0
    (project / "edgebuild.lock").unlink()
    result = _run(["build", "--json"], project, preexec=_file_size_limit(100))
    _clean(result, "lock write")
    assert result.returncode == 2, result.stderr
    problems = [line for line in _lines(result.stderr) if not STAGE_LINE.match(line)]
    assert len(problems) == 1 and "edgebuild.lock" in problems[0], result.stderr
    strays = [p.name for p in [*project.iterdir(), *(project / "build").rglob("*")]
              if p.name.endswith(".tmp")]
    assert not strays, strays
    _assert_no_wrong_artifact(project, ref, "lock write")
    _assert_builds_clean(project, ref, "after the failed lock write", verify=False)
    assert (project / "edgebuild.lock").is_file()


def test_a_failed_copy_is_described_by_its_cause(tmp_path):
    """Restoring a stage copies it with shutil.copytree, whose shutil.Error has no errno,
    strerror nor filename: on a full disk the stage said only "Error" (test_full_disk)."""
    from edgebuild.core.errors import describe

    (tmp_path / "out").mkdir()
    for name in ("a.json", "b.json"):
        (tmp_path / "out" / name).write_text("{}")

    def full(source: str, destination: str) -> None:
        raise OSError(28, os.strerror(28), destination)

    with pytest.raises(shutil.Error) as failed:
        shutil.copytree(tmp_path / "out", tmp_path / "copy", copy_function=full)
    text = describe(failed.value)
    assert os.strerror(28) in text and str(tmp_path / "copy") in text, text
    assert "free space" in text and "1 more" in text and "\n" not in text, text


# --- a pickled dataset --------------------------------------------------------------------



class _MkdirWhenUnpickled:
    """Pickles as a call of os.mkdir(marker): loading the array creates the marker."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return os.mkdir, (self.marker,)


def _pickled_project(root: Path) -> tuple[Path, Path]:
    import numpy as np

    marker = root / "unpickled"
    x = np.empty((60,), dtype=object)
    x[:] = [np.zeros((1, 4, 4), np.float32) for _ in range(60)]
    x[0] = _MkdirWhenUnpickled(marker)
    np.savez(root / "data.npz", x=x, y=np.arange(60) % 3)
    write(root / "edgebuild.yaml", NPZ_MANIFEST.replace("name: tiny", "name: pickled"))
    return root, marker


def _rejected(root: Path, marker: Path) -> list[str]:
    messages = []
    for args in (["check"], ["build", "--json", "--until", "data"]):
        result = _run(args, root)
        _clean(result, " ".join(args))
        assert result.returncode == 2, result.stderr
        assert "data.npz" in result.stderr, result.stderr
        assert len(_lines(result.stderr)) == 1, result.stderr
        _no_success(result.stdout, "pickled data")
        assert not marker.exists(), "the pickle was loaded"
        messages.append(result.stderr)
    assert not _files(root / "build" / "pickled")
    return messages


def test_pickled_npz_is_rejected_unloaded(tmp_path):
    _rejected(*_pickled_project(tmp_path))


def test_pickled_npz_message_does_not_suggest_allow_pickle(tmp_path):
    for message in _rejected(*_pickled_project(tmp_path)):
        assert "allow_pickle" not in message, message
