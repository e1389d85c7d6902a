"""The content-hash cache (docs/internals/cache.md): one key function, atomic
publication, verification.

Layout: `<root>/<stage>/<key[:2]>/<key>/` holding `out/` (the artifact, read-only files)
and `meta.json`, written last — its presence is what "complete" means. An entry is built
in `<root>/tmp/` (same filesystem) and moved into place with one `os.replace`, so a build
killed at any moment leaves at most a stray temp dir, never an entry that looks complete.
A per-key file lock makes two processes that want the same artifact build it once.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, cast

from edgebuild.build.flock import FileLock, Timeout
from edgebuild.core import boundedjson
from edgebuild.core.errors import StageFailed
from edgebuild.core.jsontypes import JSONObject

SCHEME = 1
LOCK_TIMEOUT_S = 3600.0
# the cache's own directories beside `<stage>/`: never entries
RESERVED = frozenset({"tmp", "locks", "stat", "checked"})


class KeyMaterial(TypedDict):
    """Everything that may change a stage's output (docs/internals/cache.md); its hash is
    the cache key."""

    stage: str
    code: str  # the digest of the stage's source files (build.sources)
    config: JSONObject  # the stage's resolved settings, plus `files`: its data files' digests
    upstream: dict[str, str]  # upstream stage -> its output digest
    tools: dict[str, str]  # package or `cmd:NAME` -> version


def canonical(obj: object) -> bytes:
    """Canonical JSON: sorted keys, compact separators — the only form ever hashed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def key_of(material: KeyMaterial) -> str:
    """The one cache-key function: sha256 of the canonical key material."""
    return hashlib.sha256(canonical({"scheme": SCHEME, **material})).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_of(directory: Path) -> dict[str, str]:
    """`{relative posix path: sha256}` for every file below `directory`."""
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            files[path.relative_to(directory).as_posix()] = sha256_file(path)
    return files


def digest_of(files: dict[str, str]) -> str:
    """An artifact's digest: a hash of its file names and contents, nothing else."""
    return hashlib.sha256(canonical(files)).hexdigest()


@dataclass(frozen=True)
class Entry:
    stage: str
    key: str
    path: Path
    digest: str
    files: dict[str, str]
    material: KeyMaterial
    origin: str | None = None  # the remote it was fetched from; None: built here

    @property
    def out(self) -> Path:
        return self.path / "out"


@dataclass(frozen=True)
class Cache:
    root: Path

    def entry_path(self, stage: str, key: str) -> Path:
        return self.root / stage / key[:2] / key

    @functools.cached_property
    def writable(self) -> bool:
        """Can entries be published here? A read-only (shared, warm) cache still serves
        restores: the builder then builds what it must without publishing it."""
        probe = self.root / "tmp" / f".probe-{uuid.uuid4().hex}"
        try:
            probe.parent.mkdir(parents=True, exist_ok=True)
            probe.write_bytes(b"")
            probe.unlink()
        except OSError:
            return False
        return True

    def lookup(self, stage: str, key: str) -> Entry | None:
        """The complete entry for `key`, or None — also for unreadable or malformed
        metadata, which `cache verify` reports and a build simply rebuilds over."""
        path = self.entry_path(stage, key)
        try:
            meta = boundedjson.read(path / "meta.json")
        except (OSError, ValueError):  # JSONLimitError too: a hostile meta is no entry
            return None
        return _entry(stage, key, path, meta)

    def lock(self, stage: str, key: str) -> FileLock:
        path = self.root / "locks" / f"{stage}-{key[:32]}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(path), timeout=LOCK_TIMEOUT_S)

    def publish(self, stage: str, key: str, material: KeyMaterial,
                build: Callable[[Path], None], origin: str | None = None
                ) -> tuple[Entry, bool]:
        """Return the entry for `key`, building it once under a lock. `True` = built now.
        `origin`: the remote whose files `build` fetches (recorded: `--relock` adopts only
        what was built here)."""
        with self.lock(stage, key):
            entry = self.lookup(stage, key)
            if entry is not None and not problems(entry):
                return entry, False
            return self._build(stage, key, material, build, origin), True

    def _build(self, stage: str, key: str, material: KeyMaterial,
               build: Callable[[Path], None], origin: str | None) -> Entry:
        # named by the full key: `cache gc` knows the temp dir is abandoned when nobody
        # holds that key's lock (see `sweep_temp`)
        temp = self.root / "tmp" / f"{stage}-{key}-{uuid.uuid4().hex[:8]}"
        try:
            assemble(temp, stage, key, material, build, origin)
            final = self.entry_path(stage, key)
            if final.exists():
                remove_tree(final)  # a corrupt entry found by `problems`, replaced whole
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, final)
        finally:
            if temp.exists():
                remove_tree(temp)
        entry = self.lookup(stage, key)
        if entry is None:  # deleted (`cache gc`, `clean --cache`) the moment it was published
            raise StageFailed(f"cache entry {self.entry_path(stage, key)} vanished right after "
                              "it was published; build again")
        return entry

    def entry_dirs(self) -> list[tuple[str, str, Path]]:
        """Every `(stage, key, path)` that looks like an entry, complete or not."""
        found = []
        for path in sorted(self.root.glob("*/??/*")):
            stage, key = path.parent.parent.name, path.name
            if stage not in RESERVED and path.is_dir() and _is_key(key) and key[:2] == path.parent.name:
                found.append((stage, key, path))
        return found

    def entries(self) -> list[Entry]:
        """The complete entries (see `entry_dirs` for all)."""
        found = []
        for stage, key, _ in self.entry_dirs():
            entry = self.lookup(stage, key)
            if entry is not None:
                found.append(entry)
        return found

    def discard(self, entry: Entry) -> None:
        remove_tree(entry.path)


