"""Tiling never costs more RAM than running untiled (issue 29): the planner picks each pass's
tile for the least RAM in all — arena and state, the optimized kernels' workspace (a tiled
dense convolution's im2col columns grow with its row tile) and the L1 peak — within a few
per cent of the fewest estimated instructions (memory.selection); where no tiling within
the L1 budget keeps to the untiled build's RAM, `edgebuild check` warns by how much and
names the layer (memory.budget.warnings). benchmarks/l1_sweep.py builds the same sweep
through the known-answer test."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from conftest import run_cli, write

from edgebuild.manifest import Manifest
from edgebuild.memory import budget, selection, tiling
from edgebuild.memory.plan import MemoryPlan, make_plan, tile_steps, untiled_peaks
from edgebuild.model import folding

_SWEEP = Path(__file__).resolve().parent.parent / "benchmarks" / "l1_sweep.py"
_spec = importlib.util.spec_from_file_location("l1_sweep", _SWEEP)
assert _spec is not None and _spec.loader is not None
l1_sweep = importlib.util.module_from_spec(_spec)
sys.modules["l1_sweep"] = l1_sweep  # its dataclasses look their module up
_spec.loader.exec_module(l1_sweep)

# the sweep's two synthetic models (benchmarks/l1_sweep.py): a Fashion-MNIST CNN (with a
# 4 KiB L1 it took 82,320 bytes, untiled 40,768) and a 1-D model over a long series (4 KiB
# took 31,200 bytes, untiled 21,680)
FASHION = l1_sweep.FASHION_LAYERS
SERIES = l1_sweep.SERIES_LAYERS
DIGITS_CONV = [  # manifests/digits_conv.yaml: 4 KiB took 44,876 bytes, untiled 19,840
    {"name": f"conv{i}", "op": "conv2d", "out": out, "kernel": 3, "pad": 1, "act": "relu"}
    for i, out in ((1, 16), (2, 32), (3, 32))] + [
    {"name": "conv4", "op": "conv2d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2}},
    {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]
VOWELS = [  # manifests/vowels.yaml
    {"name": "conv1", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1, "act": "relu"},
    {"name": "conv2", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2}},
    {"name": "conv3", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2}},
    {"name": "fc", "op": "linear", "out": 9, "flatten": True, "wide": True}]
MODELS = {"fashion": (FASHION, (1, 28, 28)), "series": (SERIES, (1, 400)),
          "digits_conv": (DIGITS_CONV, (1, 8, 8)), "vowels": (VOWELS, (12, 25))}
BUDGETS = (16384, 8192, 4096, 2048, 1024)
UNLIMITED = 1 << 20


def _layers(layers, shape) -> tuple:
    manifest = Manifest.model_validate({"name": "t", "dataset": {"format": "sklearn-digits"},
                                        "model": {"input": list(shape), "layers": layers}})
    folded, _ = folding.fold_layers(manifest.model.layers)
    return folded


def _plan(folded, shape, l1: int, split: bool, l2: int = UNLIMITED) -> MemoryPlan:
    plan, problems = tile_steps(shape, folded, make_plan(shape, folded, 0), l1, l2, False, split)
    assert not problems and plan.memory is not None
    return plan


def _fits(folded, shape, l1: int, split: bool) -> bool:
    return all(p.bytes <= l1 for p in budget.l1_passes(shape, folded, False, split))


@pytest.mark.parametrize("split", [True, False], ids=["optimized", "reference"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_smaller_l1_never_costs_more_ram_than_untiled(model: str, split: bool):
    layers, shape = MODELS[model]
    folded = _layers(layers, shape)
    untiled = _plan(folded, shape, UNLIMITED, split)
    assert untiled.memory is not None and not untiled.memory.tiled_layers
    peaks = untiled_peaks(shape, folded, untiled, split)
    assert untiled.memory.ram_bytes == untiled.arena_bytes + untiled.state_bytes + peaks.bytes
    tiled = 0
    for l1 in BUDGETS:
        if not _fits(folded, shape, l1, split):
            continue
        plan = _plan(folded, shape, l1, split)
        assert plan.memory is not None and plan.memory.l1_peak <= l1
        assert plan.memory.ram_bytes <= untiled.memory.ram_bytes, (l1, plan.memory)
        assert budget.tiling_cost(shape, folded, plan) is None
        tiled += bool(plan.memory.tiled_layers)
    assert tiled >= 2  # the sweep tiles: the bound is not met by running whole


def test_the_workspace_no_longer_takes_a_whole_plane_of_columns():
    # the cause: conv2 (16 -> 32, 3x3, on the pooled 14 x 14) took all 14 output rows as its
    # row tile, 196 pixels x 144 taps x 2 bytes of columns; the untiled kernels build 4 pixels
    folded = _layers(FASHION, (1, 28, 28))
    plan = _plan(folded, (1, 28, 28), 4096, True)
    assert plan.memory is not None
    steps = {step.layer: step for step in plan.steps}
    conv2 = steps["conv2"].tile()
    assert conv2 is not None and conv2.rows < 14
    assert steps["conv2"].workspace_bytes == 2 * -(-conv2.rows * 14 // 4) * 4 * 144
    assert plan.memory.workspace_bytes < 56448 // 2
    assert plan.memory.ram_bytes == (plan.arena_bytes + plan.state_bytes +
                                     plan.memory.workspace_bytes + plan.memory.l1_peak)


def test_the_workspace_keeps_to_the_l2_the_arena_leaves():
    # a tight l2: the planner takes tiles whose columns fit the L2 the arena leaves
    folded = _layers(FASHION, (1, 28, 28))
    free = _plan(folded, (1, 28, 28), 4096, True)
    assert free.memory is not None
    room = free.memory.workspace_bytes - 1
    tight = _plan(folded, (1, 28, 28), 4096, True, l2=free.arena_bytes + room)
    assert tight.memory is not None and tight.memory.workspace_bytes <= room


# ---- the selection ---------------------------------------------------------------------------

def _choice(l1: int, workspace: int, cost: float) -> selection.Choice:
    tile = tiling.Tile("x", 1, 1, 1, l1, l1, 0, 0, True)
    return selection.Choice(tiling.Option(tile, (cost, 0, 1)), workspace)


# Two passes: a cheap wide tile with a lot of columns, a slightly dearer one with few (within
# the slack), a small tile that costs much more; the second pass has one option.
DEARER = 150.0 * (1 + selection.COST_SLACK / 2) - 50.0  # the whole selection within the slack
PASSES = [[_choice(1000, 9000, 100.0), _choice(1200, 2000, DEARER), _choice(200, 2000, 150.0)],
          [_choice(800, 1000, 50.0)]]


def test_the_least_ram_within_the_instruction_slack():
    peaks = selection.best_peaks(PASSES)
    assert (peaks.l1, peaks.workspace) == (1200, 2000)  # a little dearer, 6.8 KB less
    chosen = selection.select(PASSES)
    assert [c.option.key[0] for c in chosen] == [DEARER, 50.0]
    # beyond the slack, the fewest instructions
    dear = [[_choice(1000, 9000, 100.0), _choice(1200, 2000, 100.0 + 150.0 * 2 *
                                                 selection.COST_SLACK)], PASSES[1]]
    assert selection.best_peaks(dear) == selection.Peaks(1000, 9000)


def test_no_ram_beyond_the_untiled_build_whatever_the_instructions():
    # 3200 bytes in all (L1 + workspace) is all the untiled build took: the dear small tile
    peaks = selection.best_peaks(PASSES, ram_budget=3000)
    assert (peaks.l1, peaks.workspace) == (800, 2000)
    # nothing keeps within 2000: the least RAM whatever the instructions
    assert selection.best_peaks(PASSES, ram_budget=2000) == peaks


def test_the_workspace_budget_first_then_the_least_workspace():
    # no option of the first pass keeps within 1500 bytes of workspace: the least workspace
    # (2000), then the least RAM
    assert selection.best_peaks(PASSES, workspace_budget=1500) == selection.Peaks(800, 2000)
    one = [[_choice(1000, 9000, 100.0), _choice(1200, 2000, 100.5)]]
    assert selection.best_peaks(one, workspace_budget=5000) == selection.Peaks(1200, 2000)
    assert selection.best_peaks(one, workspace_budget=1000) == selection.Peaks(1200, 2000)
    assert selection.best_peaks(one, floor=3000) == selection.Peaks(1200, 3000)


# ---- where the hardware truly needs more: check says so ----------------------------------

# conv2 (64 -> 2 channels, 3x3 over 8 x 8; the GEMM's: its input's channel-pair copy for the
# column kernels, 12,800 bytes, passes the copy's cap) does not fit 4000 bytes whole (5384),
# and a tile of one output row builds 8 pixels' columns (8 x 576 taps x 2 = 9216 bytes) where
# the untiled kernels build 4 (4608): 760 bytes more than the untiled build, whatever the
# tiles. (With 32 -> 2 the column kernels run it over the copy: no such cost.)
WARNED = """\
name: w
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 64, kernel: 3, pad: 1, act: relu}}
    - {{name: conv2, op: conv2d, out: 2, kernel: 3, pad: 1, act: relu}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: 1, batch: 64}}
