"""The DAG executor: doit, embedded. The only module that imports doit.

One doit task per (manifest, stage), named `<manifest>.<stage>`, depending on its upstream
stages. doit orders them, runs independent ones in parallel (`-j N`, processes) and asks
each task's `uptodate` callable — our cache key check — before running it. Its own config
files (pyproject.toml, doit.cfg) are ignored; its dependency DB is sqlite3 (dbm and json
lose records when two processes write). doit writes that DB only at the end of a run, so
the source of truth stays our cache and state records, which are written per stage.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO, TypedDict

from doit.cmd_base import Command, TaskLoader2
from doit.doit_cmd import DoitMain
from doit.exceptions import BaseFail, TaskFailed, UnmetDependency
from doit.reporter import ConsoleReporter
from doit.task import Task, dict_to_task

from edgebuild.core.errors import StageFailed, UserError, describe
from edgebuild.pipeline import budget, builder, outputs
from edgebuild.pipeline import cache as caches
from edgebuild.pipeline.claim import claimed
from edgebuild.pipeline.lock import Lock, LockEntry
from edgebuild.pipeline.project import Project
from edgebuild.pipeline.resolved import Resolved
from edgebuild.pipeline.stages import STAGES, closure, upstream

if TYPE_CHECKING:
    from edgebuild.pipeline.validation import Checked


class UserFailure(TaskFailed):
    """A stage met bad user input (exit status 2, not 1)."""


class StageRecord(TypedDict):
    """One stage's outcome: a doit task's values, a `--json` entry, the lock's source."""

    status: Literal["uptodate", "restored", "built"]
    key: str
    digest: str
    seconds: float


@dataclass
class Run:
    """What happened, collected in the main process (the reporter and uptodate checks)."""

    outcomes: dict[str, dict[str, StageRecord]] = field(default_factory=dict)  # manifest, stage
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # task, message, kind

    @property
    def user_error_only(self) -> bool:
        """Every root failure was bad user input (-> exit 2 rather than 1)."""
        kinds = {kind for _, _, kind in self.failures if kind != "skipped"}
        return kinds == {"user"}


_RUN = Run()


def task_name(manifest: str, stage: str) -> str:
    return f"{manifest}.{stage}"


def _split(name: str) -> tuple[str, str]:
    manifest, stage = name.split(".", 1)
    return manifest, stage


@dataclass(frozen=True)
class Options:
    """How a run treats the lock file and errors; plain data, sent to doit workers."""

    lock: Lock | None = None  # edgebuild.lock: its digests are promises (see builder)
    strict: bool = False  # --locked: keys must match the lock too
    threads: int = 1  # torch/BLAS threads per stage process (the CPU budget)
    debug: bool = False  # tracebacks instead of one-line internal errors


def stage_action(manifest_path: str, display: str, stage: str, build_dir: str,
                 cache_root: str, locked: LockEntry | None, expected: str,
                 options: Options) -> StageRecord | TaskFailed:
    """Runs in a doit worker (possibly another process): plain-data arguments only.
    `expected` is the stage's config as the run resolved it (canonical JSON)."""
    budget.apply(options.threads)
    from edgebuild.pipeline import validation

    try:
        checked = validation.load(Path(manifest_path), display)
        _same_manifest(checked, stage, expected)
        outcome = builder.realize(checked, stage, Path(build_dir), Path(cache_root), locked,
                                  options.strict)
    except UserError as exc:
        return UserFailure(str(exc))
    except StageFailed as exc:
        return TaskFailed(str(exc))
    except OSError as exc:
        return TaskFailed(f"stage {stage}: {describe(exc)}")
    except Exception as exc:
        if options.debug:
            raise
        return TaskFailed(f"stage {stage}: internal error {type(exc).__name__}: {exc} "
                          "(run with --debug for the traceback, and please report it)")
    return {"status": outcome.status, "key": outcome.key, "digest": outcome.digest,
            "seconds": round(outcome.seconds, 3)}


def _same_manifest(checked: Checked, stage: str, expected: str) -> None:
    """The worker re-reads the manifest: if it was edited since the run began, the stage
    would build from other settings than the run checked. Stop instead."""
    from edgebuild.pipeline.resolved import from_checked

    now = from_checked(checked)
    if caches.canonical([now.configs.get(stage), now.files.get(stage)]).decode() != expected:
        raise UserError(f"{checked.document.path} changed while it was being built; "
                        "run edgebuild again")


def _expected(resolved: Resolved, stage: str) -> str:
    return caches.canonical([resolved.configs.get(stage), resolved.files.get(stage)]).decode()


def _uptodate(resolved: Resolved, stage: str, build_dir: Path, cache_root: Path,
              locked: LockEntry | None, strict: bool) -> Callable[[], bool]:
    def check() -> bool:
        start = time.perf_counter()
        try:
            material = builder.key_material(STAGES[stage], resolved, build_dir, cache_root)
        except (UserError, StageFailed, OSError):
            return False  # let the action run and report the problem properly
        key = caches.key_of(material)
        state = outputs.current(build_dir, stage, key)
        if state is None or not _promised(key, state.digest, locked, strict):
            return False  # the action runs, and names what differs
        _record(task_name(resolved.name, stage), {
            "status": "uptodate", "key": key, "digest": state.digest,
            "seconds": round(time.perf_counter() - start, 3)})
        return True
    return check


