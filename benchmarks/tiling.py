"""L1 tiling figures (issue 5): traffic / traffic lower bound at L1 = 4, 8, 16, 32 KiB for
every example manifest, L1 peak, tiled layers, and planning time (plan only, no training).

    python benchmarks/tiling.py [--double-buffer/--no-double-buffer]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUDGETS = (4096, 8192, 16384, 32768)


def plan_for(checked, l1: int, double_buffer: bool) -> tuple[dict | None, list, float]:
    from edgebuild.memory.plan import make_plan, tile_steps
    from edgebuild.model import folding

    start = time.perf_counter()
    manifest = checked.manifest
    layers, _ = folding.fold_layers(manifest.model.layers)
    plan = make_plan(manifest.model.input, layers, 0)
    plan, problems = tile_steps(manifest.model.input, layers, plan, l1, manifest.target.memory.l2,
                                double_buffer)
    totals = None if problems or plan.memory is None else plan.memory.to_json()
    return totals, problems, time.perf_counter() - start


def main() -> int:
    from edgebuild.pipeline import validation

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--double-buffer", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    slow = []
    print(f"{'manifest':<16} {'L1':>6} {'traffic':>9} {'bound':>9} {'ratio':>6} {'L1 peak':>8} "
          f"{'plan s':>7}  tiled layers")
    for checked in (c for path in sorted((REPO / "manifests").glob("*.yaml"))
                    for c in validation.load_all(path)):  # every target of every example
        name = checked.name
        for l1 in BUDGETS:
            totals, problems, seconds = plan_for(checked, l1, args.double_buffer)
            if seconds >= 1.0:
                slow.append((name, l1, seconds))
            if totals is None:
                print(f"{name:<16} {l1 // 1024:>4}Ki  infeasible: "
                      + "; ".join(f"{p.layer} needs {p.smallest_l1} B" for p in problems))
                continue
            ratio = totals["traffic_bytes"] / totals["traffic_lower_bound"]
            print(f"{name:<16} {l1 // 1024:>4}Ki {totals['traffic_bytes']:>9} "
                  f"{totals['traffic_lower_bound']:>9} {ratio:>6.3f} {totals['l1_peak']:>8} "
                  f"{seconds:>7.3f}  {', '.join(totals['tiled_layers']) or '-'}")
    for name, l1, seconds in slow:
        print(f"SLOW planning: {name} at L1 {l1}: {seconds:.2f} s (target < 1 s)")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