target: {{device: cortex-m4, memory: {{l1: {l1}, l2: 128KiB, flash: 512KiB}}}}
"""


def test_check_warns_when_the_l1_budget_truly_costs_ram(tmp_path):
    path = write(tmp_path / "manifests" / "w.yaml", WARNED.format(l1=4000))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stderr.splitlines() if "warning" in line]
    column = path.read_text().splitlines()[12].index("l1:") + 1
    assert line.startswith(f"manifests/w.yaml:13:{column}: target.memory.l1: warning: 4000 B "
                           "makes the model's RAM 760 bytes larger than untiled: 14976 bytes")
    assert "layer conv2 does not fit L1 whole, and its tiles of 1 output row build 9216 " \
        "bytes of im2col columns" in line
    assert "An l1 of 5384 B runs every layer whole" in line
    write(path, WARNED.format(l1=5384))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_the_warning_is_the_plans_own_figures():
    folded = _layers([{"name": "conv1", "op": "conv2d", "out": 64, "kernel": 3, "pad": 1,
                       "act": "relu"},
                      {"name": "conv2", "op": "conv2d", "out": 2, "kernel": 3, "pad": 1,
                       "act": "relu"},
                      {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}],
                     (1, 8, 8))
    plan = _plan(folded, (1, 8, 8), 4000, True)
    cost = budget.tiling_cost((1, 8, 8), folded, plan)
    assert plan.memory is not None and cost is not None
    assert (cost.ram, cost.untiled_ram) == (plan.memory.ram_bytes, 14216)
    assert (cost.layer, cost.rows, cost.workspace) == ("conv2", 1, 9216)
    assert budget.tiling_cost((1, 8, 8), folded, _plan(folded, (1, 8, 8), 5384, True)) is None
