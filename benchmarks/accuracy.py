"""Accuracy, measured by edgebuild itself: of the examples, and on datasets no example uses.

    python benchmarks/accuracy.py [--keep DIR]            the examples (issue 3)
    python benchmarks/accuracy.py --datasets [NAME ...]   other datasets (issue 29)

The examples: builds, in a temporary project, the example manifests as they are, plus a
digits variant with 4-bit weights on the middle layers. Prints each report.json's
accuracies and checks: digits float >= 0.97; int8 within 1 point of float (digits,
vowels); 4-bit middle layers within 2 points; int_vs_fakequant_mismatches == 0.

The datasets (benchmarks/baselines.py: three UCR sets, the two the examples use, and
Fashion-MNIST): per dataset the 1-NN Euclidean baseline, then float and int8 accuracy of
the manifest guide's model recipe built with every training setting unset (default) and
with its small-data advice written out (tuned; docs/guide/manifest.md, "Small datasets").
Checks for the default: int8 >= 1-NN and within 2 points of float. Exit status 1 on a miss.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FOUR_BIT = "qat: {epochs: 5, weight_bits: 8, overrides: {conv2: {weight_bits: 4}, conv3: {weight_bits: 4}}}\n"


def build(project: Path) -> None:
    result = subprocess.run(["edgebuild", "build"], cwd=project, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-3000:]}")


def metrics(project: Path, name: str) -> dict:
    return json.loads((project / "build" / name / "report.json").read_text())["metrics"]


def datasets(names: list[str], keep: str | None) -> int:
    """Issue 29's table: 1-NN, default and tuned float / int8 per dataset."""
    sys.path.insert(0, str(Path(__file__).parent))
    from baselines import DATASETS, one_nn

    project = Path(keep or tempfile.mkdtemp(prefix="edgebuild-datasets-"))
    misses = []
    print(f"{'dataset':<13} {'1-NN':>6} {'default float':>13} {'int8':>6} "
          f"{'tuned float':>11} {'int8':>6}", flush=True)
    for name in names or list(DATASETS):
        dataset = DATASETS[name]
        found = {}
        for tuned in (False, True):
            where = project / f"{name}{'_tuned' if tuned else ''}"
            where.mkdir(parents=True, exist_ok=True)
            (where / "edgebuild.yaml").write_text(dataset.manifest(tuned))
            found[tuned] = accuracies(where, f"{name}{'_tuned' if tuned else ''}")
        baseline = one_nn(name)
        (df, di), (tf, ti) = found[False], found[True]
        print(f"{name:<13} {baseline:>6.3f} {df:>13.3f} {di:>6.3f} {tf:>11.3f} {ti:>6.3f}",
              flush=True)
        if di < baseline or di < df - 0.02:
            misses.append(f"{name}: default int8 {di:.3f} (float {df:.3f}, 1-NN {baseline:.3f})")
    for miss in misses:
        print("MISS", miss)
    if not keep:
        shutil.rmtree(project, ignore_errors=True)
    return 1 if misses else 0


def accuracies(project: Path, name: str) -> tuple[float, float]:
    """(float, int8) test accuracy of the manifest in `project`, built through evaluate."""
    result = subprocess.run(["edgebuild", "build", "--until", "evaluate"], cwd=project,
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{name}: build failed:\n{result.stderr[-3000:]}")
    build = project / "build" / name
    floating = json.loads((build / "train" / "metrics.json").read_text())["test_accuracy"]
    return floating, json.loads((build / "evaluate" / "evaluation.json").read_text())[
        "int_accuracy"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build in this directory and keep it")
    parser.add_argument("--datasets", nargs="*", metavar="NAME",
                        help="the datasets mode (all datasets, or these)")
    args = parser.parse_args()
    if args.datasets is not None:
        return datasets(args.datasets, args.keep)
    project = Path(args.keep or tempfile.mkdtemp(prefix="edgebuild-acc-"))
    shutil.copytree(REPO / "manifests", project / "manifests", dirs_exist_ok=True)
    digits = (project / "manifests" / "digits.yaml").read_text()
    variant = digits.replace("name: digits", "name: digits4") + FOUR_BIT
    (project / "manifests" / "digits4.yaml").write_text(variant)
    build(project)
    rows = {name: metrics(project, name)
            for name in ("digits", "digits4", "vowels/cortex-m4", "digits_conv")}
    failures = []
    print(f"{'manifest':<16} {'float':>7} {'qat':>7} {'int':>7} {'drop(pts)':>9} {'mismatch':>8}")
    for name, m in rows.items():
        drop = 100 * (m["float_accuracy"] - m["int_accuracy"])
        qat = "-" if m["qat_accuracy"] is None else f"{m['qat_accuracy']:.4f}"
        print(f"{name:<16} {m['float_accuracy']:>7.4f} {qat:>7} {m['int_accuracy']:>7.4f} "
              f"{drop:>9.2f} {m['int_vs_fakequant_mismatches']:>8}")
        limit = 2.0 if name == "digits4" else 1.0
        if drop > limit:
            failures.append(f"{name}: int accuracy {drop:.2f} points below float (limit {limit})")
        if m["int_vs_fakequant_mismatches"]:
            failures.append(f"{name}: {m['int_vs_fakequant_mismatches']} mismatches")
    if rows["digits"]["float_accuracy"] < 0.97:
        failures.append("digits: float accuracy below 0.97")
    for failure in failures:
        print("MISS", failure)
    if not args.keep:
        shutil.rmtree(project, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
