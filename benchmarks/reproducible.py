"""Benchmark: what bit-reproducible training costs against fast mode (`train.reproducible:
false`) on the example manifests, and whether the parent's ATEN_CPU_CAPABILITY leaks in.

For every manifests/*.yaml with a `train:` section (imported models such as
mnist_extrasmall have none and are skipped), builds `edgebuild build MANIFEST --until qat
-j 1 --json` from a cold cache twice, each in a fresh temporary copy of manifests/ (data
paths are relative to the manifest) with its own --cache-dir: once as it is (reproducible,
the default: torch pinned to the x86-64 baseline kernels) and once with `reproducible:
false` inserted into its `train:` mapping (torch's native kernels). The time compared is
the `seconds` --json reports for the train and qat stages (summed), not the wall clock,
which also holds interpreter start and torch import. Each manifest is built alone, because
edgebuild pins a whole run as soon as one of its manifests is reproducible. --repeat N
builds each variant N times (interleaved) and keeps the minimum. The subprocesses run
without EDGEBUILD_* settings (no remote, no scheduler) and without the parent's
ATEN_CPU_CAPABILITY, MKL_CBWR and ONEDNN_MAX_CPU_ISA (which would pin fast mode too).

Then the check: the reproducible build of digits twice more, cold, once with
ATEN_CPU_CAPABILITY=avx2 and once with ATEN_CPU_CAPABILITY=default in the *parent*
environment. edgebuild pins its own processes, so the train (and qat) digests must be the
same; "DIFFERENT" fails the benchmark.

    python benchmarks/reproducible.py [--manifests digits,vowels] [--repeat N]

Prints per manifest the train+qat seconds of both modes, their ratio (reproducible / fast)
and whether the two modes' train digests are equal, then the totals and the check.
Exit status 1 if a build fails, a stage is not built from the cold cache, the reproducible
train digest changes between repeats, or the check says DIFFERENT. Needs PyYAML (an
edgebuild dependency) besides the standard library.

Seen on 2026-11-26 on this 2-core machine ("AMD EPYC", AVX2), torch 2.13.0+cpu, Python
3.11.7, edgebuild 5196d00, --repeat 1, in 4.5 minutes. The machine was not idle (1-minute
load average 1.9-3.7 before the manifests, about 1-2 of it from other work), so single
figures are noisy: an earlier digits-only run gave 10.91 s vs 9.17 s (1.19x); use --repeat
on an idle machine for firmer ones.

    manifest           reproducible s   fast s repro/fast  train digests
    digits                      15.52     9.50      1.63x  differ
    digits_conv                 21.58    10.25      2.10x  differ
    digits_max78000             13.91    11.09      1.25x  differ
    kws_dscnn                   31.36    19.36      1.62x  differ
    motions_ondevice             6.26     5.74      1.09x  differ
    motions_stream               5.89     6.53      0.90x  differ
    vowels                       7.11     7.46      0.95x  differ
    vowels_residual              8.02     5.95      1.35x  differ
    vowels_small_l1              6.56     7.30      0.90x  differ
    total                      116.19    83.19      1.40x
    parent ATEN_CPU_CAPABILITY=avx2 vs =default, digits reproducible: train digest same,
    qat digest same

The 2-D CNNs (digits*, kws_dscnn) pay 1.25-2.1x; the small 1-D models (motions*, vowels*)
train in 5-8 s either way, and three of them were slightly *faster* reproducible (0.90-0.95x,
within this run's noise). Fast mode's train digests differ from the reproducible ones on
every manifest (AVX2 kernels round differently), as docs/internals/cache.md
("Reproducible builds") says.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from verdict import verdict  # benchmarks/verdict.py (run as python benchmarks/X.py)

REPO = Path(__file__).resolve().parent.parent
UNTIL = "qat"
TIMED = ("train", "qat")
CHECKED = "digits"  # the small manifest the ATEN_CPU_CAPABILITY check builds
PINS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")  # edgebuild/build/kernels.py


def edgebuild_cmd() -> list[str]:
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def base_env() -> dict[str, str]:
    """The environment of every timed build: no edgebuild settings, no kernel pins, and
    bytecode written (the sandbox's PYTHONDONTWRITEBYTECODE=1 slows every start)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EDGEBUILD_") and k not in PINS}
    env["PYTHONDONTWRITEBYTECODE"] = ""
    return env


def load() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def fast_text(text: str) -> str:
    """The manifest with `reproducible: false` in its `train:` mapping. A text edit keeps
    everything else as written (PyYAML would turn `0x0000000000000001` into 1); the result
    is checked against a YAML round trip, which is the fallback."""
    original = yaml.safe_load(text)
    wanted = {**original, "train": {**original["train"], "reproducible": False}}
    edited = None
    flow = re.search(r"(?m)^train:[ \t]*\{", text)
    block = re.search(r"(?m)^train:[ \t]*(#.*)?\n((?:[ \t]*(?:#.*)?\n)*)([ \t]+)\S", text)
    if "reproducible" in original["train"]:
        pass
    elif flow:
        edited = text[:flow.end()] + "reproducible: false, " + text[flow.end():]
    elif block:
        line_end = text.index("\n", block.start()) + 1
        edited = text[:line_end] + f"{block.group(3)}reproducible: false\n" + text[line_end:]
    if edited is not None and yaml.safe_load(edited) == wanted:
        return edited
    return yaml.safe_dump(wanted, sort_keys=False)


def trained(path: Path) -> bool:
    """Whether the manifest has a `train:` section (an imported model has none)."""
    data = yaml.safe_load(path.read_text())
    return isinstance(data, dict) and isinstance(data.get("train"), dict)


def build(root: Path, stem: str, fast: bool, env: dict[str, str]) -> dict[str, dict]:
    """A cold `--until qat` build of one manifest in a fresh copy of manifests/:
    {stage: its --json entry}."""
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "manifests", root / "manifests")
    manifest = root / "manifests" / f"{stem}.yaml"
    if fast:
        manifest.write_text(fast_text(manifest.read_text()))
    args = edgebuild_cmd() + ["build", str(manifest.relative_to(root)), "--until", UNTIL,
                              "-j", "1", "--json", "--cache-dir", str(root / "cache")]
    result = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=3600)
    mode = "fast" if fast else "reproducible"
    if result.returncode != 0:
        sys.exit(f"{stem} ({mode}): `{' '.join(args)}` exited {result.returncode}\n"
                 f"{result.stderr[-3000:]}")
    try:
        stages = json.loads(result.stdout)["stages"]
    except (ValueError, KeyError) as exc:
        sys.exit(f"{stem} ({mode}): cannot read the --json output ({exc}):\n{result.stdout}")
    return {item["stage"]: item for item in stages}