def _promised(key: str, digest: str, locked: LockEntry | None, strict: bool) -> bool:
    """Does an up-to-date output keep the lock's promise (builder._keep_promise)?"""
    if locked is None:
        return True
    if strict:
        return locked.get("key") == key and locked.get("digest") == digest
    return locked.get("key") != key or locked.get("digest") in (None, digest)


def _record(name: str, values: StageRecord) -> None:
    manifest, stage = _split(name)
    _RUN.outcomes.setdefault(manifest, {})[stage] = values.copy()


def _tasks(project: Project, until: str | None, options: Options) -> list[Task]:
    tasks = []
    for resolved in project.manifests:
        name = resolved.name
        build_dir = project.build_dir(name)
        for stage in closure(until) if until else list(STAGES):
            if stage not in resolved.configs:
                continue  # the stage does not exist for this manifest (stages/base.py)
            locked = None if options.lock is None else options.lock.get(name, {}).get(stage)
            tasks.append(dict_to_task({
                "name": task_name(name, stage),
                "actions": [(stage_action, [resolved.path, resolved.display, stage,
                                            str(build_dir), str(project.cache_root), locked,
                                            _expected(resolved, stage), options])],
                "task_dep": [task_name(name, up) for up in upstream(STAGES[stage],
                                                                     resolved.configs)],
                "uptodate": [_uptodate(resolved, stage, build_dir, project.cache_root, locked,
                                       options.strict)],
                "verbosity": 2,
                "doc": STAGES[stage].summary,
            }))
    return tasks


class _Loader(TaskLoader2):
    def __init__(self, tasks: list[Task], dep_file: Path) -> None:
        super().__init__()
        self.tasks, self.dep_file = tasks, dep_file

    def setup(self, opt_values: dict[str, object]) -> None:
        pass

    def load_doit_config(self) -> dict[str, object]:
        return {"dep_file": str(self.dep_file), "backend": "sqlite3", "verbosity": 2,
                "reporter": StageReporter, "check_file_uptodate": "md5"}

    def load_tasks(self, cmd: Command, pos_args: list[str]) -> list[Task]:
        return self.tasks


class StageReporter(ConsoleReporter):
    """One line per stage on stderr: stdout is reserved for `--json`."""

    def __init__(self, outstream: TextIO, options: Mapping[str, object]) -> None:
        super().__init__(sys.stderr, options)

    def execute_task(self, task: Task) -> None:
        pass

    def skip_uptodate(self, task: Task) -> None:
        self._line(task.name, _RUN.outcomes[_split(task.name)[0]][_split(task.name)[1]])

    def add_success(self, task: Task) -> None:
        _record(task.name, task.values)
        self._line(task.name, task.values)

    def add_failure(self, task: Task, fail_info: BaseFail) -> None:
        if isinstance(fail_info, UnmetDependency):
            message, kind = f"skipped: upstream stage {fail_info.message.strip()} failed", "skipped"
        else:
            message = fail_info.get_msg()
            kind = "user" if isinstance(fail_info, UserFailure) else "failed"
        _RUN.failures.append((task.name, message.strip(), kind))
        self.outstream.write(f"{task.name:<24} FAILED\n{_indent(message)}\n")

    def skip_ignore(self, task: Task) -> None:
        pass

    def complete_run(self) -> None:
        self.outstream.flush()

    def _line(self, name: str, values: StageRecord) -> None:
        label = {"built": "built", "restored": "restored", "uptodate": "up to date"}[values["status"]]
        self.outstream.write(f"{name:<24} {label:<11} {values['seconds']:7.2f}s  "
                             f"{values['key'][:12]}\n")
        self.outstream.flush()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())


def run(project: Project, until: str | None = None, jobs: int = 1,
        options: Options | None = None) -> Run:
    """Build every stage (up to `until`) of every manifest in the project."""
    global _RUN
    _RUN = Run()
    options = replace(options or Options(), threads=budget.threads_per_stage(jobs))
    _writable(project.build_root)
    if not caches.Cache(project.cache_root).writable:
        print(f"edgebuild: cache {project.cache_root} is read-only (or cannot be created): "
              "restoring from it only; stages that must run are built but not cached",
              file=sys.stderr, flush=True)
    tasks = _tasks(project, until, options)
    # doit's dependency DB lives in memory: our cache and state records are the truth, so
    # there is no file to corrupt, lock or find read-only
    loader = _Loader(tasks, Path(":memory:"))
    args = ["run", "--continue"]
    if jobs > 1:
        args += ["-n", str(jobs), "-P", "process"]
    trees = [(project.build_dir(m.name), m) for m in project.manifests]
    with claimed(trees):
        code = DoitMain(loader, config_filenames=()).run(args + [t.name for t in tasks])
    if code != 0 and not _RUN.failures:
        _RUN.failures.append(("edgebuild", f"the scheduler stopped with status {code} "
                              "(run with --debug to see why)", "failed"))
    return _RUN


def _writable(build_root: Path) -> None:
    """A build that cannot write its tree fails before any stage, as a user error."""
    probe = build_root / ".edgebuild" / f".probe-{os.getpid()}"
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"build directory {build_root} is not writable: {describe(exc)}") \
            from None
