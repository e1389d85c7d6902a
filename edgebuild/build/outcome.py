"""What a run is asked to do (`Options`) and what it did (`Run`, one `StageRecord` per
stage): plain records shared by the runner, the up-to-date pass and the doit scheduler."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from edgebuild.build.lock import Lock
from edgebuild.build.provenance import Provenance

Status = Literal["uptodate", "restored", "fetched", "built"]
# `--json` names: "restored" came from the local cache, "fetched" from the remote one
OUTCOMES = {"uptodate": "up-to-date", "restored": "restored-local",
            "fetched": "restored-remote", "built": "built"}


class StageRecord(TypedDict):
    """One stage's outcome: a doit task's values, a `--json` entry, the lock's source."""

    status: Status
    key: str
    digest: str
    seconds: float


@dataclass(frozen=True)
class Options:
    """How a run treats the lock file and errors; plain data, sent to doit workers."""

    lock: Lock | None = None  # edgebuild.lock: its digests are promises (see builder)
    strict: bool = False  # --locked: keys must match the lock too
    relock: bool = False  # --relock: rebuild here what the lock contradicts, adopt nothing else
    provenance: Provenance | None = None  # what the lock's keys were made of (messages)
    remote: str | None = None  # the shared remote cache's URL (build.sharing)
    push: bool = False  # write to the remote: asked for (--push) and allowed (credentials)
    scheduler: str | None = None  # a Dask scheduler's address (build.cluster)
    pinned: bool = True  # pin torch's kernels (build.kernels): some manifest is reproducible
    threads: int = 1  # torch/BLAS threads per stage process (the CPU budget)
    verbose: bool = False  # a line for every stage, also those up to date
    prefix: bool = False  # stage processes run side by side (-j): prefix their log lines
    debug: bool = False  # tracebacks instead of one-line internal errors


@dataclass
class Run:
    """What happened, collected in the main process (the reporter and uptodate checks)."""

    outcomes: dict[str, dict[str, StageRecord]] = field(default_factory=dict)  # manifest, stage
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # task, message, kind
    plan: list[tuple[str, str]] = field(default_factory=list)  # (manifest, stage), graph order

    @property
    def user_error_only(self) -> bool:
        """Every root failure was bad user input (-> exit 2 rather than 1)."""
        kinds = {kind for _, _, kind in self.failures if kind != "skipped"}
        return kinds == {"user"}

    def record(self, manifest: str, stage: str, values: StageRecord) -> None:
        self.outcomes.setdefault(manifest, {})[stage] = values.copy()

    def listing(self) -> list[dict[str, object]]:
        """Every planned stage in graph order with its outcome (`--json`): built,
        restored-local, restored-remote, up-to-date, failed or skipped."""
        failed = {task: (message, kind) for task, message, kind in self.failures}
        found: list[dict[str, object]] = []
        for manifest, stage in self.plan:
            item: dict[str, object] = {"manifest": manifest, "stage": stage}
            record = self.outcomes.get(manifest, {}).get(stage)
            problem = failed.get(task_name(manifest, stage))
            if record is not None:
                item.update(outcome=OUTCOMES[record["status"]], key=record["key"],
                            digest=record["digest"], seconds=record["seconds"])
            elif problem is not None:
                item.update(outcome="skipped" if problem[1] == "skipped" else "failed",
                            message=problem[0])
            else:
                item.update(outcome="not-run")  # the scheduler stopped before it
            found.append(item)
        return found


def task_name(manifest: str, stage: str) -> str:
    return f"{manifest}.{stage}"


def split_task(name: str) -> tuple[str, str]:
    manifest, stage = name.split(".", 1)
    return manifest, stage


def status_line(name: str, values: StageRecord) -> str:
    """The line a stage's outcome prints on stderr."""
    label = {"built": "built", "restored": "restored", "fetched": "fetched",
             "uptodate": "up to date"}[values["status"]]
    return f"{name:<24} {label:<11} {values['seconds']:7.2f}s  {values['key'][:12]}\n"