def timed(stages: dict[str, dict]) -> float:
    return sum(stages[s]["seconds"] for s in TIMED if s in stages)


def not_built(stem: str, mode: str, stages: dict[str, dict]) -> list[str]:
    return [f"{stem} ({mode}): {s} was {stages[s]['outcome']}, not built from a cold cache"
            for s in TIMED if s in stages and stages[s]["outcome"] != "built"]


def measure(stems: list[str], repeat: int, tmp: Path,
            env: dict[str, str]) -> tuple[dict[str, dict], list[str]]:
    """Per manifest: the minimum train+qat seconds of each mode and their train digests."""
    results: dict[str, dict] = {}
    failures: list[str] = []
    for number in range(1, repeat + 1):
        for stem in stems:
            before = load()
            for fast in (False, True):
                mode = "fast" if fast else "reproducible"
                stages = build(tmp / "project", stem, fast, env)
                if "train" not in stages:
                    print(f"  {stem}: no train stage, skipped", file=sys.stderr)
                    results.pop(stem, None)
                    break
                failures += not_built(stem, mode, stages)
                entry = results.setdefault(stem, {}).setdefault(
                    mode, {"seconds": float("inf"), "digests": set()})
                entry["seconds"] = min(entry["seconds"], timed(stages))
                entry["digests"].add(stages["train"]["digest"])
                print(f"  run {number} {stem:<18} {mode:<12} load {before:4.2f}  "
                      + "  ".join(f"{s} {stages[s]['seconds']:6.2f}s" for s in TIMED
                                  if s in stages), file=sys.stderr, flush=True)
    for stem, modes in results.items():
        if len(modes["reproducible"]["digests"]) > 1:
            failures.append(f"{stem}: the reproducible train digest changed between repeats")
    return results, failures


