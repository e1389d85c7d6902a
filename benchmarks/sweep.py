"""Benchmark: a 16-manifest sweep built by one process vs by a 2-worker Dask LocalCluster.

Creates a temporary project with 16 variants of manifests/digits.yaml (4 seeds x 4
widths of the first convolution, few epochs), then builds `--until quantize` three ways,
each from a fresh build tree and a fresh local cache, with `--json`:

  local -j 1      one edgebuild process, stages one after another
  local -j 2      doit's worker processes on this machine (for reference)
  cluster         `--scheduler` on a distributed.LocalCluster of 2 worker processes with
                  one thread each, sharing results through a remote cache directory

and prints wall-clock seconds, the tally of outcomes and the speed-up over -j 1. It then
checks that every build produced the same output digest for every stage (the cluster's
artifacts are the local build's).

    python benchmarks/sweep.py [--epochs E] [--manifests N]

Seen on 2026-11-26 (AMD EPYC, 2 cores, torch 2.13.0+cpu), 16 manifests, 3 epochs, three
runs on a machine with other work (load average 0.9-1.7), wall seconds:

    local -j 1   39.7 / 53.5 / 46.1
    local -j 2   29.3 / 29.8 / 30.2    (1.36x / 1.80x / 1.53x)
    cluster      44.7 / 42.3 / 44.3    (0.89x / 1.27x / 1.04x; the first run before each
                                        worker got its share of the cores)

On one 2-core machine the cluster is slower than `-j 2`: the stage work is the same
(sum of stage seconds 55.0 vs 50.2 in one run), but each stage also moves its inputs and
its result through the remote cache twice and the Dask scheduler and nannies share the
two cores. The cluster pays off when it has more machines than one; this benchmark shows
that it gives the same digests and does not lose to a single process.

Exit status 1 if a build fails, a stage is not built, digests differ, or the cluster is
slower than the single process by more than 10%.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

REPO = Path(__file__).resolve().parent.parent
SEEDS = (1, 2, 3, 4)
WIDTHS = (8, 12, 16, 20)


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def project(root: Path, epochs: int, count: int) -> None:
    """`count` digits variants in root/manifests (the data comes with scikit-learn)."""
    base = yaml.safe_load((REPO / "manifests" / "digits.yaml").read_text())
    (root / "manifests").mkdir(parents=True)
    variants = [(seed, width) for seed in SEEDS for width in WIDTHS][:count]
    for seed, width in variants:
        body = json.loads(json.dumps(base))
        body["name"] = f"digits_s{seed}_w{width}"
        body["seed"] = seed
        body["model"]["layers"][0]["out"] = width
        body["train"]["epochs"] = epochs
        body["train"]["schedule"] = {"type": "constant"}
        if "qat" in body:
            body["qat"]["epochs"] = 1
        else:
            body["qat"] = {"epochs": 1}
        (root / "manifests" / f"{body['name']}.yaml").write_text(yaml.safe_dump(body))


def build(root: Path, label: str, extra: list[str]) -> tuple[float, dict]:
    for name in ("build", "cache"):
        shutil.rmtree(root / name, ignore_errors=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("EDGEBUILD_CACHE", None)
    start = time.perf_counter()
    result = subprocess.run(edgebuild_cmd() + ["build", "--json", "--until", "quantize",
                                               *extra], cwd=root, env=env, text=True,
                            capture_output=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-3000:])
        raise SystemExit(f"{label}: build failed ({result.returncode})")
    return seconds, json.loads(result.stdout)


def cluster_build(root: Path) -> tuple[float, dict]:
    from distributed import LocalCluster

    remote = root / "remote"
    shutil.rmtree(remote, ignore_errors=True)
    remote.mkdir()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        return build(root, "cluster", ["--scheduler", cluster.scheduler_address,
                                       "--remote", str(remote)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--manifests", type=int, default=16)
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="edgebuild-sweep-") as temp:
        root = Path(temp)
        project(root, args.epochs, args.manifests)
        runs = {"local -j 1": build(root, "-j 1", ["-j", "1"]),
                "local -j 2": build(root, "-j 2", ["-j", "2"]),
                "cluster (2 workers)": cluster_build(root)}
    base = runs["local -j 1"][0]
    print(f"{'build':<22}{'wall s':>9}{'speed-up':>10}  outcomes")
    for label, (seconds, result) in runs.items():
        print(f"{label:<22}{seconds:9.1f}{base / seconds:10.2f}  {result['tally']}")
    digests = {label: {(s["manifest"], s["stage"]): s["digest"] for s in result["stages"]}
               for label, (_, result) in runs.items()}
    reference = digests["local -j 1"]
    for label, found in digests.items():
        if found != reference:
            failures.append(f"{label}: output digests differ from local -j 1")
        if set(runs[label][1]["tally"]) - {"built", "restored-local"}:
            failures.append(f"{label}: unexpected outcomes {runs[label][1]['tally']}")
    print(f"{args.manifests} manifests, {len(reference)} stages; digests identical: "
          f"{not any('digests' in f for f in failures)}")
    if runs["cluster (2 workers)"][0] > base * 1.10:
        failures.append("the 2-worker cluster was more than 10% slower than one process")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
