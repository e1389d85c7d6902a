"""Benchmark: how long a no-op `edgebuild` and `edgebuild check` take, as subprocesses.

Copies the repository's manifests/ into a temporary project, builds it once, then times
N runs of each command (wall clock around subprocess.run). Also checks, in a fresh
interpreter, that the no-op entry point never imports torch.

    python benchmarks/noop.py [--runs N] [--limit SECONDS]

Exit status 1 if the median no-op build exceeds the limit (default 0.5 s), a command
fails, or torch was imported. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

REPO = Path(__file__).resolve().parent.parent

TORCH_PROBE = """\
import sys
import edgebuild.cli
try:
    edgebuild.cli.main([])
except SystemExit as exc:
    if exc.code not in (0, None):
        raise
print("torch" in sys.modules)
"""


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def run(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=3600)


def did_work(stderr: str) -> list[str]:
    """Stage lines of a build that are not "up to date" (a no-op should have none)."""
    return [line.strip() for line in stderr.splitlines()
            if (" built " in line or " restored " in line) and "up to date" not in line]


def measure(label: str, args: list[str], cwd: Path, env: dict, runs: int) -> list[float]:
    times = []
    for number in range(runs):
        start = time.perf_counter()
        result = run(args, cwd, env)
        times.append(time.perf_counter() - start)
        if result.returncode != 0:
            sys.exit(f"{label}: `{' '.join(args)}` exited {result.returncode}\n{result.stderr}")
        work = did_work(result.stderr)
        if work:
            print(f"  warning: {label} run {number + 1} ({times[-1]:.3f}s) was not a no-op: "
                  + "; ".join(work), file=sys.stderr)
    print(f"{label:<16} runs={runs}  median={statistics.median(times):.3f}s  "
          f"min={min(times):.3f}s  max={max(times):.3f}s")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs per command (default 10)")
    parser.add_argument("--limit", type=float, default=0.5,
                        help="fail if the median no-op build takes longer (seconds, default 0.5)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="edgebuild-bench-") as tmp:
        project = Path(tmp)
        shutil.copytree(REPO / "manifests", project / "manifests")
        env = {**os.environ, "EDGEBUILD_CACHE": str(project / "cache")}
        command = edgebuild_cmd()

        start = time.perf_counter()
        first = run(command, project, env)
        print(f"initial build    {time.perf_counter() - start:.3f}s (exit {first.returncode})")
        if first.returncode != 0:
            print(first.stderr, file=sys.stderr)
            return 1

        noop = measure("no-op build", command, project, env, args.runs)
        measure("check", command + ["check"], project, env, args.runs)

        probe = run([sys.executable, "-c", TORCH_PROBE], project, env)
        lines = probe.stdout.strip().splitlines()
        if probe.returncode != 0 or not lines or lines[-1] not in ("True", "False"):
            print(f"torch probe failed (exit {probe.returncode})\n{probe.stderr}", file=sys.stderr)
            return 1
        torch_imported = lines[-1] == "True"
        print(f"torch imported by a no-op edgebuild.cli.main([]): {torch_imported}")

    median = statistics.median(noop)
    failures = []
    if median > args.limit:
        failures.append(f"median no-op build {median:.3f}s exceeds {args.limit}s")
    if torch_imported:
        failures.append("a no-op build imported torch")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
