"""Benchmark: does `edgebuild build -j N` beat `-j 1` on three real trainings?

Creates a temporary project with three copies of manifests/digits.yaml (other `name:` and
`seed:`, fewer epochs: each training takes seconds), then times `edgebuild build --until
train --json` with each -j value, N runs each, every run from a fresh build directory and
a fresh cache (--cache-dir in the temporary directory), so every stage really runs. Prints
one row per run — the 1-minute load average before it (other processes on the machine
skew every figure: run it on an idle machine), wall clock around subprocess.run, CPU
seconds of all its processes, and per stage the `seconds` from --json (sum, then each
manifest's) — and a summary per -j value (median wall time, ratio to -j 1, median CPU).

    python benchmarks/jobs.py [--runs N] [--jobs 1,2,4] [--epochs E] [--tolerance F]

Background: each stage process gets cores // jobs torch/BLAS threads
(edgebuild/build/budget.py); without that, -j 4 on 2 cores was 1.7x slower than -j 1.
The cpu column also shows what -j costs: every doit worker process that trains pays its
own one-time imports (torch, torch._dynamo, matplotlib: about 5 s of CPU on this 2-core
machine), which -j 1 pays once; on a busy machine that extra CPU is extra wall time.

Exit status 1 if a build fails, a stage was not built, or the median wall time of some
-j N exceeds the median of -j 1 by more than the tolerance (default 0.10: 10%).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

REPO = Path(__file__).resolve().parent.parent
MANIFESTS = (("digits_a", 1), ("digits_b", 2), ("digits_c", 3))  # name, seed
UNTIL = "train"
BUSY = 0.5  # a 1-minute load average above this before a run: other work is competing


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def manifest_text(name: str, seed: int, epochs: int) -> str:
    """manifests/digits.yaml under another name and seed, trained for `epochs` epochs
    (the learning-rate milestone moved to three quarters of them)."""
    text = (REPO / "manifests" / "digits.yaml").read_text()
    replacements = [
        (r"(?m)^name: .*$", f"name: {name}"),
        (r"(?m)^seed: .*$", f"seed: {seed}"),
        (r"(?m)^(\s+)epochs: .*$", rf"\g<1>epochs: {epochs}"),
        (r"milestones: \[[^\]]*\]", f"milestones: [{max(1, epochs * 3 // 4)}]"),
    ]
    for pattern, replacement in replacements:
        text, count = re.subn(pattern, replacement, text)
        if count != 1:
            sys.exit(f"manifests/digits.yaml: expected one match of {pattern!r}, found {count}")
    return text.replace("$schema=../schemas/", f"$schema={REPO / 'schemas'}/")


def make_project(root: Path, epochs: int) -> None:
    (root / "manifests").mkdir(parents=True)
    for name, seed in MANIFESTS:
        (root / "manifests" / f"{name}.yaml").write_text(manifest_text(name, seed, epochs))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def build(project: Path, cache: Path, jobs: int, env: dict) -> tuple[float, float, dict]:
    """One fresh build: (wall seconds, CPU seconds of all its processes, the --json
    "manifests" object)."""
    shutil.rmtree(project / "build", ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    args = edgebuild_cmd() + ["build", "--until", UNTIL, "-j", str(jobs), "--json",
                              "--cache-dir", str(cache)]
    start, cpu = time.perf_counter(), children_cpu()
    result = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=3600)
    wall, cpu = time.perf_counter() - start, children_cpu() - cpu
    if result.returncode != 0:
        sys.exit(f"-j {jobs}: `{' '.join(args)}` exited {result.returncode}\n{result.stderr}")
    try:
        outcomes = json.loads(result.stdout)["manifests"]
    except (ValueError, KeyError) as exc:
        sys.exit(f"-j {jobs}: cannot read the --json output ({exc}):\n{result.stdout}")
    return wall, cpu, outcomes


def not_built(outcomes: dict) -> list[str]:
    return [f"{m}.{s} {r['status']}" for m, stages in outcomes.items()
            for s, r in stages.items() if r["status"] != "built"]


def stage_names(outcomes: dict) -> list[str]:
    names: list[str] = []
    for stages in outcomes.values():
        names += [s for s in stages if s not in names]
    return names


def row(jobs: int, number: int, times: tuple[float, float, float], outcomes: dict,
        stages: list[str]) -> str:
    """-j, run, load average before, wall, CPU, then per stage: the sum over manifests and
    each manifest's seconds."""
    before, wall, cpu = times
    cells = [f"{jobs:>3}", f"{number:>3}", f"{before:5.2f}", f"{wall:8.2f}", f"{cpu:7.2f}"]
    for stage in stages:
        each = [outcomes[m][stage]["seconds"] for m, _ in MANIFESTS if stage in outcomes[m]]
        cells.append(f"{sum(each):8.2f}  " + "/".join(f"{s:.2f}" for s in each))
    return "  ".join(cells)


