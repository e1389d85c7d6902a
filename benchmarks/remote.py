"""Benchmark: restoring the examples from a shared remote cache vs computing them.

In a temporary project (a copy of manifests/; data paths are relative to the manifest):
(a) a cold `edgebuild build --json -j 2 --remote REMOTE --cache-dir CACHE` of every
example, which builds every stage and pushes it to the remote; then build/ and the local
cache are deleted — a fresh clone on another machine — and (b) the same command again,
which should restore every stage from the remote ("restored-remote", tally 0 built).
Wall clock is timed around each subprocess (interpreter start and imports included);
per manifest, the `seconds` --json reports for its stages are summed. The C projects
(every file under build/<name>/codegen/) of (a) and (b) must be byte-identical.

    python benchmarks/remote.py [--remote URL] [--manifests digits,vowels] [--jobs 2]

REMOTE is a temporary directory unless --remote names another one (e.g. s3://bucket/prefix,
fsspec configured by its own environment variables and files). A remote that already holds
these stages makes (a) a restore too; the tally line says so. The builds run without
EDGEBUILD_* settings and with PYTHONDONTWRITEBYTECODE empty.

Prints per manifest the stage count, the summed stage seconds of (a) and (b), the speed-up
and whether the C project is identical, then the totals, the wall clock of both builds and
a one-line summary. Exit status 1 if a build fails, (b) built any stage, or a C project
differs. Standard library only.

Seen on 2026-11-26 on this 2-core machine ("AMD EPYC", AVX2), torch 2.13.0+cpu, Python
3.11.7, edgebuild 5196d00, a directory remote, -j 2 (1-minute load average 0.4 before):

    manifest           stages (a) built s (b) remote s speed-up  codegen/
    digits                 10       14.04         0.20    70.2x  identical (15 files)
    digits_conv            10       25.55         0.18   144.4x  identical (15 files)
    digits_max78000        10        5.91         0.16    37.1x  identical (13 files)
    kws_dscnn              10       35.02         0.17   206.0x  identical (17 files)
    mnist_extrasmall        7        2.96         0.13    23.5x  identical (13 files)
    motions_ondevice       12       11.71         0.19    60.4x  identical (17 files)
    motions_stream         10        7.48         0.12    61.3x  identical (15 files)
    vowels                 10        7.55         0.12    62.9x  identical (15 files)
    vowels_residual        12       13.15         0.19    67.4x  identical (15 files)
    vowels_small_l1        10        4.86         0.10    47.1x  identical (17 files)
    total                 101      128.23         1.57    81.9x
    wall clock                      74.98         9.69     7.7x
    tally (a) {'built': 90, 'restored-local': 11}
    tally (b) {'restored-local': 11, 'restored-remote': 90}
    remote: 409 files, 5.6 MiB

The 11 restored-local stages in both runs are stages whose key another manifest of the same
run had already produced (e.g. the shared digits data). Restoring is ~80x cheaper in stage
seconds, but (b)'s wall clock is mostly the fixed cost of a build run (interpreter, imports,
scheduler, remote probe): 9.7 s wall for 1.6 s of stage work.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

REPO = Path(__file__).resolve().parent.parent


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def base_env() -> dict[str, str]:
    """No edgebuild settings from the caller (the remote is given by --remote); bytecode
    written (the sandbox's PYTHONDONTWRITEBYTECODE=1 slows every start)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEBUILD_")}
    env["PYTHONDONTWRITEBYTECODE"] = ""
    return env


def build(project: Path, paths: list[str], cache: Path, remote: str, jobs: int,
          label: str, env: dict[str, str]) -> tuple[float, dict]:
    """One build: (wall seconds, the --json object)."""
    args = edgebuild_cmd() + ["build", *paths, "-j", str(jobs), "--json",
                              "--cache-dir", str(cache), "--remote", remote]
    start = time.perf_counter()
    result = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=3 * 3600)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"({label}) `{' '.join(args)}` exited {result.returncode}\n"
                 f"{result.stderr[-3000:]}")
    try:
        answer = json.loads(result.stdout)
        missing = [field for field in ("stages", "tally") if field not in answer]
        if missing:
            raise KeyError(", ".join(missing))
    except (ValueError, KeyError) as exc:
        sys.exit(f"({label}) cannot read the --json output ({exc}):\n{result.stdout[-3000:]}")
    warnings = [line for line in result.stderr.splitlines() if "remote" in line.lower()]
    for line in warnings[:5]:
        print(f"  ({label}) {line}", file=sys.stderr)
    print(f"  ({label}) {wall:.1f}s wall, tally {answer['tally']}", file=sys.stderr, flush=True)
    return wall, answer


def per_manifest(answer: dict) -> dict[str, tuple[int, float]]:
    """{manifest: (stage count, summed stage seconds)} in graph order."""
    sums: dict[str, tuple[int, float]] = {}
    for item in answer["stages"]:
        count, seconds = sums.get(item["manifest"], (0, 0.0))
        sums[item["manifest"]] = (count + 1, seconds + float(item.get("seconds") or 0.0))
    return sums


