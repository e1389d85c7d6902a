"""Flash the model code of each built example takes on the Cortex-M4 (issue 32: the
optimized kernels a model links add at most 24 KiB), from a link map of its KAT firmware.

For every generated C project under build/ (or the directories given), its sources are
compiled as `make m4` compiles them, one object each, and linked with --gc-sections and a
map (benchmarks/mlperf_tiny.codegen_code): the model's code is cnn.c and the kernel files
the project got, split into the optimized kernels (eb_*_opt.c, eb_tiling.c, eb_global_pool.c)
and the portable reference kernels they keep as fallbacks (eb_kernels.c, eb_tfl.c); the
weights and the KAT harness are apart. Prints a table with the budget.

    python benchmarks/code_size.py [CODEGEN_DIR ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mlperf_tiny  # noqa: E402  (codegen_code, map_sizes)

REPO = Path(__file__).resolve().parent.parent
BUDGET = 24 * 1024  # bytes of optimized kernels a model may link (issue 32)
REFERENCE = {"eb_kernels", "eb_tfl"}  # the portable kernels (fallbacks of the optimized)


def projects(args: list[str]) -> list[Path]:
    """The generated C projects to measure: those given, or every build/*/codegen (and
    build/*/*/codegen for a manifest of several targets)."""
    if args:
        return [Path(a) for a in args]
    found = sorted(REPO.glob("build/*/codegen")) + sorted(REPO.glob("build/*/*/codegen"))
    return [p for p in found if (p / "Makefile").is_file()]


def measure(codegen: Path, work: Path) -> dict[str, int]:
    """Bytes of cnn.c, the optimized kernels and the reference kernels in the link."""
    mlperf_tiny.codegen_code(codegen, work)
    sizes = mlperf_tiny.map_sizes((work / "firmware.map").read_text())
    stems = {Path(s).stem for s in mlperf_tiny.make_vars(codegen / "Makefile")["MODEL"].split()}
    kernels = {s: n for s, n in sizes.items() if s in stems and s.startswith("eb_")}
    optimized = sum(n for s, n in kernels.items() if s not in REFERENCE)
    reference = sum(n for s, n in kernels.items() if s in REFERENCE)
    return {"cnn": sizes.get("cnn", 0), "optimized": optimized, "reference": reference,
            "model_code": sizes.get("cnn", 0) + optimized + reference}


def name_of(codegen: Path) -> str:
    build = REPO / "build"
    try:
        return str(codegen.parent.relative_to(build))
    except ValueError:
        return str(codegen.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("codegen", nargs="*", help="generated C projects (default: build/)")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="eb-code-size-") as tmp:
        for i, codegen in enumerate(projects(args.codegen)):
            rows.append({"model": name_of(codegen), **measure(codegen, Path(tmp) / str(i))})
    print(f"{'model':22} {'cnn.c':>7} {'optimized':>10} {'reference':>10} {'model code':>11}"
          f"  (budget: optimized <= {BUDGET:,} B)")
    for r in rows:
        flag = "" if r["optimized"] <= BUDGET else "  OVER"
        print(f"{r['model']:22} {r['cnn']:7,} {r['optimized']:10,} {r['reference']:10,} "
              f"{r['model_code']:11,}{flag}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(r["optimized"] <= BUDGET for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