def header(stages: list[str]) -> str:
    cells = [" -j", "run", "load1", "  wall s", "  cpu s"]
    cells += [f"{stage + ' s':>8}  (" + "/".join(m for m, _ in MANIFESTS) + ")"
              for stage in stages]
    return "  ".join(cells)


def parse_jobs(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("-j values must be at least 1")
    return values if 1 in values else [1, *values]


def measure(project: Path, tmp: Path, jobs_values: list[int], runs: int,
            env: dict) -> tuple[dict[int, list[tuple[float, float]]], list[str], float]:
    """Every -j value, `runs` times: {jobs: [(wall, cpu)]}, the stages not built and the
    highest load average seen before a run."""
    walls: dict[int, list[tuple[float, float]]] = {}
    problems: list[str] = []
    printed, busiest = False, 0.0
    for jobs in jobs_values:
        for number in range(1, runs + 1):
            before = load()
            busiest = max(busiest, before)
            wall, cpu, outcomes = build(project, tmp / "cache", jobs, env)
            stages = stage_names(outcomes)
            if not printed:
                print(header(stages))
                printed = True
            print(row(jobs, number, (before, wall, cpu), outcomes, stages), flush=True)
            walls.setdefault(jobs, []).append((wall, cpu))
            problems += [f"-j {jobs} run {number}: {what}" for what in not_built(outcomes)]
    return walls, problems, busiest


def summary(walls: dict[int, list[tuple[float, float]]], tolerance: float) -> list[str]:
    base = statistics.median(wall for wall, _ in walls[1])
    print("\n -j  budget threads  median wall s  vs -j 1  median cpu s")
    failures = []
    for jobs, times in walls.items():
        median = statistics.median(wall for wall, _ in times)
        cpu = statistics.median(cpu for _, cpu in times)
        print(f"{jobs:>3}  {max(1, cores() // jobs):>14}  {median:13.2f}  {median / base:6.2f}x"
              f"  {cpu:12.2f}")
        if median > base * (1 + tolerance):
            failures.append(f"-j {jobs} took {median:.2f}s, more than -j 1's {base:.2f}s "
                            f"+ {tolerance:.0%}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="timed runs per -j value (default 1)")
    parser.add_argument("--jobs", type=parse_jobs, default=[1, 2, 4],
                        help="comma-separated -j values (default 1,2,4; 1 is always included)")
    parser.add_argument("--epochs", type=int, default=20,
                        help="training epochs per manifest (default 20)")
    parser.add_argument("--tolerance", type=float, default=0.10,
                        help="fail if -j N is slower than -j 1 by more than this fraction "
                             "(default 0.10)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.epochs < 1 or args.tolerance < 0:
        parser.error("--runs and --epochs must be at least 1, --tolerance not negative")

    env = {key: value for key, value in os.environ.items() if key != "EDGEBUILD_CACHE"}
    inherited = {k: v for k, v in env.items() if k.endswith("_NUM_THREADS")}
    print(f"{cores()} cores, {len(MANIFESTS)} manifests x {args.epochs} epochs, "
          f"--until {UNTIL}, {args.runs} run(s) per -j"
          + (f", inherited {inherited}" if inherited else ""))
    with tempfile.TemporaryDirectory(prefix="edgebuild-jobs-") as tmp:
        project = Path(tmp) / "project"
        make_project(project, args.epochs)
        walls, failures, busiest = measure(project, Path(tmp), args.jobs, args.runs, env)
    failures += summary(walls, args.tolerance)
    if busiest > BUSY:
        print(f"warning: the machine was busy (1-minute load average up to {busiest:.2f} "
              "before a run): other processes took cores from every build, so wall times "
              "favour whichever build needs the least CPU; compare the cpu column too",
              file=sys.stderr)
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
