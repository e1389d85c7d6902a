"""Running a build: claim the trees, answer a no-op without the scheduler, else schedule.

A no-op build (everything up to date) is the common case and must stay fast at any scale:
`uptodate.noop` checks every stage in order without importing doit, and prints the same
lines doit's reporter would. Anything else goes to the doit scheduler (scheduler.py),
which checks again task by task and runs what must run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

from edgebuild.build import budget, index, uptodate
from edgebuild.build import cache as caches
from edgebuild.build.claim import claimed
from edgebuild.build.outcome import Options, Run, StageRecord, status_line, task_name
from edgebuild.build.project import Project
from edgebuild.build.registry import STAGES, closure
from edgebuild.core.errors import UserError, describe

__all__ = ["Options", "Run", "answer", "report", "run"]


def answer(build_root: Path, cache_root: Path, files: list[Path], until: str | None,
           options: Options) -> Run | None:
    """A no-op answered from the index alone (edgebuild/build/index.py), before any manifest is
    parsed; None when anything moved (then `run` takes the full path)."""
    current = index.answer(build_root, cache_root, files, _stages(until), options)
    if current is None:
        return None
    result = Run()
    report(current, result, options.verbose)
    return result


def _stages(until: str | None) -> list[str]:
    return closure(until) if until else list(STAGES)


def run(project: Project, until: str | None = None, jobs: int = 1,
        options: Options | None = None) -> Run:
    """Build every stage (up to `until`) of every manifest in the project."""
    options = replace(options or Options(), threads=budget.threads_per_stage(jobs),
                      prefix=budget.workers(jobs) > 1)
    stages = _stages(until)
    _writable(project.build_root)
    result = Run()
    with claimed([(project.build_dir(m.name), m) for m in project.manifests]):
        current = None if options.relock else uptodate.noop(project, stages, options)
        if current is not None:
            report(current, result, options.verbose)
            index.update(project, options)
            return result
        if not caches.Cache(project.cache_root).writable:
            print(f"edgebuild: cache {project.cache_root} is read-only (or cannot be "
                  "created): restoring from it only; stages that must run are built but not "
                  "cached", file=sys.stderr, flush=True)
        from edgebuild.build import scheduler, sharing

        options = sharing.prepare(options)
        if options.scheduler is not None and not (options.remote and options.push):
            raise UserError(f"a build on the Dask cluster {options.scheduler} needs a remote "
                            "cache the workers can write to (see above)")
        scheduler.execute(project, stages, jobs, options, result)
        if not result.failures:
            index.update(project, options)
    return result


def report(current: dict[str, dict[str, StageRecord]], result: Run,
           verbose: bool = False) -> None:
    """Record up-to-date stages; with `verbose`, print them as the scheduler's reporter
    would (else the build's summary table says it, one line per manifest)."""
    lines = []
    for manifest, records in current.items():
        for stage, record in records.items():
            result.record(manifest, stage, record)
            result.plan.append((manifest, stage))
            lines.append(status_line(task_name(manifest, stage), record))
    if verbose:
        sys.stderr.write("".join(lines))
        sys.stderr.flush()


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
