"""The DAG executor: doit, embedded. The only module that imports doit, and only when a
stage must run (a no-op build never loads it: build.uptodate answers first).

One doit task per (manifest, stage), named `<manifest>.<stage>`, depending on its upstream
stages. doit orders them, runs independent ones in parallel (`-j N`, processes) and asks
each task's `uptodate` callable — our cache key check — before running it. Its own config
files (pyproject.toml, doit.cfg) are ignored and its dependency DB lives in memory: our
cache and state records, written per stage, are the only truth.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from doit.cmd_base import Command, TaskLoader2
from doit.doit_cmd import DoitMain
from doit.exceptions import BaseFail, TaskFailed, UnmetDependency
from doit.reporter import ConsoleReporter
from doit.task import Task, dict_to_task

from edgebuild.build import budget, builder, console, job, kernels, uptodate
from edgebuild.build.outcome import Options, Run, StageRecord, split_task, status_line, task_name
from edgebuild.build.project import Project
from edgebuild.build.registry import STAGES, upstream
from edgebuild.build.resolved import Resolved
from edgebuild.build.sharing import Sharing


class UserFailure(TaskFailed):
    """A stage met bad user input (exit status 2, not 1)."""


_RUN = Run()  # the run being scheduled: the reporter and uptodate checks record into it


def stage_action(manifest_path: str, display: str, target: str | None, stage: str,
                 build_dir: str, cache_root: str, expected: str,
                 options: Options) -> StageRecord | TaskFailed:
    """Runs in a doit worker (possibly another process): plain-data arguments only.
    `expected` is the stage's config as the run resolved it (canonical JSON)."""
    job.prepare(options)

    def body() -> StageRecord:
        checked = job.load(manifest_path, display, target, stage, expected)
        return job.record(builder.realize(
            checked, stage, Path(build_dir), Path(cache_root),
            job.promise(options, checked.name, stage), Sharing.of(options)))

    if not options.prefix:
        return _returned(job.attempt(stage, options.debug, body))
    label = Path(build_dir).name if target is None else f"{Path(build_dir).parent.name}/{target}"
    with console.prefixed(task_name(label, stage)):
        return _returned(job.attempt(stage, options.debug, body))


def cluster_action(manifest_path: str, display: str, target: str | None, stage: str,
                   build_dir: str, cache_root: str, expected: str,
                   options: Options) -> StageRecord | TaskFailed:
    """Runs in a doit thread of this process: the stage is computed on a Dask worker
    (build.cluster) and restored here from the remote cache."""
    from edgebuild.build import cluster

    return _returned(cluster.realize(manifest_path, display, target, stage, Path(build_dir),
                                     Path(cache_root), expected, options))


def _returned(result: job.Result) -> StageRecord | TaskFailed:
    if result[0] == "ok":
        return result[1]
    return UserFailure(result[1]) if result[0] == "user" else TaskFailed(result[1])


def _uptodate(project: Project, resolved: Resolved, stage: str,
              options: Options) -> Callable[[], bool]:
    def check() -> bool:
        record = uptodate.check(project, resolved, stage, options)
        if record is not None:
            _RUN.record(resolved.name, stage, record)
        return record is not None
    return check


