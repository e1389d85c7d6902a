"""Builds on a Dask distributed cluster (`--scheduler tcp://host:8786`).

doit stays the planner: it orders the stages and runs as many at once as the cluster has
worker threads. Each stage that must run is sent to a Dask worker with plain data — the
manifest's path, the stage, the run's settings and the keys of its direct upstream
outputs. The worker pulls those outputs from the shared remote cache by key, realizes the
stage with the same cache protocol as a local build (its own scratch build tree and
local cache), and pushes the result; this process then restores the stage from the
remote cache by key into the user's build tree. Workers therefore need: the same
edgebuild (its code is part of every key: a worker whose key differs is refused), the
project's data files at the same paths, and credentials for the remote cache.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgebuild.build import builder, job, outputs, sharing
from edgebuild.build import cache as caches
from edgebuild.build.outcome import Options, StageRecord
from edgebuild.build.registry import STAGES, upstream
from edgebuild.build.sharing import Sharing
from edgebuild.core.errors import StageFailed, UserError

CONNECT_TIMEOUT_S = 10
_CLIENT: Any = None  # the distributed.Client of this run (doit threads share it)


def connect(address: str, pinned: bool) -> int:
    """Connect to the scheduler and prepare its workers; the number of stages to run at
    once (the workers' threads)."""
    global _CLIENT
    try:
        from distributed import Client
    except ImportError:
        raise UserError("--scheduler needs Dask's distributed package: pip install "
                        "'edgebuild[dask]'") from None
    try:
        _CLIENT = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(f"cannot reach the Dask scheduler at {address} ({exc}); start one "
                        "with `dask scheduler` and workers with `dask worker ADDRESS` "
                        "(README, Building on a cluster)") from None
    threads = sum(_CLIENT.nthreads().values())
    if threads == 0:
        raise UserError(f"the Dask scheduler at {address} has no workers; start some with "
                        f"`dask worker {address}`")
    _prepare_workers(_CLIENT, pinned)
    return threads


THREADS_ENV = "EDGEBUILD_STAGE_THREADS"  # set in each worker process by `_share_cores`


def _prepare_workers(client: Any, pinned: bool) -> None:
    """Give each worker process its share of compute threads — its machine's cores over
    the Dask threads of all workers there (two single-thread workers on two cores each
    took both cores for torch and thrashed) — and pin and import torch there now, as `-j`
    does before it forks: once per worker, not inside the first stage it runs."""
    from edgebuild.build import budget

    cores: dict[str, int] = client.run(budget.cores)
    nthreads: dict[str, int] = client.nthreads()
    hosts: dict[str, int] = {}
    for address, count in nthreads.items():
        hosts[_host(address)] = hosts.get(_host(address), 0) + count
    for address in nthreads:
        share = max(1, cores.get(address, 1) // hosts[_host(address)])
        client.run(_warm, share, pinned, workers=[address])


def _host(address: str) -> str:
    return address.rsplit(":", 1)[0]


def _warm(threads: int, pinned: bool) -> None:
    """On a worker: its thread share, the kernel pin, torch and matplotlib imported."""
    from edgebuild.build import budget, kernels

    os.environ[THREADS_ENV] = str(threads)
    if pinned:
        kernels.pin()
    budget.preload(threads)


def realize(manifest_path: str, display: str, target: str | None, stage: str, build_dir: Path,
            cache_root: Path, expected: str, options: Options) -> job.Result:
    """In this process: restore the stage if it is current, cached or shared; else have a
    worker compute it, then restore it from the remote cache."""
    def body() -> StageRecord:
        checked = job.load(manifest_path, display, target, stage, expected)
        promise = job.promise(options, checked.name, stage)
        restore = Sharing.of(options)
        try:
            return job.record(builder.realize(checked, stage, build_dir, cache_root, promise,
                                              restore, compute=False))
        except builder.NotCached as miss:
            key = miss.key
        active = [name for name, s in STAGES.items() if s.applies(checked)]
        keys = {u: _state_key(build_dir, u) for u in upstream(STAGES[stage], active)}
        remote = _submit((manifest_path, display, target), stage, expected, options, keys, key)
        try:
            here = builder.realize(checked, stage, build_dir, cache_root, promise, restore,
                                   compute=False)
        except builder.NotCached:
            raise StageFailed(f"stage {stage}: a Dask worker built it but the remote cache "
                              f"{options.remote} does not have it; is the remote writable "
                              "for the workers' credentials?") from None
        return {**job.record(here), "status": remote["status"],  # the worker's work, and
                "seconds": round(remote["seconds"] + here.seconds, 3)}  # the restore here

    return job.attempt(stage, options.debug, body)


def _state_key(build_dir: Path, stage: str) -> str:
    state = outputs.read_state(build_dir, stage)
    if state is None:
        raise StageFailed(f"upstream stage {stage} has no output in {build_dir}")
    return state.key


def _submit(manifest: tuple[str, str, str | None], stage: str, expected: str,
            options: Options, keys: dict[str, str], key: str) -> StageRecord:
    """Run the stage on a worker and wait; the worker must arrive at the same key.
    `manifest`: its path, display name and target label."""
    future = _CLIENT.submit(work, *manifest, stage, expected, options, keys,
                            key=f"edgebuild-{stage}-{key[:16]}", pure=False)
    try:
        result: job.Result = future.result()
    except Exception as exc:  # a lost worker, a cancelled future: the cluster failed
        raise StageFailed(f"stage {stage}: the Dask worker failed ({type(exc).__name__}: "
                          f"{exc})") from None
    if result[0] != "ok":
        raise (UserError if result[0] == "user" else StageFailed)(result[1])
    record = result[1]
    if record["key"] != key:
        raise StageFailed(
            f"stage {stage}: the Dask worker computed key {record['key'][:16]}, this machine "
            f"{key[:16]}: the worker runs another edgebuild, torch or toolchain, or sees "
            "other data files at the manifest's paths; install the same versions there")
    if record["status"] != "built":
        record = {**record, "status": "fetched"}
    return record


def work(manifest_path: str, display: str, target: str | None, stage: str, expected: str,
         options: Options, keys: dict[str, str]) -> job.Result:
    """On a Dask worker: materialize the upstream outputs by key from the remote cache
    in a scratch tree, realize the stage there, push it."""
    value = os.environ.get(THREADS_ENV, "")
    options = replace(options, threads=int(value) if value.isdigit() else 1)
    job.prepare(options)
    shared = Sharing(options.remote, push=True)
    root = scratch()

    def body() -> StageRecord:
        checked = job.load(manifest_path, display, target, stage, expected)
        build_dir = root / "build" / checked.name
        for name, key in keys.items():
            _materialize(shared, root / "cache", build_dir, name, key)
        return job.record(builder.realize(checked, stage, build_dir, root / "cache",
                                          builder.Promise(), shared))

    return job.attempt(stage, options.debug, body)


def scratch() -> Path:
    """This worker process's build tree and local cache (EDGEBUILD_WORKER_DIR, else a
    directory in the system's temp dir)."""
    base = os.environ.get("EDGEBUILD_WORKER_DIR") or Path(tempfile.gettempdir())
    return Path(base) / "edgebuild-worker" / str(os.getpid())


def _materialize(shared: Sharing, cache_root: Path, build_dir: Path, stage: str,
                 key: str) -> None:
    cache = caches.Cache(cache_root)
    with outputs.lock(build_dir, stage):
        if outputs.current(build_dir, stage, key) is not None:
            return
        entry = cache.lookup(stage, key)
        if entry is None or caches.problems(entry):
            entry = sharing.pull(shared, cache, stage, key)
        if entry is None:
            raise StageFailed(f"upstream stage {stage} ({key[:16]}) is not in the remote "
                              f"cache {shared.url}")
        outputs.materialize(entry, build_dir, stage, STAGES[stage].exports)
