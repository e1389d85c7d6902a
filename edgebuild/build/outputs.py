"""The build tree: `build/<manifest>/<stage>/`, a user-facing copy of each cache entry.

Each materialized stage has a state record (`build/<manifest>/.state/<stage>.json`) with
its key, key material, digest and every file's (size, mtime, sha256). "Up to date" means:
same key, same set of files, and each file unchanged — checked by stat first and by
content only when the stat differs, so a no-op build stays fast while a deleted or
edited output is still caught and restored.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from edgebuild.build.cache import (
    LOCK_TIMEOUT_S,
    Entry,
    KeyMaterial,
    remove_tree,
    sha256_file,
    write_atomic,
)
from edgebuild.build.flock import FileLock
from edgebuild.build.stage import SCRATCH
from edgebuild.core import boundedjson

FileStat: TypeAlias = list[int | str]  # [size, mtime_ns, sha256], a JSON list


@dataclass(frozen=True)
class State:
    key: str
    digest: str
    material: KeyMaterial
    files: dict[str, FileStat]  # relative path -> [size, mtime_ns, sha256]
    exports: dict[str, FileStat] | None = None  # build/<name>/<file> copies, same format
    origin: str | None = None  # the remote its entry was fetched from; None: built here


def state_path(build_dir: Path, stage: str) -> Path:
    return build_dir / ".state" / f"{stage}.json"


def lock(build_dir: Path, stage: str) -> FileLock:
    """Held while a process checks and materializes `build/<name>/<stage>/`."""
    path = build_dir / ".state" / f"{stage}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path), timeout=LOCK_TIMEOUT_S)


def sweep(build_dir: Path, stage: str) -> None:
    """Remove what a killed `materialize` of this stage left (held: the stage's lock)."""
    for pattern in (f".tmp-{stage}-*", f".old-{stage}-*"):
        for path in build_dir.glob(pattern):
            remove_tree(path)


def read_state(build_dir: Path, stage: str) -> State | None:
    try:
        raw = boundedjson.read(f"{build_dir}/.state/{stage}.json")  # hot: no pathlib
    except (OSError, ValueError):
        return None
    # a record of another shape (hand-edited, another tool) is no record: the stage is
    # simply not up to date and gets restored or rebuilt
    if not (isinstance(raw, dict) and isinstance(raw.get("key"), str)
            and isinstance(raw.get("digest"), str) and isinstance(raw.get("material"), dict)
            and isinstance(raw.get("files"), dict)
            and isinstance(raw.get("exports") or {}, dict)):
        return None
    origin = raw.get("origin")
    return State(raw["key"], raw["digest"], raw["material"], raw["files"], raw.get("exports"),
                 origin if isinstance(origin, str) else None)


def intact(build_dir: Path, stage: str, state: State) -> bool:
    """Are the materialized files exactly those recorded? (stat fast path, then content)"""
    root = f"{build_dir}/{stage}"
    if set(_listing(root, "")) != set(state.files):
        return False
    return _unchanged(root, state.files) and _unchanged(os.fspath(build_dir), state.exports or {})


def _listing(directory: str, prefix: str) -> list[str]:
    """Relative posix paths of the files below `directory`: directory reads only (the
    file type comes with the entry), so each file costs one stat, in `_unchanged`."""
    found: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        if entry.name == SCRATCH and entry.is_dir(follow_symlinks=False):
            continue  # the user's `make` products (build.stage.SCRATCH)
        if entry.is_dir(follow_symlinks=False):
            found += _listing(entry.path, f"{prefix}{entry.name}/")
        elif entry.is_file():
            found.append(prefix + entry.name)
    return found


def _unchanged(root: str, files: dict[str, FileStat]) -> bool:
    for name, recorded in files.items():
        try:
            size, mtime_ns, digest = recorded
            info = os.stat(f"{root}/{name}")
        except (OSError, TypeError, ValueError):  # gone, or a malformed record
            return False
        if (info.st_size, info.st_mtime_ns) != (size, mtime_ns) and \
                sha256_file(Path(root, name)) != digest:
            return False
    return True


def tracked(directory: Path) -> dict[str, str]:
    """`{relative path: sha256}` of a materialized stage's files, its scratch left out:
    what its cache entry holds (cache.manifest_of hashes everything)."""
    root = os.fspath(directory)
    return {name: sha256_file(directory / name) for name in sorted(_listing(root, ""))}


def current(build_dir: Path, stage: str, key: str) -> State | None:
    state = read_state(build_dir, stage)
    if state is None or state.key != key or not intact(build_dir, stage, state):
        return None
    return state


def materialize(entry: Entry, build_dir: Path, stage: str, exports: tuple[str, ...] = ()) -> State:
    """Copy an entry into the build tree, swapping directories so readers never see a mix."""
    dest = build_dir / stage
    temp = build_dir / f".tmp-{stage}-{uuid.uuid4().hex[:8]}"
    shutil.copytree(entry.out, temp, copy_function=shutil.copyfile)
    trash = build_dir / f".old-{stage}-{uuid.uuid4().hex[:8]}"
    state_path(build_dir, stage).unlink(missing_ok=True)
    if dest.exists():
        _keep_scratch(dest, temp)
        os.replace(dest, trash)
    os.replace(temp, dest)
    remove_tree(trash)
    files = {name: _stat(dest / name, digest) for name, digest in entry.files.items()}
    exported: dict[str, FileStat] = {}
    for name in exports:
        if name not in entry.files:
            continue  # an export only some manifests produce (e.g. ai8x/network.yaml)
        target = build_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        temp_copy = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp"
        shutil.copyfile(dest / name, temp_copy)
        os.replace(temp_copy, target)
        exported[name] = _stat(build_dir / name, entry.files[name])
    state = State(entry.key, entry.digest, entry.material, files, exported, entry.origin)
    record: dict[str, object] = {"key": state.key, "digest": state.digest,
                                 "material": state.material, "files": state.files,
                                 "exports": exported}
    if entry.origin is not None:
        record["origin"] = entry.origin
    write_atomic(state_path(build_dir, stage), json.dumps(record, indent=1, sort_keys=True))
    return state


def _keep_scratch(old: Path, new: Path) -> None:
    """Move the user's build products (SCRATCH dirs) from the old copy of a stage into the
    new one, where their parent directory still exists: restoring never loses them."""
    if not old.is_dir():
        return
    for found in sorted(old.rglob(SCRATCH)):
        target = new / found.relative_to(old)
        if found.is_dir() and not found.is_symlink() and target.parent.is_dir() \
                and not target.exists():
            os.replace(found, target)


def _stat(path: Path, digest: str) -> FileStat:
    info = path.stat()
    return [info.st_size, info.st_mtime_ns, digest]
