"""The optimized kernels' workspace (eb_scratch) is the plan's figure: the generated C's
array holds exactly the bytes plan.json counts (memory.workspace_bytes, the largest step's
workspace_bytes), the kernels' own scratch macros check it at compile time (one int16 less
does not compile), and the RAM budget counts it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import tool

from edgebuild.codegen import project as codegen
from edgebuild.manifest import Manifest
from edgebuild.memory import budget
from edgebuild.memory.plan import MemoryPlan, make_plan, tile_steps
from edgebuild.model import folding, quantized
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS, dw_spec
from edgebuild.ops.operator import QuantParams

CASES = {
    "conv2d": ([{"name": "c", "op": "conv2d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
                {"name": "d", "op": "conv2d", "out": 8, "kernel": 3, "stride": 2, "pad": 1,
                 "pool": {"mode": "max", "size": 2}},
                {"name": "fc", "op": "linear", "out": 3, "flatten": True}], (4, 12, 12)),
    "conv1d": ([{"name": "c", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1},
                {"name": "d", "op": "conv1d", "out": 32, "kernel": 3, "pad": 1,
                 "pool": {"mode": "max", "size": 2}},
                {"name": "g", "op": "conv1d", "out": 8, "kernel": 3, "groups": 8},
                {"name": "fc", "op": "linear", "out": 9, "flatten": True, "wide": True}],
               (12, 25)),
}


def _manifest(layers, shape, l1: int, l2: int = 1 << 20) -> Manifest:
    return Manifest.model_validate({
        "name": "t", "dataset": {"format": "sklearn-digits"},
        "model": {"input": list(shape), "layers": layers},
        "target": {"device": "cortex-m4", "memory": {"l1": l1, "l2": l2}}})


def _spec(layers, shape, l1: int) -> tuple[codegen.ProjectSpec, MemoryPlan]:
    folded, _ = folding.fold_layers(_manifest(layers, shape, l1).model.layers)
    plan, problems = tile_steps(tuple(shape), folded, make_plan(tuple(shape), folded, 0), l1,
                                1 << 20, True, True)
    assert not problems
    rng = np.random.default_rng(0)
    graph, _ = graphs.build(tuple(shape), folded)
    params = {}
    for node, layer in zip(graph.nodes, folded, strict=True):
        if OPS[layer.op].computes:
            weight_shape = OPS[layer.op].weights.shape(layer, node.in_shapes[0])
            params[layer.name] = QuantParams(rng.integers(-8, 8, weight_shape), None, 2, 4)
    model = quantized.QuantizedModel(tuple(shape), folded, params, "half_up")
    x = rng.integers(-128, 128, (1, *shape)).astype(np.int8)
    expected = quantized.run_reference(model, x).reshape(len(x), -1)
    return codegen.ProjectSpec("t", model, plan, x, expected, 1 << 20, 1 << 20,
                               "cortex-m4"), plan


def _compiles(root: Path, cnn: str, *flags: str) -> bool:
    (root / "model" / "cnn.c").write_text(cnn)
    run = subprocess.run([tool("cc"), "-std=c99", "-fsyntax-only", "-Werror", *flags, "model/cnn.c"],
                         cwd=root, capture_output=True, text=True, timeout=60)
    return run.returncode == 0


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("l1", [1100, 2048, 1 << 16])
def test_the_c_workspace_is_the_plans_figure(tmp_path: Path, case: str, l1: int):
    spec, plan = _spec(*CASES[case], l1)
    assert plan.memory is not None
    steps = {step.layer: step.workspace_bytes for step in plan.steps}
    assert plan.memory.workspace_bytes == max(size or 0 for size in steps.values()) > 0
    assert plan.memory.ram_bytes == (plan.arena_bytes + plan.state_bytes +
                                     plan.memory.workspace_bytes + plan.memory.l1_peak)
    if l1 < 1 << 16:
        assert plan.memory.tiled_layers  # some layer tiled (its columns in the workspace)
    files = codegen.render(spec)
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    cnn = files["model/cnn.c"]
    sizes = re.findall(r"int16_t values\[(\d+)\];", cnn)
    assert [int(n) * 2 for n in sizes] == [plan.memory.workspace_bytes]
    smaller = cnn.replace(f"values[{sizes[0]}]", f"values[{int(sizes[0]) - 1}]")
    for flags in ((), ("-DEB_REFERENCE_KERNELS",)):
        assert _compiles(tmp_path, cnn, "-Imodel", *flags)
    # one int16 less than the plan's figure is less than some kernel call needs
    assert not _compiles(tmp_path, smaller, "-Imodel")


def test_the_ram_budget_counts_the_workspace():
    # the planner keeps the workspace within the L2 the arena leaves when some tiling does:
    # the least such L2 is what check reports, and one byte less fails
    layers, shape = CASES["conv1d"]
    _, plan = _spec(layers, shape, 1024)
    assert plan.memory is not None
    folded, _ = folding.fold_layers(_manifest(layers, shape, 1024).model.layers)
    [(path, message)] = budget.problems(_manifest(layers, shape, 1024, 1), folded, optimized=True)
    assert path == ("target", "memory", "l2")
    need = int(re.search(r"needs at least (\d+) bytes", message).group(1))
    assert need <= plan.arena_bytes + plan.memory.workspace_bytes
    assert not budget.problems(_manifest(layers, shape, 1024, need), folded, optimized=True)
    problems = budget.problems(_manifest(layers, shape, 1024, need - 1), folded, optimized=True)
    assert [path for path, _ in problems] == [("target", "memory", "l2")]
    assert f"needs at least {need} bytes" in problems[0][1]
    tight = budget.planned(_manifest(layers, shape, 1024, need), folded, optimized=True)
    assert tight.memory is not None and need == tight.arena_bytes + tight.memory.workspace_bytes
    assert f"workspace: {tight.memory.workspace_bytes} bytes" in problems[0][1]
    # a target without the optimized kernels needs no workspace
    assert not budget.problems(_manifest(layers, shape, 1024, plan.arena_bytes), folded)


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_and_plan_agree_on_the_smallest_l1_of_the_split_kernels(case: str):
    # edgebuild check's minimum L1 on an optimized target is the split layout's (a linear
    # layer: none, it streams its rows from flash), and exactly what the planner fits
    layers, shape = CASES[case]
    folded, _ = folding.fold_layers(_manifest(layers, shape, 1024).model.layers)
    double = False  # the manifest's default (target.tiling.double_buffer)
    need = max(p.bytes for p in budget.l1_passes(shape, folded, double, True))
    assert need < max(p.bytes for p in budget.l1_passes(shape, folded, double))
    plan = make_plan(tuple(shape), folded, 0)
    _, problems = tile_steps(tuple(shape), folded, plan, need, 1 << 20, double, True)
    assert not problems
    assert not [p for p in budget.problems(_manifest(layers, shape, need), folded,
                                           optimized=True) if p[0][-1] == "l1"]
    _, problems = tile_steps(tuple(shape), folded, plan, need - 1, 1 << 20, double, True)
    assert problems
    assert [p for p in budget.problems(_manifest(layers, shape, need - 1), folded,
                                       optimized=True) if p[0][-1] == "l1"]


# Depthwise 3x3 layers the padded path takes: its channel copy (eb_dw_opt.c) in the workspace,
# the whole plane (8 x 40 x 20), a band of it (2 x 60 x 50: over 2 KiB), a fused 2x2 max pool.
DW_CASES = {
    "whole": ([{"name": "d", "op": "conv2d", "out": 8, "kernel": 3, "pad": 1, "groups": 8,
                "act": "relu"}], (8, 40, 20)),
    "band": ([{"name": "d", "op": "conv2d", "out": 2, "kernel": 3, "pad": 1, "groups": 2}],
             (2, 60, 50)),
    "pooled": ([{"name": "d", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1, "groups": 4,
                 "act": "relu", "pool": {"mode": "max", "size": 2}}], (4, 60, 40)),
}
DW_TAIL = [{"name": "r", "op": "conv2d", "out": 2, "kernel": 3, "stride": 4},
           {"name": "fc", "op": "linear", "out": 3, "flatten": True}]


@pytest.mark.parametrize("case", sorted(DW_CASES))
def test_the_depthwise_copy_is_in_the_plans_workspace(tmp_path: Path, case: str):
    layers, shape = DW_CASES[case]
    spec, plan = _spec(layers + DW_TAIL, shape, 1 << 16)
    assert plan.memory is not None and not plan.memory.tiled_layers
    graph, _ = graphs.build(tuple(shape), spec.model.layers)
    assert graph is not None
    layer, node = spec.model.layers[0], graph.nodes[0]
    window = OPS[layer.op].windows(layer, node.in_shapes, node.out_shape)[-1][1]
    assert window.banded
    need = dw_spec.padded_bytes(window)  # the rule of EB_DW_OPT_SCRATCH (eb_kernels_opt.h)
    pitch = window.in_w + window.pad_w
    cap = dw_spec.DW_PAD_BYTES
    rows = window.out_h if (window.out_h + 2) * pitch + window.pad_w <= cap else \
        ((cap - window.pad_w) // pitch - 2) & ~1
    assert need == (rows + 2) * pitch + window.pad_w + 4
    assert (rows < window.out_h) == (case == "band")
    steps = {step.layer: step.workspace_bytes for step in plan.steps}
    assert need > 2 * 4 * 12  # more than its im2col fallback's EB_CONV_OPT_SCRATCH(1, 3, 3)
    # the depthwise layer's workspace is its copy, and the largest: the plan's figure, what the generated C's array holds and its check demands
    assert steps["d"] == 2 * ((need + 1) // 2) == plan.memory.workspace_bytes
    assert plan.memory.ram_bytes == (plan.arena_bytes + plan.state_bytes + steps["d"] +
                                     plan.memory.l1_peak)
    files = codegen.render(spec)
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    cnn = files["model/cnn.c"]
    claim = f"(EB_DW_OPT_SCRATCH({window.in_w}, {window.pad_w}, {window.out_h}) + 1) / 2"
    assert claim in cnn
    sizes = re.findall(r"int16_t values\[(\d+)\];", cnn)
    assert [int(n) * 2 for n in sizes] == [steps["d"]]
    for flags in ((), ("-DEB_REFERENCE_KERNELS",)):
        assert _compiles(tmp_path, cnn, "-Imodel", *flags)
    # the C's own need (EB_DW_OPT_SCRATCH) is exactly the plan's: one int16 less fails
    smaller = cnn.replace(f"values[{sizes[0]}]", f"values[{int(sizes[0]) - 1}]")
    assert not _compiles(tmp_path, smaller, "-Imodel")


# issue 29: a Fashion-MNIST CNN whose 4 KiB L1 tiles took conv2's 14 output rows at once,
# 56,448 bytes of columns in a workspace the untiled build keeps at 3,136.
FASHION = ([{"name": "conv1", "op": "conv2d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
            {"name": "conv2", "op": "conv2d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
             "pool": {"mode": "max", "size": 2}},
            {"name": "conv3", "op": "conv2d", "out": 32, "kernel": 3, "pad": 1, "act": "relu",
             "pool": {"mode": "max", "size": 2}},
            {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}],
           (1, 28, 28))


def test_tiles_chosen_for_ram_keep_the_c_workspace_the_plans_figure(tmp_path: Path):
    _, untiled = _spec(*FASHION, 1 << 16)
    spec, plan = _spec(*FASHION, 4096)
    assert plan.memory is not None and untiled.memory is not None
    assert plan.memory.tiled_layers and not untiled.memory.tiled_layers
    assert plan.memory.ram_bytes <= untiled.memory.ram_bytes  # old: 82,320 > 40,768
    files = codegen.render(spec)
    for relative, text in files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    cnn = files["model/cnn.c"]
    sizes = re.findall(r"int16_t values\[(\d+)\];", cnn)
    assert [int(n) * 2 for n in sizes] == [plan.memory.workspace_bytes]
    assert "EB_CONV_COLS_SCRATCH(" in cnn  # the tiled passes' columns are in the claim
    for flags in ((), ("-DEB_REFERENCE_KERNELS",)):
        assert _compiles(tmp_path, cnn, "-Imodel", *flags)
    smaller = cnn.replace(f"values[{sizes[0]}]", f"values[{int(sizes[0]) - 1}]")
    assert not _compiles(tmp_path, smaller, "-Imodel")
