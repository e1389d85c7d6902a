"""Benchmark: how a no-op `edgebuild` scales with the number of manifests.

Makes one project per count (default 1, 10, 100, 1000) of tiny 10-stage manifests
(validate, data, train, qat, quantize, evaluate, plan, codegen, kat, report; host target),
all sharing one cache, builds each project once, then times N no-op runs of each as a
subprocess (wall clock). The manifests differ only in `name:`, so the name-independent
stages are built once and restored for the others; codegen, kat and report are built per
name (their outputs carry it). The build is slow the first time (about 2 s per manifest at
1,000); pass --workdir to keep it for later runs.

    python benchmarks/noop_scale.py [--counts 1,10,100,1000] [--runs 5] [--jobs 2]
                                    [--workdir DIR] [--limit-100 0.4] [--limit-per 0.002]

Prints median no-op time per count and the cost per additional manifest, and exits 1 if
a no-op did any work, the 100-manifest median exceeds --limit-100 seconds, or the cost per
additional manifest (slope between the smallest and largest count) exceeds --limit-per.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

MANIFEST = """\
name: {name}
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 4, kernel: 3, pad: 1, act: relu, pool: {{mode: max, size: 2}}}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train:
  epochs: 1
  batch: 64
  optimizer: {{adam: {{lr: 0.003}}}}
target:
  device: host
  memory: {{l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""
STAGES = 10


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(edgebuild_cmd() + args, cwd=cwd, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=6 * 3600)


def make_project(root: Path, count: int) -> Path:
    project = root / f"n{count}"
    manifests = project / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        path = manifests / f"m{index:04d}.yaml"
        text = MANIFEST.format(name=f"m{index:04d}")
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return project


def build(project: Path, env: dict[str, str], jobs: int) -> None:
    start = time.perf_counter()
    result = run(["build", "-j", str(jobs)], project, env)
    if result.returncode != 0:
        sys.exit(f"building {project} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    print(f"  built {project.name} in {time.perf_counter() - start:.1f}s", file=sys.stderr)


def noop_times(project: Path, env: dict[str, str], count: int, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = run(["build", "--json"], project, env)
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            sys.exit(f"no-op in {project} exited {result.returncode}:\n{result.stderr[-3000:]}")
        outcomes = json.loads(result.stdout)["manifests"]
        statuses = [v["status"] for stages in outcomes.values() for v in stages.values()]
        if len(outcomes) != count or len(statuses) != count * STAGES or \
                set(statuses) != {"uptodate"}:
            sys.exit(f"no-op in {project} was not a no-op of {count} x {STAGES} stages: "
                     f"{len(outcomes)} manifests, {len(statuses)} stages, {set(statuses)}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,10,100,1000", help="manifest counts")
    parser.add_argument("--runs", type=int, default=5, help="timed no-op runs per count")
    parser.add_argument("--jobs", type=int, default=2, help="-j for the initial builds")
    parser.add_argument("--workdir", help="keep the projects and cache here (reused)")
    parser.add_argument("--limit-100", type=float, default=0.4, dest="limit_100",
                        help="max median no-op seconds for 100 manifests")
    parser.add_argument("--limit-per", type=float, default=0.002, dest="limit_per",
                        help="max seconds per additional manifest")
    args = parser.parse_args(argv)
    counts = sorted({int(c) for c in args.counts.split(",")})
    with tempfile.TemporaryDirectory(prefix="edgebuild-scale-") as tmp:
        root = Path(args.workdir).resolve() if args.workdir else Path(tmp)
        env = {**os.environ, "EDGEBUILD_CACHE": str(root / "cache")}
        medians = {}
        for count in counts:
            project = make_project(root, count)
            build(project, env, args.jobs)
            times = noop_times(project, env, count, args.runs)
            medians[count] = statistics.median(times)
            print(f"{count:>5} manifests x {STAGES} stages: no-op median {medians[count]:.3f}s "
                  f"(min {min(times):.3f}s, max {max(times):.3f}s, {args.runs} runs)")
    return judge(medians, args.limit_100, args.limit_per)


def judge(medians: dict[int, float], limit_100: float, limit_per: float) -> int:
    failures = []
    if 100 in medians and medians[100] > limit_100:
        failures.append(f"100 manifests: {medians[100]:.3f}s > {limit_100}s")
    low, high = min(medians), max(medians)
    if high > low:
        slope = (medians[high] - medians[low]) / (high - low)
        print(f"per additional manifest ({low} -> {high}): {slope * 1000:.2f} ms")
        if slope > limit_per:
            failures.append(f"{slope * 1000:.2f} ms per manifest > {limit_per * 1000:.2f} ms")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
