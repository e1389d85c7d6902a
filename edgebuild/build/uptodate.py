"""Is a stage up to date? The check doit asks before running a stage, and the no-op pass
that answers it for a whole project before doit is even imported.

A stage is up to date when the key of its inputs equals the key recorded with its
materialized output, the output's files are the recorded ones (one stat each; content is
hashed only when a stat differs) and edgebuild.lock's promise for that key holds. The
no-op pass walks each manifest's stages in order, taking every upstream digest from the
stage it has just checked, so each state record is read once; at the first stage that is
not up to date it gives up and the scheduler (doit) takes over, checking again.
"""

from __future__ import annotations

import time

from edgebuild.build import builder, outputs
from edgebuild.build import cache as caches
from edgebuild.build.lock import LockEntry
from edgebuild.build.outcome import Options, StageRecord
from edgebuild.core.errors import StageFailed, UserError

__all__ = ["StageRecord", "check", "noop"]
from edgebuild.build.project import Project
from edgebuild.build.registry import STAGES, upstream
from edgebuild.build.resolved import Resolved


def check(project: Project, resolved: Resolved, stage: str, options: Options,
          upstream_digests: dict[str, str] | None = None) -> StageRecord | None:
    """The stage's record if it is up to date, else None (then it must run, and running
    it reports whatever made it not current: a bad data file, a broken promise)."""
    start = time.perf_counter()
    build_dir = project.build_dir(resolved.name)
    try:
        material = builder.key_material(STAGES[stage], resolved, build_dir, project.cache_root,
                                        upstream_digests)
    except (UserError, StageFailed, OSError):
        return None
    key = caches.key_of(material)
    state = outputs.current(build_dir, stage, key)
    if state is None or not promised(key, state.digest, locked(options, resolved.name, stage),
                                     options.strict):
        return None
    return {"status": "uptodate", "key": key, "digest": state.digest,
            "seconds": round(time.perf_counter() - start, 3)}


def locked(options: Options, manifest: str, stage: str) -> LockEntry | None:
    return None if options.lock is None else options.lock.get(manifest, {}).get(stage)


def promised(key: str, digest: str, entry: LockEntry | None, strict: bool) -> bool:
    """Does an up-to-date output keep the lock's promise (builder._keep_promise)?"""
    if entry is None:
        return not strict  # --locked: a stage the lock does not know fails (builder)
    if strict:
        return entry.get("key") == key and entry.get("digest") == digest
    return entry.get("key") != key or entry.get("digest") in (None, digest)


def noop(project: Project, stages: list[str],
         options: Options) -> dict[str, dict[str, StageRecord]] | None:
    """Every stage's record when all of them are up to date; None at the first that is not."""
    found: dict[str, dict[str, StageRecord]] = {}
    for resolved in project.manifests:
        records: dict[str, StageRecord] = {}
        for stage in stages:
            if stage not in resolved.configs:
                continue
            digests = {u: records[u]["digest"] for u in upstream(STAGES[stage], resolved.configs)
                       if u in records}
            record = check(project, resolved, stage, options, digests)
            if record is None:
                return None
            records[stage] = record
        found[resolved.name] = records
    return found
