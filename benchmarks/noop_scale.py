"""Benchmark: how a no-op `edgebuild` scales with the number of manifests, for any mix.

Makes one project per count (default 0, 10, 100, 1000) of tiny 10-stage manifests
(validate, data, train, qat, quantize, evaluate, plan, codegen, kat, report; host target)
beside the repository's real examples (manifests/*.yaml and their folders: MAX78000, two
targets, on-device training; --no-examples leaves them out), all sharing one cache, builds
each project once, then times N no-op runs of each as a subprocess (wall clock),
alternating two argument sets: `build --json` and `build --json --until plan --cache-dir
<the same cache, as a relative path>` (each must stay on the fast path: a no-op that
rewrites the no-op index took the full path). The tiny manifests differ only in `name:`,
so the name-independent stages are built once and restored for the others; codegen, kat
and report are built per name (their outputs carry it). The build is slow the first time
(minutes for the examples, about 2 s per manifest at 1,000); pass --workdir to keep it
for later runs.

    python benchmarks/noop_scale.py [--counts 0,10,100,1000] [--runs 5] [--jobs 2]
                                    [--workdir DIR] [--no-examples]
                                    [--limit-100 0.5] [--limit-per 0.002]

Prints, per count and per argument set, the median no-op time and the cost per additional
manifest, and exits 1 if a no-op did any work or left the fast path, a median of the
project with 100 tiny manifests exceeds --limit-100 seconds, or the cost per additional
manifest (slope between the smallest and largest count) exceeds --limit-per.
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
EXAMPLES = Path(__file__).resolve().parent.parent / "manifests"
ARGUMENT_SETS = {  # two builds alternated: each must keep its no-op on the fast path
    "all": ["build", "--json"],
    "until-plan": ["build", "--json", "--until", "plan", "--cache-dir", "../cache"],
}


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(edgebuild_cmd() + args, cwd=cwd, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=6 * 3600)


def make_project(root: Path, count: int, examples: bool) -> Path:
    project = root / f"n{count}{'-mixed' if examples else ''}"
    manifests = project / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    for example in sorted(EXAMPLES.iterdir()) if examples else []:
        if example.suffix in (".yaml", ".yml") and not (manifests / example.name).is_file():
            shutil.copy2(example, manifests / example.name)
        elif example.is_dir() and not (manifests / example.name).exists():
            shutil.copytree(example, manifests / example.name)
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


def stages_of(result: subprocess.CompletedProcess[str], project: Path, args: list[str]
              ) -> dict[str, set[str]]:
    """Every manifest's stages and their statuses, or exit naming the failed build."""
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} in {project} exited {result.returncode}:\n"
                 f"{result.stderr[-3000:]}")
    outcomes = json.loads(result.stdout)["manifests"]
    return {f"{name}.{stage}": value["status"] for name, stages in outcomes.items()
            for stage, value in stages.items()}


def index_stats(project: Path) -> dict[str, int]:
    """The no-op index files and their mtimes: a full check rewrites its environment's."""
    folder = project / "build" / ".edgebuild"
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("index*.json"))}


def noop_times(project: Path, env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """`runs` no-ops of each argument set, alternated; each must be a no-op answered from
    the index (after one warm-up each, which may write it)."""
    expected = {name: stages_of(run(args, project, env), project, args)
                for name, args in ARGUMENT_SETS.items()}  # the warm-ups
    before = index_stats(project)
    times: dict[str, list[float]] = {name: [] for name in ARGUMENT_SETS}
    for _ in range(runs):
        for name, args in ARGUMENT_SETS.items():
            start = time.perf_counter()
            result = run(args, project, env)
            times[name].append(time.perf_counter() - start)
            statuses = stages_of(result, project, args)
            if statuses.keys() != expected[name].keys() or set(statuses.values()) != {"uptodate"}:
                sys.exit(f"`{' '.join(args)}` in {project} was not a no-op of "
                         f"{len(expected[name])} stages: {len(statuses)} stages, "
                         f"{sorted(set(statuses.values()))}")
            if index_stats(project) != before:
                sys.exit(f"`{' '.join(args)}` in {project} left the no-op fast path (it "
                         "rewrote the no-op index: the argument sets invalidate each other)")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="0,10,100,1000",
                        help="tiny manifests per project (beside the examples)")
    parser.add_argument("--runs", type=int, default=5, help="timed no-op runs per count")
    parser.add_argument("--jobs", type=int, default=2, help="-j for the initial builds")
    parser.add_argument("--workdir", help="keep the projects and cache here (reused)")
    parser.add_argument("--no-examples", dest="examples", action="store_false",
                        help="tiny manifests only (without the repository's examples)")
    parser.add_argument("--limit-100", type=float, default=0.5, dest="limit_100",
                        help="max median no-op seconds with 100 tiny manifests")
    parser.add_argument("--limit-per", type=float, default=0.002, dest="limit_per",
                        help="max seconds per additional manifest")
    args = parser.parse_args(argv)
    counts = sorted({int(c) for c in args.counts.split(",")})
    with tempfile.TemporaryDirectory(prefix="edgebuild-scale-") as tmp:
        root = Path(args.workdir).resolve() if args.workdir else Path(tmp)
        env = {**os.environ, "EDGEBUILD_CACHE": str(root / "cache")}
        medians: dict[str, dict[int, float]] = {name: {} for name in ARGUMENT_SETS}
        extra = len(list(EXAMPLES.glob("*.y*ml"))) if args.examples else 0
        for count in counts:
            project = make_project(root, count, args.examples)
            build(project, env, args.jobs)
            for name, times in noop_times(project, env, args.runs).items():
                medians[name][count] = statistics.median(times)
                print(f"{count + extra:>5} manifests ({count} tiny), {name:<10}: no-op median "
                      f"{medians[name][count]:.3f}s (min {min(times):.3f}s, "
                      f"max {max(times):.3f}s, {args.runs} runs)")
    return verdict([failure for name, found in medians.items()
                    for failure in judge(name, found, args.limit_100, args.limit_per)])


def judge(name: str, medians: dict[int, float], limit_100: float, limit_per: float
          ) -> list[str]:
    failures = []
    if 100 in medians and medians[100] > limit_100:
        failures.append(f"{name}, 100 tiny manifests: {medians[100]:.3f}s > {limit_100}s")
    low, high = min(medians), max(medians)
    if high > low:
        slope = (medians[high] - medians[low]) / (high - low)
        print(f"{name}: per additional manifest ({low} -> {high} tiny): {slope * 1000:.2f} ms")
        if slope > limit_per:
            failures.append(f"{name}: {slope * 1000:.2f} ms per manifest > "
                            f"{limit_per * 1000:.2f} ms")
    return failures


if __name__ == "__main__":
    sys.exit(main())