def assemble(temp: Path, stage: str, key: str, material: KeyMaterial,
             build: Callable[[Path], None], origin: str | None = None) -> None:
    """Build an entry's content in `temp` (out/ + meta.json, files frozen)."""
    (temp / "out").mkdir(parents=True)
    build(temp / "out")
    files = manifest_of(temp / "out")
    meta: dict[str, object] = {"stage": stage, "key": key, "material": material,
                               "digest": digest_of(files), "files": files}
    if origin is not None:
        meta["origin"] = origin
    _write_json(temp / "meta.json", meta)
    _freeze(temp / "out")


def read_entry(stage: str, key: str, path: Path) -> Entry:
    """The entry at `path`, or IncompleteEntry saying why it is not one."""
    try:
        meta = boundedjson.read(path / "meta.json")
    except FileNotFoundError:
        raise IncompleteEntry("no meta.json (an interrupted publication or deletion)") from None
    except (OSError, ValueError) as exc:
        raise IncompleteEntry(f"meta.json unreadable ({exc})") from None
    entry = _entry(stage, key, path, meta)
    if entry is None:
        raise IncompleteEntry("meta.json lacks the key, digest, files or material")
    return entry


class IncompleteEntry(Exception):
    """An entry directory without valid metadata: never served, removed by verify --delete."""


def _entry(stage: str, key: str, path: Path, meta: object) -> Entry | None:
    """Metadata checked field by field: a truncated or hand-edited meta.json is no entry."""
    if not isinstance(meta, dict) or meta.get("key", key) != key:
        return None
    digest, files, material = meta.get("digest"), meta.get("files"), meta.get("material")
    if not (isinstance(digest, str) and isinstance(files, dict) and isinstance(material, dict)
            and all(isinstance(v, str) for v in files.values())):
        return None
    if digest != digest_of(files):
        return None
    origin = meta.get("origin")
    return Entry(stage, key, path, digest, files, cast(KeyMaterial, material),
                 origin if isinstance(origin, str) else None)


def verify(cache: Cache, expected: dict[tuple[str, str], str] | None = None
           ) -> list[tuple[str, str, Path, list[str]]]:
    """`(stage, key, path, problems)` for every entry directory; problems empty = sound.
    `expected`: digests a lock file records by (stage, key); an entry of such a key with
    other bytes contradicts it (a tampered or planted entry, or a nondeterministic stage)."""
    found = []
    for stage, key, path in cache.entry_dirs():
        try:
            entry = read_entry(stage, key, path)
        except IncompleteEntry as exc:
            found.append((stage, key, path, [str(exc)]))
            continue
        wrong = problems(entry)
        locked = (expected or {}).get((stage, key))
        if locked is not None and locked != entry.digest:
            came = f", fetched from {entry.origin}" if entry.origin else ""
            wrong.append(f"digest {entry.digest[:16]} contradicts edgebuild.lock's "
                         f"{locked[:16]} for this key{came}")
        found.append((stage, key, path, wrong))
    return found


def problems(entry: Entry) -> list[str]:
    """Re-hash an entry's files; anything missing, extra or changed is a problem."""
    if not entry.out.is_dir():
        return ["artifact directory is missing"]
    actual = manifest_of(entry.out)
    found = [f"{name}: missing" for name in entry.files if name not in actual]
    found += [f"{name}: unexpected file" for name in actual if name not in entry.files]
    found += [f"{name}: content changed" for name, digest in actual.items()
              if name in entry.files and entry.files[name] != digest]
    return found


def entry_bytes(entry: Entry) -> int:
    return sum(p.stat().st_size for p in entry.path.rglob("*") if p.is_file())


def last_used(entry: Entry) -> float:
    used = entry.path / "used"
    return (used if used.exists() else entry.path / "meta.json").stat().st_mtime


