"""Realizing one stage of one manifest: key it, then skip, restore or build it.

This is the whole cache protocol, independent of the scheduler: the runner (doit) only
decides the order and parallelism and calls `realize` for each (manifest, stage).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.build import cache as caches
from edgebuild.build import contracts, kernels, outputs, provenance, sharing, sources
from edgebuild.build.cache import KeyMaterial
from edgebuild.build.lock import LockEntry
from edgebuild.build.outcome import Status
from edgebuild.build.provenance import Provenance
from edgebuild.build.registry import STAGES, upstream
from edgebuild.build.resolved import Resolved
from edgebuild.build.sharing import Sharing
from edgebuild.build.stage import Context, Stage
from edgebuild.core import boundedjson
from edgebuild.core.errors import StageFailed, UserError

if TYPE_CHECKING:  # validation loads pydantic: a no-op build never imports it
    from edgebuild.build.checked import Checked


@dataclass(frozen=True)
class Outcome:
    stage: str
    status: Status
    key: str
    digest: str
    seconds: float


@functools.cache
def _code_digests(cache_root: Path) -> dict[str, str]:
    from edgebuild.build.resolved import code_fingerprint

    return sources.remembered_digests({name: stage.cut() for name, stage in STAGES.items()},
                                      code_fingerprint(), cache_root)


def code_digest(stage: str, cache_root: Path) -> str:
    """The digest of the source files that compute the stage (build.sources)."""
    return _code_digests(cache_root)[stage]


def tool_versions(stage: Stage, cache_root: Path, pinned: bool = True) -> dict[str, str]:
    """Versions of the Python packages and (`cmd:NAME`) programs that shape the output."""
    found = {tool: command_version(tool[4:], cache_root) if tool.startswith("cmd:")
             else package_version(tool, cache_root) for tool in stage.tools}
    if "torch" in found:  # which CPU kernels torch may use changes its results
        found["torch-kernels"] = kernels.SIGNATURE if pinned else kernels.UNPINNED
    return found


@functools.cache
def package_version(name: str, cache_root: Path) -> str:
    """An installed package's version, remembered in `<cache>/stat/packages.json` under the
    stat of every sys.path directory: installing, upgrading or removing a package changes
    its directory's entries and so its mtime. A no-op build then never imports
    importlib.metadata, which costs more than the rest of the check."""
    record = cache_root / "stat" / "packages.json"
    places = site_fingerprint()
    try:
        saved = boundedjson.read(record)
        if saved["places"] == places and isinstance(saved["versions"].get(name), str):
            return str(saved["versions"][name])
        versions = saved["versions"] if saved["places"] == places else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        versions = {}
    versions[name] = _installed_version(name)
    with contextlib.suppress(OSError):  # an optimization: a read-only cache is fine
        caches.write_atomic(record, json.dumps({"places": places, "versions": versions}))
    return str(versions[name])


def site_fingerprint() -> list[list[str | int]]:
    """The stat of every directory packages are installed in: the interpreter's and the
    user's site-packages and PYTHONPATH's entries (not all of sys.path: its first entry
    is the script's or the working directory, which changes with every file written)."""
    import site

    places = [*site.getsitepackages(), site.getusersitepackages(),
              *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    found: list[list[str | int]] = []
    for entry in dict.fromkeys(p for p in places if p):
        try:
            info = os.stat(entry)
        except OSError:
            continue
        found.append([entry, info.st_mtime_ns, info.st_ino])
    return found


def _installed_version(name: str) -> str:
    import importlib.metadata

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
    """Everything that may change the stage's output, as plain JSON (docs/internals/cache.md)."""
    if upstream_digests is None:
        upstream_digests = {}
        for name in upstream(stage, resolved.configs):
            state = outputs.read_state(build_dir, name)
            if state is None:
                raise StageFailed(f"stage {stage.name}: upstream {name} has no output yet")
            upstream_digests[name] = state.digest
    config = dict(resolved.configs[stage.name])
    if resolved.files.get(stage.name):
        config["files"] = [_content(p, cache_root, resolved) for p in resolved.files[stage.name]]
    return {"stage": stage.name, "code": code_digest(stage.name, cache_root), "config": config,
            "upstream": upstream_digests,
            "tools": tool_versions(stage, cache_root, resolved.reproducible)}


def _content(path: str, cache_root: Path, resolved: Resolved) -> str:
    try:
        return caches.file_digest(path, cache_root)
    except OSError as exc:
        raise UserError(f"{resolved.display}: data file {path} cannot be read "
                        f"({exc.strerror})") from None


def realize(checked: Checked, stage_name: str, build_dir: Path, cache_root: Path,
            promise: Promise | None = None, shared: Sharing | None = None,
            compute: bool = True) -> Outcome:
    """Make `build_dir/<stage>` current for a fully validated manifest (`Checked`).

    A transaction: the stage's lock is taken before its key is computed and held while it
    reads its inputs, and the inputs are hashed again before anything is published — the
    bytes a stage read are exactly the bytes its key names (the runner also keeps any other
    edgebuild out of this build tree meanwhile: build.claim). `promise` is what
    edgebuild.lock says of the stage: its digest is a promise for its key (see
    `_keep_promise`); under --locked (`strict`) the key must match too. `shared` names
    the remote cache: a stage missing locally is pulled from it by key before it is
    computed, and one computed here is pushed to it. `compute=False` only restores:
    `NotCached` when the stage would have to run (a Dask worker runs it instead)."""
    from edgebuild.build.resolved import from_checked

    start = time.perf_counter()
    stage = STAGES[stage_name]
    resolved = from_checked(checked)
    promise = promise or Promise()
    if not (resolved.reproducible or promise.strict) and "torch" in stage.tools:
        promise = Promise()  # not bit-reproducible: its digest promises nothing elsewhere
    with outputs.lock(build_dir, stage_name):
        outputs.sweep(build_dir, stage_name)
        material = key_material(stage, resolved, build_dir, cache_root)
        key = caches.key_of(material)
        if promise.strict:
            _check_key(resolved, material, key, promise, build_dir)
        return _realize(checked, stage, key, material, build_dir, cache_root, promise,
                        shared or Sharing(), start, compute)


@dataclass(frozen=True)
class Promise:
    """The lock file's word on a stage, and whether a differing key is an error too."""

    locked: LockEntry | None = None
    strict: bool = False
    manifest: dict[str, LockEntry] = field(default_factory=dict)  # its manifest's stages
    provenance: Provenance | None = None
    # --relock: an output the lock contradicts, or one fetched from a remote, is not
    # adopted but built here, and the lock takes what was built (never bytes from elsewhere)
    relock: bool = False

    def expected(self, key: str) -> str | None:
        """The digest the lock records for `key` (None: the lock says nothing of it)."""
        if self.locked is None or self.locked.get("key") != key:
            return None
        return self.locked.get("digest")

    def adoptable(self, key: str, found: caches.Entry | outputs.State) -> bool:
        """May a build take `found` (a materialized or cached output) for this stage?"""
        if not self.relock:
            return True
        return found.origin is None and self.expected(key) in (None, found.digest)


def _check_key(resolved: Resolved, material: KeyMaterial, key: str, promise: Promise,
               build_dir: Path) -> None:
    """--locked: the stage's inputs must be the locked ones; name whatever moved."""
    stage = material["stage"]
    where = f"stage {resolved.name}.{stage} ({resolved.display})"
    if promise.locked is None:
        raise StageFailed(f"{where} is not in edgebuild.lock (a new manifest or stage); "
                          "build without --locked and commit edgebuild.lock")
    if promise.locked.get("key") == key:
        return
    moved = provenance.explain(material, resolved.files.get(stage, []), build_dir.parent.parent,
                               resolved.name, promise.provenance,
                               {name: entry.get("digest", "") for name, entry
                                in promise.manifest.items()})
    raise StageFailed(f"{where}: its inputs no longer match edgebuild.lock: "
                      f"{'; '.join(moved)} changed. If that is intended, build without "
                      "--locked and commit edgebuild.lock")


def _realize(checked: Checked, stage: Stage, key: str, material: KeyMaterial, build_dir: Path,
             cache_root: Path, promise: Promise, shared: Sharing, start: float,
             compute: bool = True) -> Outcome:
    stage_name = stage.name
    state = outputs.current(build_dir, stage_name, key)
    if state is not None and promise.adoptable(key, state):
        _keep_promise(stage_name, key, state, promise, build_dir)
        return Outcome(stage_name, "uptodate", key, state.digest, time.perf_counter() - start)
    cache = caches.Cache(cache_root)
    found = _restore(cache, stage, key, shared, promise, build_dir)
    if found is not None:
        return Outcome(stage_name, found[1], key, found[0].digest, time.perf_counter() - start)
    if not compute:
        raise NotCached(key)

    def build(out: Path) -> None:
        if material["tools"].get("torch-kernels") == kernels.SIGNATURE:
            kernels.check()  # the pin took (build.kernels), else the key would lie
        active = [name for name, s in STAGES.items() if s.applies(checked)]
        stage.run(Context(checked, out, {u: build_dir / u for u in upstream(stage, active)},
                          cache_root, build_dir, stage.name))
        contracts.check(stage.name, stage.artifacts, out)  # before it is published
        _verify_inputs(stage_name, material, build_dir, checked)

    if cache.writable:
        entry, built = cache.publish(stage_name, key, material, build)
        _keep_promise(stage_name, key, entry, promise, build_dir)
        outputs.materialize(entry, build_dir, stage_name, stage.exports)
        if built:
            sharing.push(shared, entry)
    else:  # a read-only cache: restores only; what must run is built beside the tree
        built = _build_unpublished(stage, key, material, build, build_dir, promise)
    digest = outputs.read_state(build_dir, stage_name)
    return Outcome(stage_name, "built" if built else "restored", key,
                   digest.digest if digest else "", time.perf_counter() - start)


def _restore(cache: caches.Cache, stage: Stage, key: str, shared: Sharing, promise: Promise,
             build_dir: Path) -> tuple[caches.Entry, Status] | None:
    """Materialize the stage's entry from the local cache, else from the remote one (by
    key); a local entry the remote lacks is pushed there (it may predate the remote)."""
    entry = cache.lookup(stage.name, key)
    status: Status = "restored"
    if entry is not None and not promise.adoptable(key, entry):
        with cache.lock(stage.name, key):  # --relock: rebuilt here, replacing it
            cache.discard(entry)
        entry = None
    if (entry is None or caches.problems(entry)) and not promise.relock:
        entry, status = sharing.pull(shared, cache, stage.name, key, promise.expected(key),
                                     lambda out: contracts.check(stage.name, stage.artifacts,
                                                                 out)), "fetched"
    if entry is None:
        return None
    _keep_promise(stage.name, key, entry, promise, build_dir)
    outputs.materialize(entry, build_dir, stage.name, stage.exports)
    caches.touch(entry)
    if status == "restored":
        sharing.push(shared, entry)
    return entry, status


def _build_unpublished(stage: Stage, key: str, material: KeyMaterial,
                       build: Callable[[Path], None], build_dir: Path, promise: Promise) -> bool:
    temp = build_dir / f".tmp-{stage.name}-build-{uuid.uuid4().hex[:8]}"
    try:
        caches.assemble(temp, stage.name, key, material, build)
        entry = caches.read_entry(stage.name, key, temp)
        _keep_promise(stage.name, key, entry, promise, build_dir)
        outputs.materialize(entry, build_dir, stage.name, stage.exports)
    finally:
        caches.remove_tree(temp)
    return True


def _verify_inputs(stage: str, material: KeyMaterial, build_dir: Path, checked: Checked) -> None:
    """Hash what the stage read once more, before its result is published under the key:
    an upstream output or a data file that changed meanwhile means the key does not name
    the bytes read — nothing is published."""
    for name, digest in material["upstream"].items():
        if caches.digest_of(outputs.tracked(build_dir / name)) != digest:
            raise StageFailed(f"stage {stage}: its input {build_dir / name} changed while it "
                              "ran (another process wrote it?); nothing was published; "
                              "build again")
    files = STAGES[stage].files(checked)
    digests = material["config"].get("files", [])
    for path, content in zip(files, digests if isinstance(digests, list) else [], strict=False):
        if caches.sha256_file(Path(path)) != content:
            raise StageFailed(f"stage {stage}: data file {path} changed while the stage read "
                              "it; nothing was published; build again")


class NotCached(Exception):
    """`realize(compute=False)` found the stage neither current, nor cached, nor shared."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class IntegrityError(StageFailed):
    """Same key, other bytes: a nondeterministic stage, another machine or a tampered
    cache. Never resolved silently (the lock file is not rewritten)."""


def _keep_promise(stage: str, key: str, entry: caches.Entry | outputs.State, promise: Promise,
                  build_dir: Path) -> None:
    """A lock digest is a promise: under the key it was recorded with, the output has
    those bytes. Breaking it is an integrity error; with --locked, any difference fails.
    --relock keeps no promise: what it built here is what the lock will say."""
    locked = promise.locked
    if promise.relock or locked is None or locked.get("digest") in (None, entry.digest):
        return
    if locked.get("key") == key:
        raise IntegrityError(_broken(stage, key, entry, locked, build_dir))
    if promise.strict:  # unreachable after _check_key, kept as the last line of defence
        raise StageFailed(f"stage {stage}: key {key[:16]} differs from edgebuild.lock")


def _broken(stage: str, key: str, entry: caches.Entry | outputs.State, locked: LockEntry,
            build_dir: Path) -> str:
    """Same key, other bytes: which files, why it happens, what to do."""
    recorded = locked.get("outputs") or {}
    files = {name: (value if isinstance(value, str) else str(value[2]))[:16]
             for name, value in entry.files.items()}
    differ = sorted(name for name in set(files) | set(recorded)
                    if files.get(name) != recorded.get(name))
    which = f" ({', '.join(differ[:6])}{', ...' if len(differ) > 6 else ''})" if differ else ""
    if recorded and not differ:  # the lock's own file list and digest disagree
        which = " (every file as edgebuild.lock lists it, yet not the lock's digest: its entry " \
            "is inconsistent, was it edited by hand?)"
    return (f"stage {stage}: output {build_dir / stage}{which} differs from edgebuild.lock "
            f"although its inputs match (key {key[:16]}; digest {entry.digest[:16]}, lock "
            f"{str(locked.get('digest'))[:16]}). The same inputs gave other bytes: training "
            "that is not bit-reproducible here (train.reproducible: false, or a CPU or "
            "library the kernel pin does not cover), another C toolchain, or a tampered "
            "cache entry. Restore the locked bytes from the shared remote cache (--remote), "
            "run `edgebuild cache verify`, or if the new output is right, build with "
            "--relock and commit edgebuild.lock")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
