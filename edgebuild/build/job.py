"""One stage of one manifest as a job: what a doit worker process or a Dask worker does
with the plain data it was sent (paths, names, `Options`), and how its errors come back.

Errors come back as values, not exceptions: a doit worker returns them to doit's runner,
a Dask worker across the network, and both must tell bad user input (exit 2) from a
failed stage (exit 1) without pickling edgebuild's exception types.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from edgebuild.build import budget, builder, kernels
from edgebuild.build import cache as caches
from edgebuild.build.outcome import Options, StageRecord
from edgebuild.build.resolved import Resolved
from edgebuild.core.errors import StageFailed, UserError, describe

if TYPE_CHECKING:
    from edgebuild.build.checked import Checked

Result = tuple[Literal["ok"], StageRecord] | tuple[Literal["user", "failed"], str]


def prepare(options: Options) -> None:
    """The process-wide settings a stage process needs before torch loads."""
    budget.apply(options.threads)
    if options.pinned:
        kernels.pin()


def load(manifest_path: str, display: str, target: str | None, stage: str,
         expected: str) -> Checked:
    """The manifest (for `target`, its label when it lists several), validated again in
    this process. If it was edited since the run began, the stage would build from other
    settings than the run checked: stop."""
    from edgebuild.build import registry
    from edgebuild.build.resolved import from_checked

    checked = registry.provider().load(Path(manifest_path), display, target)
    now = from_checked(checked)
    if caches.canonical([now.configs.get(stage), now.files.get(stage)]).decode() != expected:
        raise UserError(f"{checked.document.path} changed while it was being built; "
                        "run edgebuild again")
    return checked


def expected(resolved: Resolved, stage: str) -> str:
    """The stage's settings as the run resolved them (canonical JSON), for `load`."""
    return caches.canonical([resolved.configs.get(stage), resolved.files.get(stage)]).decode()


def promise(options: Options, manifest: str, stage: str) -> builder.Promise:
    stages = (options.lock or {}).get(manifest, {})
    return builder.Promise(stages.get(stage), options.strict, stages, options.provenance,
                           options.relock)


def record(outcome: builder.Outcome) -> StageRecord:
    return {"status": outcome.status, "key": outcome.key, "digest": outcome.digest,
            "seconds": round(outcome.seconds, 3)}


def attempt(stage: str, debug: bool, body: Callable[[], StageRecord]) -> Result:
    """Run `body`; every failure becomes one line of the right kind."""
    try:
        return "ok", body()
    except UserError as exc:
        return "user", str(exc)
    except StageFailed as exc:
        return "failed", str(exc)
    except OSError as exc:
        return "failed", f"stage {stage}: {describe(exc)}"
    except Exception as exc:
        if debug:
            raise
        return "failed", (f"stage {stage}: internal error {type(exc).__name__}: {exc} "
                          "(run with --debug for the traceback, and please report it)")
