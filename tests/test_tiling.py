"""L1 tiling: the planner's choices, and generated tiled C identical to the untiled
integer reference for random shapes and budgets (compiled and run on the host)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgebuild.codegen import project as codegen
from edgebuild.manifest import Manifest
from edgebuild.memory import tiling
from edgebuild.memory.plan import make_plan, tile_steps
from edgebuild.model import folding, quantized
from edgebuild.ops import OPS
from edgebuild.ops.operator import QuantParams

CONV = tiling.Window(16, 8, 8, 32, 8, 8, k_h=3, k_w=3, pad_h=1, pad_w=1, bias=True)


def test_a_layer_that_fits_is_not_tiled():
    tile = tiling.choose("c", CONV, 64 * 1024, True)
    assert not tile.tiled and tile.tiles == 1
    assert tile.bytes_in + tile.bytes_out == tiling.whole(CONV)


@pytest.mark.parametrize("double_buffer", [True, False])
def test_tiles_fit_and_the_smallest_l1_is_exact(double_buffer):
    smallest = tiling.smallest_l1(CONV, double_buffer)
    assert tiling.choose("c", CONV, smallest - 1, double_buffer) is None
    for budget in (smallest, 2 * smallest, 4096, 6000):
        tile = tiling.choose("c", CONV, budget, double_buffer)
        assert tile.tiled and tile.l1_bytes <= budget
        assert tile.bytes_in + tile.bytes_out >= tiling.whole(CONV)


def test_more_l1_never_means_more_traffic():
    moved = [tiling.choose("c", CONV, budget, True) for budget in (1400, 2000, 3000, 5000)]
    totals = [t.bytes_in + t.bytes_out for t in moved]
    assert totals == sorted(totals, reverse=True)


def test_grouped_tiles_respect_group_boundaries():
    depthwise = tiling.Window(8, 6, 6, 16, 6, 6, k_h=3, k_w=3, pad_h=1, pad_w=1, groups=8)
    tile = tiling.choose("d", depthwise, 600, False)
    assert tile.tiled and tile.channels % 2 == 0


LAYERS = st.sampled_from([
    [{"name": "c", "op": "conv2d", "out": 6, "kernel": 3, "pad": 1, "act": "relu"},
     {"name": "fc", "op": "linear", "out": 4, "flatten": True, "wide": True}],
    [{"name": "c", "op": "conv2d", "out": 6, "kernel": 3, "stride": 2, "pad": 1,
      "pool": {"mode": "avg", "size": 2, "stride": 1}},
     {"name": "p", "op": "pool2d", "mode": "max", "size": 2},
     {"name": "fc", "op": "linear", "out": 5, "flatten": True}],
    [{"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "groups": 4, "pad": 1, "act": "abs"},
     {"name": "d", "op": "conv2d", "out": 5, "kernel": [1, 3], "dilation": 2, "wide": True}],
    [{"name": "u", "op": "conv_transpose2d", "out": 4, "act": "relu",  # never tiled itself
      "pool": {"mode": "max", "size": 2}},
     {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
     {"name": "fc", "op": "linear", "out": 3, "flatten": True, "wide": True}],
])
LAYERS_1D = st.sampled_from([
    [{"name": "c", "op": "conv1d", "out": 6, "kernel": 5, "pad": 2, "act": "relu"},
     {"name": "d", "op": "conv1d", "out": 4, "kernel": 3, "stride": 2, "dilation": 2,
      "pool": {"mode": "max", "size": 2}, "wide": True}],
    [{"name": "c", "op": "conv1d", "out": 4, "kernel": 3, "groups": 4, "pad": 1},
     {"name": "p", "op": "pool1d", "mode": "avg", "size": 3, "stride": 2},
     {"name": "fc", "op": "linear", "out": 3, "flatten": True}],
])


def _project(layers, shape, l1: int, double_buffer: bool, seed: int) -> codegen.ProjectSpec:
    manifest = Manifest.model_validate({
        "name": "t", "dataset": {"format": "sklearn-digits"},
        "model": {"input": list(shape), "layers": layers},
        "target": {"memory": {"l1": l1}, "tiling": {"double_buffer": double_buffer}}})
    folded, _ = folding.fold_layers(manifest.model.layers)
    plan = make_plan(tuple(shape), folded, 0)
    plan, problems = tile_steps(tuple(shape), folded, plan, l1, 1 << 20, double_buffer)
    if problems:
        return None
    rng = np.random.default_rng(seed)
    from edgebuild.model import graph as graphs

    graph, _ = graphs.build(tuple(shape), folded)
    params = {}
    for node, layer in zip(graph.nodes, folded, strict=True):
        if OPS[layer.op].computes:
            fan_in = node.params // max(layer.out, 1)
            weight_shape = OPS[layer.op].weights.shape(layer, node.in_shapes[0])
            params[layer.name] = QuantParams(rng.integers(-8, 8, weight_shape),
                                             rng.integers(-200, 200, layer.out) if layer.bias
                                             else None, 2, 4)
            assert fan_in >= 1
    model = quantized.QuantizedModel(tuple(shape), folded, params, "half_up")
    x = rng.integers(-128, 128, (6, *shape)).astype(np.int8)
    expected = quantized.run_reference(model, x).reshape(len(x), -1)
    return (codegen.ProjectSpec("t", model, plan, x, expected, 1 << 20, 1 << 20, "host"),
            plan.memory.to_json())


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="needs cc and make to compile the generated C")
@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.tuples(LAYERS, st.integers(5, 9).map(lambda n: (4, n, n))),
                 st.tuples(LAYERS_1D, st.integers(12, 40).map(lambda n: (4, n)))),
       st.integers(120, 3000), st.booleans(), st.integers(0, 99))
def test_tiled_c_equals_the_untiled_reference(tmp_path_factory, case, l1, double_buffer, seed):
    layers, shape = case
    made = _project(layers, shape, l1, double_buffer, seed)
    if made is None:
        return  # infeasible budget: covered by the error tests
    spec, totals = made
    assert totals["l1_peak"] <= l1
    compile_and_run(spec, tmp_path_factory.mktemp("tiled"))


def compile_and_run(spec: codegen.ProjectSpec, root: Path) -> None:
    """Render, build with the host compiler and run the known-answer test (every sample)."""
    for relative, text in codegen.render(spec).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    build = subprocess.run(["make", "-s", "cnn_kat", "CFLAGS=-std=c99 -O1 -Wall -Wextra -Werror"],
                           cwd=root, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["./cnn_kat"], cwd=root, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_conv_tiled_when_l1_is_small():
    spec, totals = _project(
        [{"name": "c", "op": "conv2d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
         {"name": "d", "op": "conv2d", "out": 8, "kernel": 3, "pad": 1},
         {"name": "p", "op": "pool2d", "mode": "max", "size": 4},
         {"name": "fc", "op": "linear", "out": 3, "flatten": True, "wide": True}],
        (4, 8, 8), 1400, True, 1)
    assert {"c", "d"} <= set(totals["tiled_layers"])
    assert totals["traffic_bytes"] >= totals["traffic_lower_bound"]
    assert "eb_conv2d_tiled" in codegen.render(spec)["model/cnn.c"]


def test_a_transposed_conv_tiles_and_reads_only_the_rows_it_needs():
    # 3x3, stride 2, pad 1 over 6 input rows -> 12 output rows; output rows [y0, y0 + r)
    # read input rows ceil((y0 - 1) / 2) .. floor((y0 + r) / 2), within 0..5
    w = tiling.Window(4, 6, 6, 8, 12, 12, k_h=3, k_w=3, stride_h=2, pad_h=1, pad_w=1,
                      bias=True, transposed=True)
    assert [tiling.transposed_span(w, y0, 2) for y0 in range(0, 12, 2)] == [
        (0, 2), (1, 2), (2, 2), (3, 2), (4, 2), (5, 1)]
    assert tiling.input_rows(w, 2) == 2 and tiling.input_rows(w, 12) == 6
    tile = tiling.choose("u", w, 900, True)
    assert tile.tiled and tile.l1_bytes <= 900
    assert tile.bytes_in + tile.bytes_out >= tiling.whole(w)


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="needs cc and make to compile the generated C")
def test_a_tiled_transposed_conv_in_the_generated_c(tmp_path):
    spec, totals = _project(
        [{"name": "u", "op": "conv_transpose2d", "out": 6, "act": "relu",
          "pool": {"mode": "avg", "size": 2, "stride": 1}},
         {"name": "v", "op": "conv_transpose2d", "out": 3, "kernel": [2, 3], "stride": [3, 1],
          "pad": [1, 0], "output_pad": [2, 0], "wide": True}],
        (4, 7, 7), 700, True, 5)
    assert {"u", "v"} <= set(totals["tiled_layers"]) and totals["l1_peak"] <= 700
    cnn = codegen.render(spec)["model/cnn.c"]
    assert "eb_conv_transpose2d_tiled(&P_u, &T_TILE_u, eb_kt_u, 0," in cnn
    assert "eb_conv_transpose2d_tiled(&P_v, &T_TILE_v, eb_kt_v, 1," in cnn
    compile_and_run(spec, tmp_path)  # tiled C == the integer reference on every sample


def test_l1_too_small_is_a_clear_error(tmp_path: Path):
    from conftest import DIGITS_MANIFEST, run_cli

    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(
        DIGITS_MANIFEST.format(name="small").replace("l1: 16KiB", "l1: 64B"))
    result = run_cli(["build", "--until", "plan"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "target.memory.l1" in result.stderr and "needs at least" in result.stderr
    assert "layer 'conv1'" in result.stderr and "budget is 64" in result.stderr
    assert "Traceback" not in result.stderr
