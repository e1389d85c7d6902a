"""L1 budget sweep (issue 29, item 5): a smaller L1 never costs more RAM than the untiled build.

For each model — the vowels and digits_conv examples (or others: --models), a
Fashion-MNIST-like 1x28x28 CNN and a 1x1460 conv1d series model (random .npz data unless
--fashion: RAM and instruction counts do not depend on what the model learned) — one
manifest with a Cortex-M4 target per L1 budget: `untiled` (64 KiB, where no layer of these
models tiles), 16, 8, 4, 2 and 1 KiB (a budget below the model's smallest tile is left out:
`check` refuses it). Built through the `kat` stage in a temporary project (one epoch,
post-training quantization): per budget the plan's arena (with any state), kernels'
workspace, L1 peak and total RAM (plan.json `memory`), the tiled layers, and the
Cortex-M4 instructions of one inference (kat.json; the stage also checks the C against the
integer reference on every test sample, on the host and under QEMU). Exits 1 when a C
differs from the reference, a budget's total RAM is above the untiled build's, or its
instructions are above MAX_INSTRUCTIONS x the untiled build's.

    python benchmarks/l1_sweep.py [--plan-only] [--models NAME ...] [--fashion] [--keep DIR]

--plan-only runs the planner alone (no training, no C): the RAM columns in seconds.
The cache is $EDGEBUILD_CACHE, else one inside the temporary project (never ./cache).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
KIB = 1024
BUDGETS: tuple[tuple[str, int], ...] = (("untiled", 64 * KIB), ("l1_16k", 16 * KIB),
                                        ("l1_8k", 8 * KIB), ("l1_4k", 4 * KIB),
                                        ("l1_2k", 2 * KIB), ("l1_1k", KIB))
MAX_INSTRUCTIONS = 1.10  # x the untiled build's: the tiled path's bound (issue 29)
FASHION = Path("/usr/share/datasets/fashion-mnist")

FASHION_LAYERS = [
    {"name": "conv1", "op": "conv2d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
    {"name": "conv2", "op": "conv2d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2}},
    {"name": "conv3", "op": "conv2d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2}},
    {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]
SERIES_LAYERS = [
    {"name": "conv1", "op": "conv1d", "out": 16, "kernel": 7, "pad": 3, "act": "relu"},
    {"name": "conv2", "op": "conv1d", "out": 32, "kernel": 5, "pad": 2, "act": "relu",
     "pool": {"mode": "max", "size": 4}},
    {"name": "conv3", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 4}},
    {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]
MODELS = ("vowels", "digits_conv", "fashion", "series")


@dataclass(frozen=True)
class Row:
    """One budget's figures."""

    model: str
    budget: str
    arena: int
    workspace: int
    l1: int
    ram: int
    tiled: tuple[str, ...]
    instructions: int | None = None
    exact: bool | None = None  # the C against the integer reference: host and Cortex-M4


def _random_npz(path: Path, shape: tuple[int, ...], samples: int) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(path, x=rng.standard_normal((samples, *shape)).astype(np.float32),
             y=np.arange(samples) % 10)


def _custom(name: str, root: Path, fashion: bool) -> dict[str, Any]:
    """The Fashion-MNIST-like CNN or the series model, its data written under `root`."""
    if name == "fashion" and fashion:
        dataset: dict[str, Any] = {
            "format": "idx", "limit": {"train": 2000, "test": 200},
            **{key: str(FASHION / f"{part}-{kind}-idx{dims}-ubyte.gz") for key, part, kind, dims
               in (("train_images", "train", "images", 3), ("train_labels", "train", "labels", 1),
                   ("test_images", "t10k", "images", 3), ("test_labels", "t10k", "labels", 1))}}
    else:
        shape = (1, 28, 28) if name == "fashion" else (1, 1460)
        _random_npz(root / f"{name}.npz", shape, 200)
        dataset = {"format": "npz", "path": f"{name}.npz"}
    return {"name": name, "seed": 1, "dataset": dataset,
            "model": {"input": [1, 28, 28] if name == "fashion" else [1, 1460],
                      "layers": FASHION_LAYERS if name == "fashion" else SERIES_LAYERS}}


def manifest(name: str, root: Path, fashion: bool, budgets: list[tuple[str, int]]) -> Path:
    """The model's manifest under `root` with a target per budget, trained briefly."""
    if name in ("fashion", "series"):
        data = _custom(name, root, fashion)
    else:
        data = yaml.safe_load((REPO / "manifests" / f"{name}.yaml").read_text())
    data.update(train={"epochs": 1, "batch": 32}, qat={"enabled": False})
    data["target"] = [{"name": label, "device": "cortex-m4",
                       "memory": {"l1": l1, "l2": "1MiB", "flash": "1MiB"}}
                      for label, l1 in budgets]
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def plan_rows(path: Path) -> list[Row]:
    """Every target's plan, by the planner alone (what the `plan` stage computes)."""
    from edgebuild.memory import budget
    from edgebuild.model import folding
    from edgebuild.pipeline import validation

    rows = []
    for checked in validation.load_all(path):
        m = checked.manifest
        layers, _ = folding.fold_layers(m.model.layers)
        plan = budget.planned(m, layers, optimized=True)
        assert plan.memory is not None
        rows.append(_row(path.stem, str(checked.target), plan.memory.to_json()))
    return rows