def table(results: dict[str, dict]) -> tuple[float, float]:
    """The per-manifest table; returns the total seconds (reproducible, fast)."""
    print(f"\n{'manifest':<18} {'reproducible s':>14} {'fast s':>8} {'repro/fast':>10}  "
          "train digests")
    total_r = total_f = 0.0
    for stem, modes in results.items():
        rep, fast = modes["reproducible"]["seconds"], modes["fast"]["seconds"]
        total_r, total_f = total_r + rep, total_f + fast
        same = modes["reproducible"]["digests"] == modes["fast"]["digests"]
        print(f"{stem:<18} {rep:14.2f} {fast:8.2f} {rep / fast:9.2f}x  "
              f"{'same' if same else 'differ'}")
    if results:
        print(f"{'total':<18} {total_r:14.2f} {total_f:8.2f} {total_r / total_f:9.2f}x")
    return total_r, total_f


def parent_check(tmp: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """Build CHECKED (reproducible) under two parent ATEN_CPU_CAPABILITY values."""
    digests = {}
    for value in ("avx2", "default"):
        stages = build(tmp / "check", CHECKED, False, {**env, "ATEN_CPU_CAPABILITY": value})
        digests[value] = {s: stages[s]["digest"] for s in TIMED if s in stages}
        print(f"  {CHECKED} reproducible, parent ATEN_CPU_CAPABILITY={value}: "
              + "  ".join(f"{s} {d[:12]}" for s, d in digests[value].items()), file=sys.stderr)
    verdicts = {s: "same" if digests["avx2"][s] == digests["default"][s] else "DIFFERENT"
                for s in digests["avx2"]}
    line = ", ".join(f"{s} digest {v}" for s, v in verdicts.items())
    failures = [f"{CHECKED}: {s} digest depends on the parent's ATEN_CPU_CAPABILITY"
                for s, v in verdicts.items() if v != "same"]
    return line, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", help="comma-separated manifest names (default: all "
                                            "with a train stage)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="builds per mode and manifest, minimum kept (default 1)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    available = sorted(p.stem for p in (REPO / "manifests").glob("*.yaml"))
    wanted = args.manifests.split(",") if args.manifests else available
    unknown = [m for m in wanted if m not in available]
    if unknown:
        parser.error(f"no manifests/{unknown[0]}.yaml (available: {', '.join(available)})")
    stems = [m for m in wanted if trained(REPO / "manifests" / f"{m}.yaml")]
    skipped = [m for m in wanted if m not in stems]

    env = base_env()
    threads = {k: v for k, v in env.items() if k.endswith("_NUM_THREADS")}
    print(f"{len(os.sched_getaffinity(0))} cores, --until {UNTIL} -j 1, cold cache, "
          f"{args.repeat} run(s) per mode, seconds = train + qat from --json"
          + (f", inherited {threads}" if threads else "")
          + (f"; skipped (no train stage): {', '.join(skipped)}" if skipped else ""))
    with tempfile.TemporaryDirectory(prefix="edgebuild-repro-") as tmp:
        results, failures = measure(stems, args.repeat, Path(tmp), env)
        total_r, total_f = table(results)
        line, problems = parent_check(Path(tmp), env)
    print(f"\nparent ATEN_CPU_CAPABILITY=avx2 vs =default, {CHECKED} reproducible: {line}")
    if results:
        print(f"summary: reproducible training (train+qat) took {total_r / total_f:.2f}x "
              f"the fast mode's time over {len(results)} manifests ({total_r:.1f}s vs "
              f"{total_f:.1f}s); parent ATEN_CPU_CAPABILITY check: "
              f"{'DIFFERENT' if problems else 'same'}")
    return verdict(failures + problems)


if __name__ == "__main__":
    sys.exit(main())