def touch(entry: Entry) -> None:
    """Record use (for `cache gc` by age); best effort, the entry itself stays read-only."""
    with contextlib.suppress(OSError):
        (entry.path / "used").touch()


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n")


def _freeze(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def remove_tree(path: Path) -> None:
    """Delete a tree. Files are read-only but directories stay writable, which is all
    POSIX needs to unlink them.

    Whatever is at `path` goes, not only a directory: a regular file or a symlink where a
    stage directory belongs (`build/<name>/<stage>` replaced by hand) is moved aside by
    `outputs.materialize` and must then be deleted like any old output. `shutil.rmtree`
    refuses those, which failed the stage and, once moved aside as `.old-<stage>-*`,
    failed every later build of it in `outputs.sweep` (tests/test_faults.py)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def remembered(path: Path | str, root: Path, kind: str, compute: Callable[[], str]) -> str:
    """A value derived from a file (its digest, a program's version), remembered in
    `<root>/stat/` by the file's (size, mtime, inode) like DVC does: a no-op build neither
    re-reads megabytes nor runs subprocesses, and any change to the file recomputes it.

    `path` is absolute (the resolved manifest's paths are): one stat per call, no path
    resolution on this hot path."""
    text = os.fspath(path)
    info = os.stat(text)
    fingerprint: list[str | int] = [kind, text, info.st_size, info.st_mtime_ns, info.st_ino]
    known = _REMEMBERED.get(tuple(fingerprint))  # the same file keyed by several manifests
    if known is not None:
        return known
    record = f"{root}/stat/{kind}-{hashlib.sha1(text.encode()).hexdigest()}.json"
    try:
        saved = boundedjson.read(record)
        if saved["fingerprint"] == fingerprint:
            _REMEMBERED[tuple(fingerprint)] = saved["value"]
            return saved["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = compute()
    with contextlib.suppress(OSError):  # the record is an optimization (read-only cache)
        write_atomic(Path(record), json.dumps({"fingerprint": fingerprint, "value": value}))
    _REMEMBERED[tuple(fingerprint)] = value
    return value


_REMEMBERED: dict[tuple[str | int, ...], str] = {}  # per process: fingerprint -> value


def file_digest(path: Path | str, root: Path) -> str:
    """sha256 of a data file: its content, never its mtime, decides rebuilds."""
    return remembered(path, root, "sha256", lambda: sha256_file(Path(path)))


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file and rename: readers see the old or the new file, never half.

    A write that fails (a full disk, a file size limit) removes its temp file and names
    `path`: it used to leave `.edgebuild.lock.<hex>.tmp` beside the user's manifests, and
    the error of a failed write() carries no file name, so the one line said only "File too
    large" (tests/test_faults.py)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temp.write_text(text)
        os.replace(temp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def collect(cache: Cache, keep: set[str], max_bytes: int | None,
            max_age_s: float | None) -> list[Entry]:
    """Delete unreferenced entries unused for `max_age_s`, then least recently used ones
    until the cache fits `max_bytes`. Entries whose key is in `keep` are never deleted."""
    now = time.time()
    candidates = sorted((e for e in cache.entries() if e.key not in keep), key=last_used)
    removed = []
    if max_age_s is not None:
        for entry in list(candidates):
            if now - last_used(entry) > max_age_s:
                removed.append(entry)
                candidates.remove(entry)
    if max_bytes is not None:
        total = sum(entry_bytes(e) for e in cache.entries() if e not in removed)
        for entry in candidates:
            if total <= max_bytes:
                break
            total -= entry_bytes(entry)
            removed.append(entry)
    for entry in removed:
        cache.discard(entry)
    return removed


def sweep_temp(cache: Cache, older_than_s: float = 3600) -> int:
    """Delete temp dirs left by killed builds (they were never entries). A temp dir named
    `<stage>-<key>-<random>` belongs to whoever holds that key's lock: it is abandoned
    exactly when the lock is free. Anything else there (a stray probe file) goes once it
    is older than `older_than_s`."""
    removed = 0
    for temp in (cache.root / "tmp").glob("*"):
        try:
            removed += _sweep_one(cache, temp, older_than_s)
        except OSError:
            continue
    return removed


def _sweep_one(cache: Cache, temp: Path, older_than_s: float) -> int:
    parts = temp.name.rsplit("-", 2)
    if len(parts) == 3 and _is_key(parts[1]) and temp.is_dir():
        try:
            with cache.lock(parts[0], parts[1]).acquire(timeout=0):
                remove_tree(temp)
                return 1
        except Timeout:
            return 0  # a live build owns it
    if time.time() - temp.stat().st_mtime > older_than_s:
        remove_tree(temp) if temp.is_dir() else temp.unlink()
        return 1
    return 0


def _is_key(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
