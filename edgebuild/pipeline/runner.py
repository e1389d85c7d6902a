"""The DAG executor: doit, embedded. The only module that imports doit.

One doit task per (manifest, stage), named `<manifest>.<stage>`, depending on its upstream
stages. doit orders them, runs independent ones in parallel (`-j N`, processes) and asks
each task's `uptodate` callable — our cache key check — before running it. Its own config
files (pyproject.toml, doit.cfg) are ignored; its dependency DB is sqlite3 (dbm and json
lose records when two processes write). doit writes that DB only at the end of a run, so
the source of truth stays our cache and state records, which are written per stage.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO, TypedDict

from doit.cmd_base import Command, TaskLoader2
from doit.doit_cmd import DoitMain
from doit.exceptions import BaseFail, TaskFailed, UnmetDependency
from doit.reporter import ConsoleReporter
from doit.task import Task, dict_to_task

from edgebuild.core.errors import StageFailed, UserError
from edgebuild.pipeline import builder, outputs
from edgebuild.pipeline import cache as caches
from edgebuild.pipeline.lock import Lock, LockEntry
from edgebuild.pipeline.project import Project
from edgebuild.pipeline.resolved import Resolved
from edgebuild.pipeline.stages import STAGES, closure, upstream


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


def stage_action(manifest_path: str, display: str, stage: str, build_dir: str,
                 cache_root: str, locked: LockEntry | None) -> StageRecord | TaskFailed:
    """Runs in a doit worker (possibly another process): plain-data arguments only."""
    from edgebuild.pipeline import validation

    try:
        checked = validation.load(Path(manifest_path), display)
        outcome = builder.realize(checked, stage, Path(build_dir), Path(cache_root), locked)
    except UserError as exc:
        return UserFailure(str(exc))
    except StageFailed as exc:
        return TaskFailed(str(exc))
    return {"status": outcome.status, "key": outcome.key, "digest": outcome.digest,
            "seconds": round(outcome.seconds, 3)}


def _uptodate(resolved: Resolved, stage: str, build_dir: Path, cache_root: Path,
              locked: LockEntry | None) -> Callable[[], bool]:
    def check() -> bool:
        start = time.perf_counter()
        try:
            material = builder.key_material(STAGES[stage], resolved, build_dir, cache_root)
        except (UserError, StageFailed):
            return False  # let the action run and report the problem properly
        key = caches.key_of(material)
        state = outputs.current(build_dir, stage, key)
        if state is None or (locked is not None and locked.get("key") != key):
            return False
        _record(task_name(resolved.name, stage), {
            "status": "uptodate", "key": key, "digest": state.digest,
            "seconds": round(time.perf_counter() - start, 3)})
        return True
    return check


def _record(name: str, values: StageRecord) -> None:
    manifest, stage = _split(name)
    _RUN.outcomes.setdefault(manifest, {})[stage] = values.copy()


def _tasks(project: Project, until: str | None, lock: Lock | None) -> list[Task]:
    tasks = []
    for resolved in project.manifests:
        name = resolved.name
        build_dir = project.build_dir(name)
        for stage in closure(until) if until else list(STAGES):
            if stage not in resolved.configs:
                continue  # the stage does not exist for this manifest (stages/base.py)
            locked = None if lock is None else lock.get(name, {}).get(stage, {})
            tasks.append(dict_to_task({
                "name": task_name(name, stage),
                "actions": [(stage_action, [resolved.path, resolved.display, stage,
                                            str(build_dir), str(project.cache_root), locked])],
                "task_dep": [task_name(name, up) for up in upstream(STAGES[stage],
                                                                     resolved.configs)],
                "uptodate": [_uptodate(resolved, stage, build_dir, project.cache_root, locked)],
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
        lock: Lock | None = None) -> Run:
    """Build every stage (up to `until`) of every manifest in the project."""
    global _RUN
    _RUN = Run()
    tasks = _tasks(project, until, lock)
    state_dir = project.build_root / ".edgebuild"
    state_dir.mkdir(parents=True, exist_ok=True)
    loader = _Loader(tasks, state_dir / "doit.sqlite3")
    args = ["run", "--continue"]
    if jobs > 1:
        args += ["-n", str(jobs), "-P", "process"]
    DoitMain(loader, config_filenames=()).run(args + [t.name for t in tasks])
    return _RUN