def _row(model: str, label: str, memory: dict[str, Any], instructions: int | None = None,
         exact: bool | None = None) -> Row:
    return Row(model, label, memory["arena_bytes"] + memory["state_bytes"],
               memory["workspace_bytes"], memory["l1_peak"], memory["ram_bytes"],
               tuple(memory["tiled_layers"]), instructions, exact)


def feasible(name: str, root: Path, fashion: bool) -> list[tuple[str, int]]:
    """The budgets at or above the model's smallest L1 (what `check` asks of `l1`)."""
    from edgebuild.memory import budget
    from edgebuild.model import folding
    from edgebuild.pipeline import validation

    checked = validation.load_all(manifest(name, root, fashion, [BUDGETS[0]]))[0]
    layers, _ = folding.fold_layers(checked.manifest.model.layers)
    need = max((p.bytes for p in budget.l1_passes(
        checked.manifest.model.input, layers, checked.manifest.target.tiling.double_buffer,
        True)), default=0)
    return [(label, l1) for label, l1 in BUDGETS if l1 >= need]


def build_rows(paths: list[Path], root: Path) -> list[Row]:
    """`edgebuild build --until kat` of the manifests; each target's plan and count."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "EDGEBUILD_CACHE": os.environ.get("EDGEBUILD_CACHE", str(root / "cache"))}
    result = subprocess.run([sys.executable, "-m", "edgebuild", "build", "--until", "kat",
                             *[p.name for p in paths]], cwd=root, env=env,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"building the sweep failed (exit {result.returncode})")
    rows = []
    for path in paths:
        for label, _ in BUDGETS:
            target = root / "build" / path.stem / label
            if not (target / "plan" / "plan.json").exists():
                continue
            memory = json.loads((target / "plan" / "plan.json").read_text())["memory"]
            kat = json.loads((target / "kat" / "kat.json").read_text())
            m4 = kat.get("cortex_m4") or {}
            rows.append(_row(path.stem, label, memory, m4.get("instructions"),
                             kat["c_vs_reference"]["mismatches"] == 0 and m4.get("kat") == "pass"))
    return rows


def check(rows: list[Row]) -> list[str]:
    """Each budget against its model's untiled build: RAM never above, instructions
    within MAX_INSTRUCTIONS; and its C bit-exact (built: the known-answer test)."""
    untiled = {row.model: row for row in rows if row.budget == "untiled"}
    problems = []
    for row in rows:
        base = untiled[row.model]
        if row.exact is False:
            problems.append(f"{row.model} at {row.budget}: the C differs from the reference")
        if row.ram > base.ram:
            problems.append(f"{row.model} at {row.budget}: RAM {row.ram} bytes > untiled "
                            f"{base.ram}")
        if row.instructions and base.instructions and \
                row.instructions > MAX_INSTRUCTIONS * base.instructions:
            problems.append(f"{row.model} at {row.budget}: {row.instructions} instructions > "
                            f"{MAX_INSTRUCTIONS} x untiled {base.instructions}")
    return problems


def table(rows: list[Row]) -> str:
    untiled = {row.model: row for row in rows if row.budget == "untiled"}
    lines = [f"{'model':<12} {'L1 budget':>9} {'arena':>7} {'workspace':>9} {'L1':>6} "
             f"{'RAM':>7} {'/untiled':>8} {'instructions':>12} {'/untiled':>8}  tiled layers"]
    for row in rows:
        base = untiled[row.model]
        count = "-" if row.instructions is None else f"{row.instructions:,}"
        ratio = "-" if not (row.instructions and base.instructions) else \
            f"{row.instructions / base.instructions:.3f}"
        lines.append(f"{row.model:<12} {row.budget:>9} {row.arena:>7} {row.workspace:>9} "
                     f"{row.l1:>6} {row.ram:>7} {row.ram / base.ram:>8.3f} {count:>12} "
                     f"{ratio:>8}  {', '.join(row.tiled) or '-'}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-only", action="store_true", help="the planner alone: no build")
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help="fashion, series or examples (manifests/NAME.yaml, e.g. kws_dscnn)")
    parser.add_argument("--fashion", action="store_true",
                        help=f"train the CNN on Fashion-MNIST ({FASHION}) instead of noise")
    parser.add_argument("--keep", type=Path, help="build here (kept) instead of a temp dir")
    args = parser.parse_args()
    unknown = [name for name in args.models if name not in ("fashion", "series") and
               not (REPO / "manifests" / f"{name}.yaml").exists()]
    if unknown:
        parser.error(f"no such model: {', '.join(unknown)}")
    with tempfile.TemporaryDirectory(prefix="l1_sweep.") as temp:
        root = args.keep.resolve() if args.keep else Path(temp)
        root.mkdir(parents=True, exist_ok=True)
        paths = [manifest(name, root, args.fashion, feasible(name, root, args.fashion))
                 for name in args.models]
        rows = [row for path in paths for row in plan_rows(path)] if args.plan_only \
            else build_rows(paths, root)
    print(table(rows))
    problems = check(rows)
    for problem in problems:
        print(f"FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
