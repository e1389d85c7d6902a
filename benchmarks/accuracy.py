"""Accuracy targets of the examples (issue 3), measured by edgebuild itself.

Builds, in a temporary project: the example manifests as they are, plus a digits variant
with 4-bit weights on the middle layers. Prints each report.json's accuracies and checks:
digits float >= 0.97; int8 within 1 point of float (digits, vowels); 4-bit middle layers
within 2 points; int_vs_fakequant_mismatches == 0 everywhere. Exit status 1 on a miss.

    python benchmarks/accuracy.py [--keep DIR]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build in this directory and keep it")
    args = parser.parse_args()
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
