"""`edgebuild status`: for each stage, up to date / would be restored / would run — and why.

Walks the pipeline without running anything: a stage's key needs its upstream digests,
which are known when the upstream is up to date (its state record) or restorable (the
cache entry's metadata). When an upstream would run, downstream keys are unknowable and
the stage is reported as waiting on it. Reasons come from diffing the new key material
against the material recorded with the last materialized output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from edgebuild.build import builder, outputs
from edgebuild.build import cache as caches
from edgebuild.build.cache import KeyMaterial
from edgebuild.build.project import Project
from edgebuild.build.registry import STAGES, upstream
from edgebuild.build.resolved import Resolved
from edgebuild.core.errors import StageFailed, UserError


@dataclass(frozen=True)
class StageStatus:
    stage: str
    state: Literal["uptodate", "restore", "run"]
    key: str | None
    reasons: tuple[str, ...]


def of_manifest(project: Project, resolved: Resolved) -> list[StageStatus]:
    build_dir = project.build_dir(resolved.name)
    cache = caches.Cache(project.cache_root)
    digests: dict[str, str | None] = {}
    found = []
    for name, stage in STAGES.items():
        if name not in resolved.configs:
            continue
        waiting = [u for u in upstream(stage, resolved.configs) if digests.get(u) is None]
        if waiting:
            found.append(StageStatus(name, "run", None, (f"upstream {waiting[0]} will run first",)))
            digests[name] = None
            continue
        try:
            # no upstream is waiting, so none of their digests is None
            known = cast(dict[str, str], {u: digests[u] for u in upstream(stage, resolved.configs)})
            material = builder.key_material(stage, resolved, build_dir, project.cache_root, known)
        except (UserError, StageFailed) as exc:
            found.append(StageStatus(name, "run", None, (str(exc),)))
            digests[name] = None
            continue
        found.append(_status(name, material, build_dir, cache, resolved.files.get(name, [])))
        digests[name] = _digest(found[-1], build_dir, cache)
    return found


def _status(name: str, material: KeyMaterial, build_dir: Path, cache: caches.Cache,
            files: list[str]) -> StageStatus:
    key = caches.key_of(material)
    if outputs.current(build_dir, name, key) is not None:
        return StageStatus(name, "uptodate", key, ())
    entry = cache.lookup(name, key)
    previous = outputs.read_state(build_dir, name)
    reasons: tuple[str, ...]
    if previous is not None and previous.key == key:
        reasons = ("output in build/ was modified or deleted",)
    elif previous is None:
        reasons = ("never built in this build tree",)
    else:
        reasons = tuple(changes(previous.material, material, files)) or ("key material changed",)
    if entry is not None:
        return StageStatus(name, "restore", key, reasons)
    return StageStatus(name, "run", key, reasons)


def _digest(status: StageStatus, build_dir: Path, cache: caches.Cache) -> str | None:
    """The stage's output digest where it is known without running it (None: unknown, also
    when another process removed the state record or cache entry since `_status`)."""
    if status.state == "uptodate":
        state = outputs.read_state(build_dir, status.stage)
        return None if state is None else state.digest
    if status.state == "restore" and status.key is not None:
        entry = cache.lookup(status.stage, status.key)
        return None if entry is None else entry.digest
    return None


def changes(old: KeyMaterial, new: KeyMaterial, files: list[str]) -> list[str]:
    """What moved since the stage was built, each change once and in words: a setting by
    its path, a data file by its name, upstream stages by name (their own lines say why),
    the stage's code, a tool's version."""
    found = []
    moved = [u for u in sorted(set(old["upstream"]) | set(new["upstream"]))
             if old["upstream"].get(u) != new["upstream"].get(u)]
    if moved:
        found.append(f"upstream changed: {', '.join(moved)}")
    before, after = old["config"].get("files") or [], new["config"].get("files") or []
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        found += [f"data file {path}: its content changed"
                  for path, a, b in zip(files, before, after, strict=False) if a != b]
    elif before != after:
        found.append("its data files changed")
    found += diff({k: v for k, v in old["config"].items() if k != "files"},
                  {k: v for k, v in new["config"].items() if k != "files"}, "config")
    if old["code"] != new["code"]:
        found.append("edgebuild's code for this stage changed")
    return found + diff(old["tools"], new["tools"], "tools")


def diff(old: object, new: object, path: str = "") -> list[str]:
    """Human-readable differences between two JSON values, by dotted path."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in old:
                found.append(f"{sub}: added ({_short(new[key])})")
            elif key not in new:
                found.append(f"{sub}: removed")
            else:
                found += diff(old[key], new[key], sub)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in diff(a, b, f"{path}[{i}]")]
    if old != new:
        return [f"{path}: {_short(old)} -> {_short(new)}"]
    return []


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:16] + "..." + text[-8:]
