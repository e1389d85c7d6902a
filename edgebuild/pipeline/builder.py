"""Realizing one stage of one manifest: key it, then skip, restore or build it.

This is the whole cache protocol, independent of the scheduler: `pipeline` (doit) only
decides the order and parallelism and calls `realize` for each (manifest, stage).
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from edgebuild.core.errors import StageFailed, UserError
from edgebuild.pipeline import cache as caches
from edgebuild.pipeline import contracts, outputs
from edgebuild.pipeline.cache import KeyMaterial
from edgebuild.pipeline.lock import LockEntry
from edgebuild.pipeline.resolved import Resolved
from edgebuild.pipeline.stage import Context, Stage
from edgebuild.pipeline.stages import STAGES, upstream

if TYPE_CHECKING:  # validation loads pydantic: a no-op build never imports it
    from edgebuild.pipeline.validation import Checked


@dataclass(frozen=True)
class Outcome:
    stage: str
    status: Literal["uptodate", "restored", "built"]
    key: str
    digest: str
    seconds: float


def tool_versions(stage: Stage, cache_root: Path) -> dict[str, str]:
    """Versions of the Python packages and (`cmd:NAME`) programs that shape the output."""
    return {tool: command_version(tool[4:], cache_root) if tool.startswith("cmd:")
            else package_version(tool) for tool in stage.tools}


@functools.cache
def package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def command_version(name: str, cache_root: Path) -> str:
    """First line of `NAME --version`, or "absent" (then installing it changes the key).

    Remembered by the binary's stat, so a no-op build runs no subprocess; upgrading the
    compiler changes the stat and so the key."""
    import shutil

    path = shutil.which(name)
    if path is None:
        return "absent"
    return caches.remembered(Path(path), cache_root, "version", lambda: _ask_version(path))


def _ask_version(path: str) -> str:
    import subprocess

    try:
        result = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20,
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def key_material(stage: Stage, resolved: Resolved, build_dir: Path, cache_root: Path,
                 upstream_digests: dict[str, str] | None = None) -> KeyMaterial:
    """Everything that may change the stage's output, as plain JSON (DESIGN §4)."""
    if upstream_digests is None:
        upstream_digests = {}
        for name in upstream(stage, resolved.configs):
            state = outputs.read_state(build_dir, name)
            if state is None:
                raise StageFailed(f"stage {stage.name}: upstream {name} has no output yet")
            upstream_digests[name] = state.digest
    config = dict(resolved.configs[stage.name])
    if resolved.files.get(stage.name):
        config["files"] = [_content(Path(p), cache_root, resolved) for p in resolved.files[stage.name]]
    return {"stage": stage.name, "version": stage.version, "config": config,
            "upstream": upstream_digests, "tools": tool_versions(stage, cache_root)}


def _content(path: Path, cache_root: Path, resolved: Resolved) -> str:
    try:
        return caches.file_digest(path, cache_root)
    except OSError as exc:
        raise UserError(f"{resolved.display}: data file {path} cannot be read "
                        f"({exc.strerror})") from None


def realize(checked: Checked, stage_name: str, build_dir: Path, cache_root: Path,
            locked: LockEntry | None = None) -> Outcome:
    """Make `build_dir/<stage>` current for a fully validated manifest (`Checked`)."""
    from edgebuild.pipeline.resolved import from_checked

    start = time.perf_counter()
    stage = STAGES[stage_name]
    material = key_material(stage, from_checked(checked), build_dir, cache_root)
    key = caches.key_of(material)
    _check_lock(stage_name, "key", key, locked)
    # One process at a time makes this stage of this build tree current: another edgebuild
    # on the same project then finds it up to date instead of swapping the directory (and
    # its state record) away under a downstream stage that is reading it.
    with outputs.lock(build_dir, stage_name):
        return _realize(checked, stage, key, material, build_dir, cache_root, locked, start)


def _realize(checked: Checked, stage: Stage, key: str, material: KeyMaterial, build_dir: Path,
             cache_root: Path, locked: LockEntry | None, start: float) -> Outcome:
    stage_name = stage.name
    state = outputs.current(build_dir, stage_name, key)
    if state is not None:
        return Outcome(stage_name, "uptodate", key, state.digest, time.perf_counter() - start)
    cache = caches.Cache(cache_root)
    entry = cache.lookup(stage_name, key)
    built = False
    if entry is None or caches.problems(entry):
        def build(out: Path) -> None:
            active = [name for name, s in STAGES.items() if s.applies(checked)]
            stage.run(Context(checked, out, {u: build_dir / u for u in upstream(stage, active)},
                              cache_root, build_dir))
            contracts.check(stage.name, stage.artifacts, out)  # before it is published
        entry, built = cache.publish(stage_name, key, material, build)
    _check_lock(stage_name, "digest", entry.digest, locked)
    outputs.materialize(entry, build_dir, stage_name, stage.exports)
    caches.touch(entry)
    return Outcome(stage_name, "built" if built else "restored", key, entry.digest,
                   time.perf_counter() - start)


def _check_lock(stage: str, field: Literal["key", "digest"], value: str,
                locked: LockEntry | None) -> None:
    if locked is None:
        return
    expected = locked.get(field)
    if expected != value:
        raise StageFailed(
            f"stage {stage}: {field} {value[:16]} differs from edgebuild.lock "
            f"({(expected or 'absent')[:16]}); rebuild without --locked and commit the lock "
            "if the change is intended")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
