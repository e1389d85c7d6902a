"""Which edgebuild process owns `build/<name>/` right now.

A build tree holds one manifest's stages; its up-to-date checks and every stage's inputs
read it. Two processes building the same name into one tree would read each other's
outputs mid-way (a QAT keyed by one float checkpoint and trained from another's). So a
build claims every tree it touches for its whole run, in name order (no deadlock):
- another edgebuild building *the same manifest file* is waited for (then this build
  finds its stages up to date, as make would);
- another building *a different manifest with the same name* is refused at once with a
  user error: two manifests cannot share `build/<name>/`; one of them needs another name.

The lock is what guarantees exclusion; the owner record beside it only chooses between
waiting and refusing, and a stale one can at worst make a build wait instead of refuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from edgebuild.build.cache import LOCK_TIMEOUT_S
from edgebuild.build.flock import FileLock, Timeout
from edgebuild.build.resolved import Resolved
from edgebuild.core import boundedjson
from edgebuild.core.errors import UserError


@contextlib.contextmanager
def claimed(trees: list[tuple[Path, Resolved]]) -> Iterator[None]:
    """Hold every `(build_dir, manifest)` tree for the duration of the block."""
    with contextlib.ExitStack() as stack:
        for build_dir, resolved in sorted(trees, key=lambda item: str(item[0])):
            stack.enter_context(_claim(build_dir, resolved))
        yield


@contextlib.contextmanager
def _claim(build_dir: Path, resolved: Resolved) -> Iterator[None]:
    state = build_dir / ".state"
    state.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(state / "claim.lock"), timeout=LOCK_TIMEOUT_S)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        _wait_or_refuse(lock, state / "claim.json", build_dir, resolved)
    try:
        _write_owner(state / "claim.json", resolved)
        yield
    finally:
        lock.release()


def _write_owner(path: Path, resolved: Resolved) -> None:
    """One small write in place, no rename, on every build (also a no-op one). A reader
    that catches it half-written cannot parse it and waits, the safe choice."""
    with contextlib.suppress(OSError), open(path, "w") as handle:
        handle.write(json.dumps({"manifest": resolved.path, "pid": os.getpid(),
                                 "host": os.uname().nodename}))


def _wait_or_refuse(lock: FileLock, record: Path, build_dir: Path, resolved: Resolved) -> None:
    try:
        owner = boundedjson.read(record)
    except (OSError, ValueError):
        owner = {}
    who = f"edgebuild (pid {owner.get('pid', '?')} on {owner.get('host', '?')})"
    if isinstance(owner, dict) and owner.get("manifest") not in (None, resolved.path):
        raise UserError(
            f"{resolved.display}: {build_dir}/ is being built right now by {who} from "
            f"{owner['manifest']}, another manifest named {resolved.name!r}; manifests that "
            "build at the same time need different `name:`s (the name picks build/<name>/)")
    print(f"{resolved.name}: waiting for {who}, which is building it", file=sys.stderr,
          flush=True)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(f"{build_dir}/ stayed busy for {LOCK_TIMEOUT_S:.0f} s "
                        f"(held by {who})") from None
