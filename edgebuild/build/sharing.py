"""The shared remote cache inside a build: pull a stage by key before computing it, push
it after. The protocol (blobs, verification, atomic uploads) is build.remote's; this
module decides *when* the remote is used and what a failure costs.

A remote is an accelerator, never a dependency: a build whose remote cannot be reached,
refuses the credentials or is read-only says so in one line and goes on with the local
cache — except under `--locked`, where a remote that cannot be read is exit 2 (CI asked
for the shared results and would silently recompute them). A remote that fails in the
middle of a run is dropped for the rest of the run, in that process, after one line.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from edgebuild.build.cache import Cache, Entry
from edgebuild.build.outcome import Options
from edgebuild.build.remote import Remote, RemoteError
from edgebuild.core.errors import UserError

_DROPPED: set[str] = set()  # remotes that failed in this process


@dataclass(frozen=True)
class Sharing:
    """Which remote a stage may use, and whether it may write there."""

    url: str | None = None
    push: bool = True

    @staticmethod
    def of(options: Options) -> Sharing:
        return Sharing(options.remote, options.push)


def prepare(options: Options) -> Options:
    """Probe the remote once, in the main process, before any stage runs: unreachable
    or refused -> warn and build locally (exit 2 under --locked); not asked to push
    (the default) or read-only credentials -> pull only."""
    if options.remote is None:
        return options
    try:
        writable = Remote(options.remote).probe(write=options.push)
    except RemoteError as exc:
        if options.strict:
            raise UserError(f"{exc} (--locked needs the remote cache it was given; fix it, "
                            "or build without --remote)") from None
        _say(f"{exc}; building with the local cache only")
        return replace(options, remote=None)
    if options.push and not writable:
        _say(f"remote cache {options.remote} is read-only for these credentials: restoring "
             "from it, not pushing to it")
    return replace(options, push=writable)


def pull(sharing: Sharing, cache: Cache, stage: str, key: str, expect: str | None = None,
         accept: Callable[[Path], None] | None = None) -> Entry | None:
    """The remote's entry for `key`, now in the local cache; None when it has none (or
    only one that fails a check, which remote.fetch reports), or the remote failed.
    `expect` and `accept`: see remote.Remote.fetch (the lock's digest, the stage's checks)."""
    if sharing.url is None or sharing.url in _DROPPED or not cache.writable:
        return None
    try:
        return _remote(sharing.url).fetch(cache, stage, key, expect, accept)
    except RemoteError as exc:
        _drop(sharing.url, exc)
        return None


def push(sharing: Sharing, entry: Entry) -> None:
    """Share a stage just built (best effort: the local cache already holds it, and
    `edgebuild cache push` can share it later)."""
    if sharing.url is None or not sharing.push or sharing.url in _DROPPED:
        return
    try:
        _remote(sharing.url).push(entry)
    except RemoteError as exc:
        _drop(sharing.url, exc)


@functools.cache
def _remote(url: str) -> Remote:
    return Remote(url)


def _drop(url: str, exc: Exception) -> None:
    _DROPPED.add(url)
    _say(f"{exc}; this build goes on without the remote cache (push later with "
         "`edgebuild cache push`)")


def _say(message: str) -> None:
    print(f"edgebuild: {message}", file=sys.stderr, flush=True)