def tree_digests(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `folder` (empty if it is absent)."""
    if not folder.is_dir():
        return {}
    return {path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def codegen_trees(project: Path, names: list[str]) -> dict[str, dict[str, str]]:
    return {name: tree_digests(project / "build" / name / "codegen") for name in names}


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(name for name in before.keys() | after.keys()
                  if before.get(name) != after.get(name))


def remote_size(remote: str) -> str:
    """Files and bytes of a directory remote ("" for a URL)."""
    folder = Path(remote)
    if "://" in remote or not folder.is_dir():
        return ""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return f"{len(files)} files, {sum(p.stat().st_size for p in files) / 2**20:.1f} MiB"


def report(cold: dict, warm: dict, walls: tuple[float, float],
           trees: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]) -> list[str]:
    """The table and the totals; returns the failed checks."""
    a, b = per_manifest(cold), per_manifest(warm)
    failures = []
    print(f"\n{'manifest':<18} {'stages':>6} {'(a) built s':>11} {'(b) remote s':>12} "
          f"{'speed-up':>8}  codegen/")
    total_a = total_b = 0.0
    for name, (count, seconds) in a.items():
        restored = b.get(name, (0, 0.0))[1]
        total_a, total_b = total_a + seconds, total_b + restored
        changed = differences(trees[0].get(name, {}), trees[1].get(name, {}))
        files = len(trees[0].get(name, {}))
        same = "absent" if not files else f"DIFFERENT: {', '.join(changed[:3])}" if changed \
            else f"identical ({files} files)"
        if changed:
            failures.append(f"{name}: codegen/ differs after the restore: {', '.join(changed)}")
        print(f"{name:<18} {count:6d} {seconds:11.2f} {restored:12.2f} "
              f"{seconds / max(restored, 1e-9):7.1f}x  {same}")
    print(f"{'total':<18} {sum(c for c, _ in a.values()):6d} {total_a:11.2f} {total_b:12.2f} "
          f"{total_a / max(total_b, 1e-9):7.1f}x")
    print(f"{'wall clock':<18} {'':6} {walls[0]:11.2f} {walls[1]:12.2f} "
          f"{walls[0] / walls[1]:7.1f}x")
    print(f"\ntally (a) {cold['tally']}\ntally (b) {warm['tally']}")
    if warm["tally"].get("built", 0):
        built = [f"{i['manifest']}.{i['stage']}" for i in warm["stages"]
                 if i.get("outcome") == "built"]
        failures.append(f"(b) built {len(built)} stages instead of restoring them: "
                        f"{', '.join(built)}")
    if cold["tally"].get("restored-remote", 0):
        print("note: (a) restored stages from the remote, which was not empty: it was not "
              "a cold build")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="remote cache URL or directory (default: a "
                                         "temporary directory)")
    parser.add_argument("--manifests", help="comma-separated manifest names (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="-j of both builds (default 2)")
    args = parser.parse_args(argv)
    available = sorted(p.stem for p in (REPO / "manifests").glob("*.yaml"))
    wanted = args.manifests.split(",") if args.manifests else []
    unknown = [m for m in wanted if m not in available]
    if unknown:
        parser.error(f"no manifests/{unknown[0]}.yaml (available: {', '.join(available)})")
    paths = [f"manifests/{m}.yaml" for m in wanted]

    env = base_env()
    with tempfile.TemporaryDirectory(prefix="edgebuild-remote-") as tmp:
        project, cache = Path(tmp) / "project", Path(tmp) / "cache"
        remote = args.remote or str(Path(tmp) / "remote")
        if not args.remote:
            Path(remote).mkdir()  # edgebuild does not create a directory remote
        shutil.copytree(REPO / "manifests", project / "manifests")
        print(f"{len(os.sched_getaffinity(0))} cores, -j {args.jobs}, "
              f"{len(wanted) or len(available)} manifests, remote "
              f"{'a temporary directory' if not args.remote else remote}")
        wall_a, cold = build(project, paths, cache, remote, args.jobs, "a", env)
        names = list(per_manifest(cold))
        if remote_size(remote).startswith("0 files"):
            sys.exit(f"(a) pushed nothing to {remote} (see edgebuild's message above)")
        before = codegen_trees(project, names)
        shutil.rmtree(project / "build")
        shutil.rmtree(cache)
        wall_b, warm = build(project, paths, cache, remote, args.jobs, "b", env)
        after = codegen_trees(project, names)
        size = remote_size(remote)
    failures = report(cold, warm, (wall_a, wall_b), (before, after))
    total_a = sum(s for _, s in per_manifest(cold).values())
    total_b = sum(s for _, s in per_manifest(warm).values())
    identical = sum(1 for n in names if before[n] and before[n] == after[n])
    print(f"summary: restoring {len(cold['stages'])} stages from the remote took "
          f"{wall_b:.1f}s wall ({total_b:.1f}s of stages) vs {wall_a:.1f}s wall "
          f"({total_a:.1f}s of stages) to build them: {wall_a / wall_b:.1f}x faster; "
          f"{warm['tally'].get('built', 0)} built in (b); {identical}/{len(names)} C projects "
          "byte-identical" + (f"; remote {size}" if size else ""))
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