def _tasks(project: Project, stages: list[str], options: Options,
           action: Callable[..., StageRecord | TaskFailed]) -> list[Task]:
    tasks = []
    for resolved in project.manifests:
        name = resolved.name
        build_dir = project.build_dir(name)
        for stage in stages:
            if stage not in resolved.configs:
                continue  # the stage does not exist for this manifest (stages/base.py)
            tasks.append(dict_to_task({
                "name": task_name(name, stage),
                "actions": [(action, [resolved.path, resolved.display, resolved.target, stage,
                                      str(build_dir),
                                      str(project.cache_root), job.expected(resolved, stage),
                                      options])],
                "task_dep": [task_name(name, up) for up in upstream(STAGES[stage],
                                                                     resolved.configs)],
                "uptodate": [_uptodate(project, resolved, stage, options)],
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

    verbose = False  # set from Options by `execute` (doit builds the reporter itself)

    def __init__(self, outstream: TextIO, options: Mapping[str, object]) -> None:
        super().__init__(sys.stderr, options)

    def execute_task(self, task: Task) -> None:
        pass

    def skip_uptodate(self, task: Task) -> None:
        if self.verbose:  # else the summary table counts them
            manifest, stage = split_task(task.name)
            self.outstream.write(status_line(task.name, _RUN.outcomes[manifest][stage]))

    def add_success(self, task: Task) -> None:
        _RUN.record(*split_task(task.name), task.values)
        self.outstream.write(status_line(task.name, task.values))
        self.outstream.flush()

    def add_failure(self, task: Task, fail_info: BaseFail) -> None:
        if isinstance(fail_info, UnmetDependency):
            message, kind = f"skipped: upstream stage {fail_info.message.strip()} failed", "skipped"
        else:
            message = fail_info.get_msg()
            kind = "user" if isinstance(fail_info, UserFailure) else "failed"
        _RUN.failures.append((task.name, message.strip(), kind))
        if kind != "skipped":  # stages after a failure are counted once, at the end
            self.outstream.write(f"{task.name:<24} FAILED\n{_indent(message)}\n")

    def skip_ignore(self, task: Task) -> None:
        pass

    def complete_run(self) -> None:
        skipped = [name for name, _, kind in _RUN.failures if kind == "skipped"]
        if skipped:
            self.outstream.write(f"{len(skipped)} later stages did not run (their upstream "
                                 f"failed): {', '.join(skipped)}\n")
        self.outstream.flush()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())




def execute(project: Project, stages: list[str], jobs: int, options: Options, run: Run) -> None:
    """Run every stage (in `stages`) of every manifest, recording into `run`."""
    global _RUN
    _RUN = run
    # the pin is per process (torch reads it once): pinned when any manifest is
    # reproducible, so opted-out manifests built beside them are merely slower
    options = replace(options, pinned=any(m.reproducible for m in project.manifests))
    StageReporter.verbose = options.verbose
    if options.pinned:
        kernels.pin()  # before anything here or in a worker imports torch
    if options.scheduler is not None:  # Dask workers compute; doit threads wait for them
        from edgebuild.build import cluster

        tasks = _tasks(project, stages, options, cluster_action)
        args = ["run", "--continue", "-n", str(cluster.connect(options.scheduler, options.pinned)), "-P", "thread"]
    else:
        tasks = _tasks(project, stages, options, stage_action)
        args = ["run", "--continue", *_parallel(project, stages, jobs, options)]
    run.plan = [split_task(task.name) for task in tasks]
    loader = _Loader(tasks, Path(":memory:"))  # no dependency file to corrupt or lock
    code = DoitMain(loader, config_filenames=()).run(args + [t.name for t in tasks])
    if code != 0 and not run.failures:
        run.failures.append(("edgebuild", f"the scheduler stopped with status {code} "
                             "(run with --debug to see why)", "failed"))


def _parallel(project: Project, stages: list[str], jobs: int, options: Options) -> list[str]:
    """doit's options for `-j`: worker processes, torch preloaded when it will be used."""
    jobs = budget.workers(jobs)
    if jobs <= 1:
        return []
    if any("torch" in STAGES[stage].tools for stage in _may_run(project, stages, options)):
        budget.preload(options.threads)
    return ["-n", str(jobs), "-P", "process"]


def _may_run(project: Project, stages: list[str], options: Options) -> set[str]:
    """Stages that may run: per manifest, the first one not up to date and all after it."""
    found: set[str] = set()
    for resolved in project.manifests:
        applicable = [stage for stage in stages if stage in resolved.configs]
        for index, stage in enumerate(applicable):
            if uptodate.check(project, resolved, stage, options) is None:
                found.update(applicable[index:])
                break
    return found
