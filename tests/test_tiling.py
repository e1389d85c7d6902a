"""L1 tiling: the planner's choices, the traffic lower bound (no tiling moves less, and
the untiled layer meets it), and generated tiled C identical to the untiled integer
reference for random shapes and budgets (compiled and run on the host)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import example_targets
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from edgebuild.codegen import project as codegen
from edgebuild.manifest import Manifest
from edgebuild.memory import tiling
from edgebuild.memory.plan import make_plan, tile_steps
from edgebuild.model import folding, quantized
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import QuantParams
from edgebuild.pipeline import validation

CONV = tiling.Window(16, 8, 8, 32, 8, 8, k_h=3, k_w=3, pad_h=1, pad_w=1, bias=True)


def test_a_layer_that_fits_is_not_tiled():
    tile = tiling.choose("c", CONV, 64 * 1024, True)
    assert not tile.tiled and tile.tiles == 1
    assert tile.bytes_in + tile.bytes_out == tiling.whole(CONV) == tiling.lower_bound(CONV)


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("double_buffer", [True, False])
def test_tiles_fit_and_the_smallest_l1_is_exact(double_buffer, split):
    conv = replace(CONV, split=True)
    smallest = tiling.smallest_l1(conv, double_buffer, split)
    assert tiling.minimum_l1(conv, double_buffer, split) == smallest
    assert tiling.choose("c", conv, smallest - 1, double_buffer, split) is None
    for budget in (smallest, 2 * smallest, 4096, 6000):
        tile = tiling.choose("c", conv, budget, double_buffer, split)
        assert tile.tiled and tile.l1_bytes <= budget
        assert tile.bytes_in + tile.bytes_out >= tiling.lower_bound(conv)
    if split:  # the split layout fits a smaller budget than the direct one
        assert smallest < tiling.smallest_l1(conv, double_buffer)


def test_a_linear_layer_on_the_split_kernels_streams_its_rows_from_flash():
    fc = tiling.Window(512, 1, 1, 10, 1, 1, bias=True, linear=True, split=True)
    assert tiling.minimum_l1(fc, True, True) == 0  # check and plan: any L1 budget
    for budget in (0, 600, 1100, 5000):  # each weight is read once: streamed, no L1
        tile = tiling.choose("fc", fc, budget, True, True)
        assert not tile.tiled and tile.l1_bytes == 0
        assert tile.bytes_in + tile.bytes_out == tiling.lower_bound(fc)
    assert tiling.choose("fc", fc, 6000, True, True).l1_bytes == tiling.whole(fc)  # fits
    tile = tiling.choose("fc", fc, 5000, True)  # the direct layout stages rows in L1
    assert tile.tiled and tile.l1_bytes <= 5000
    assert tiling.choose("fc", fc, 600, True) is None  # the direct layout: no tile fits


@pytest.mark.parametrize("split", [False, True])
def test_more_l1_never_means_more_cost(split):
    # the tiler minimizes the estimated instructions (tiling.cost): more L1 only adds tiles
    costs = []
    for budget in (1400, 2000, 3000, 5000):
        t = tiling.choose("c", CONV, budget, True, split)
        costs.append(tiling.cost(CONV, t.rows, t.channels, t.tiles, t.bytes_in + t.bytes_out))
    assert costs == sorted(costs, reverse=True)


def test_the_split_layout_takes_wider_tiles_and_fits():
    # vowels' conv2 in 1 KiB (small_l1): the input is needed only while its columns are
    # built, so it shares its bytes with the channel slots — 4 channels x all 12 rows fit
    conv2 = tiling.Window(32, 12, 1, 32, 12, 1, k_h=3, pad_h=1, bias=True, split=True)
    direct, split = (tiling.choose("c", conv2, 1024, True, s) for s in (False, True))
    assert split.l1_bytes <= 1024 and split.tiles < direct.tiles
    assert (split.rows, split.channels) == (12, 4)
    assert split.l1_bytes == max(32 * 12, 2 * (4 * 96 + 4 * 4 + 4 * 12))


def test_grouped_tiles_respect_group_boundaries():
    depthwise = tiling.Window(8, 6, 6, 16, 6, 6, k_h=3, k_w=3, pad_h=1, pad_w=1, groups=8)
    tile = tiling.choose("d", depthwise, 600, False)
    assert tile.tiled and tile.channels % 2 == 0


# --- the traffic lower bound ---------------------------------------------------------------

def test_the_bound_is_the_untiled_traffic_when_a_stride_leaves_the_last_row_unread():
    # conv1d, 2 -> 3 channels, kernel 3, stride 2 over 8 samples (tiled as a column 8 x 1):
    # 3 outputs read samples 0-2, 2-4, 4-6; sample 7 is never read, so the untiled layer
    # moves 2 * 7 input + 3 * 2 * 3 weight + 4 * 3 bias + 3 * 3 output = 53 bytes — not
    # its whole working set (55), the old "bound"
    w = tiling.Window(2, 8, 1, 3, 3, 1, k_h=3, stride_h=2, bias=True)
    assert tiling.needed_rows(w) == 7 and tiling.whole(w) == 55
    tile = tiling.choose("c", w, 1 << 20, True)
    assert not tile.tiled and tile.bytes_in + tile.bytes_out == tiling.lower_bound(w) == 53


def test_the_bound_of_a_floor_mode_pool_skips_the_odd_sample():
    # vowels' fused pool: 32 channels x 25 samples, size 2 -> 12 outputs read 24 samples
    w = tiling.Window(32, 25, 1, 32, 12, 1, k_h=2, stride_h=2, groups=32, weights=False)
    tile = tiling.choose("p", w, 1 << 20, True)
    assert tile.bytes_in + tile.bytes_out == tiling.lower_bound(w) == 32 * 24 + 32 * 12


def test_one_row_tiles_meet_the_bound_when_the_stride_skips_rows_between_windows():
    # a strided 1 x 1 conv reads every other sample: untiled, the tile's span moves the
    # rows in between too; one-row tiles (single slot) move only the 4 rows read, once
    w = tiling.Window(2, 8, 1, 3, 4, 1, stride_h=2)
    bound = 2 * 4 + 3 * 2 + 3 * 4
    assert tiling.lower_bound(w) == bound
    assert sum(tiling.traffic(w, 4, 3)[1:]) == bound + 2 * 3  # rows 1, 3, 5 as well
    assert sum(tiling.traffic(w, 1, 3, slots=1)[1:]) == bound


@st.composite
def _conv(draw, name: str, dims: int, size: int) -> dict:
    """A conv1d/conv2d whose window fits `size` (a fused pool first, sometimes)."""
    layer: dict = {"name": name, "op": f"conv{dims}d", "out": draw(st.integers(1, 6)),
                   "bias": draw(st.booleans())}
    if draw(st.booleans()):
        pool = draw(st.integers(2, 3))
        layer["pool"] = {"mode": draw(st.sampled_from(["max", "avg"])), "size": pool,
                         "stride": draw(st.integers(1, pool + 1))}
        size = (size - pool) // layer["pool"]["stride"] + 1
    dilation = draw(st.integers(1, 2))
    kernel = draw(st.integers(1, max(1, min(5, (size - 1) // dilation + 1))))
    layer.update(kernel=kernel, dilation=dilation, stride=draw(st.integers(1, 3)),
                 pad=draw(st.integers(0, (dilation * (kernel - 1)) // 2)))
    return layer


@st.composite
def _model(draw) -> tuple[tuple, tuple[int, ...]]:
    """Random 1-D or 2-D models: convs (pad, stride, dilation, fused pool), pools, a
    transposed conv, a residual add or concat, a linear head — as (folded layers, input
    shape); shape problems are rejected."""
    dims = draw(st.sampled_from([1, 2]))
    size = draw(st.integers(6, 40) if dims == 1 else st.integers(5, 10))
    shape = (draw(st.integers(1, 4)), *([size] * dims))
    layers: list[dict] = [draw(_conv("c0", dims, size))]
    kind = draw(st.sampled_from(["pool", "conv", "add", "concat", "transposed", "none"]))
    if kind == "pool":
        pool = draw(st.integers(2, 3))
        layers.append({"name": "p", "op": f"pool{dims}d", "mode": "max", "size": pool,
                       "stride": draw(st.integers(1, pool + 1))})
    elif kind == "conv":
        layers.append({"name": "c1", "op": f"conv{dims}d", "out": draw(st.integers(1, 4)),
                       "groups": draw(st.sampled_from([1, layers[0]["out"]])),
                       "kernel": draw(st.integers(1, 3)), "pad": draw(st.integers(0, 1)),
                       "stride": draw(st.integers(1, 2))})
        layers[-1]["out"] *= layers[-1]["groups"]
    elif kind in ("add", "concat"):
        layers.append({"name": "j", "op": kind, "inputs": ["c0", "c0"]})
    elif kind == "transposed" and dims == 2:
        stride = draw(st.integers(1, 3))
        layers.append({"name": "u", "op": "conv_transpose2d", "out": draw(st.integers(1, 4)),
                       "kernel": draw(st.integers(1, 4)), "stride": stride,
                       "pad": draw(st.integers(0, 1)),
                       "output_pad": draw(st.integers(0, stride - 1))})
    if draw(st.booleans()):
        layers.append({"name": "fc", "op": "linear", "out": draw(st.integers(1, 5)),
                       "flatten": True, "wide": draw(st.booleans())})
    folded, _ = folding.fold_layers(Manifest.model_validate({
        "name": "t", "dataset": {"format": "sklearn-digits"},
        "model": {"input": list(shape), "layers": layers}}).model.layers)
    assume(graphs.build(shape, folded)[0] is not None)
    return folded, shape


def _windows(folded, shape):
    graph, _ = graphs.build(shape, folded)
    for node, layer in zip(graph.nodes, folded, strict=True):
        if OPS[layer.op].windows is not None:
            yield from (w for _, w in OPS[layer.op].windows(layer, node.in_shapes, node.out_shape))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_model())
def test_no_tiling_moves_less_than_the_bound(model):
    """Every (rows, channels) schedule, single or double buffered, whether it fits L1 or not."""
    for w in _windows(*model):
        bound = tiling.lower_bound(w)
        assert bound <= tiling.whole(w)
        for channels in range(tiling.step(w), w.out_c + 1, tiling.step(w)):
            for rows in range(1, w.out_h + 1):
                for slots in (1, 2):
                    assert sum(tiling.traffic(w, rows, channels, slots)[1:]) >= bound, (
                        w, rows, channels, slots)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_model(), st.one_of(st.integers(64, 1024), st.just(1 << 20)), st.booleans())
def test_the_plan_never_moves_less_than_its_bound(model, l1, double_buffer):
    """Tiled (small L1) and untiled (large L1) plans: traffic_bytes >= traffic_lower_bound,
    equal when nothing is tiled and no stride skips rows between windows."""
    folded, shape = model
    plan, problems = tile_steps(shape, folded, make_plan(shape, folded, 0), l1, 1 << 20,
                                double_buffer)
    assume(not problems)
    totals = plan.memory
    assert totals.traffic_bytes >= totals.traffic_lower_bound > 0
    if not totals.tiled_layers and all(map(_windows_overlap, _windows(folded, shape))):
        assert totals.traffic_bytes == totals.traffic_lower_bound


def _windows_overlap(w: tiling.Window) -> bool:
    """No input row between two consecutive windows goes unread (a transposed conv's
    windows always touch)."""
    return w.transposed or (w.dil_h * (w.k_h - 1) + 1 if w.weights else w.k_h) >= w.stride_h


@pytest.mark.parametrize(("name", "manifest"), example_targets(), ids=lambda value: str(value)
                         if isinstance(value, str) else "")
def test_the_example_plans_never_move_less_than_their_bound(name: str, manifest: Manifest):
    """The examples' plans as `edgebuild build --until plan` makes them, every target (the
    1-D ones were below the old bound: a fused pool over 25 frames reads 24)."""
    folded, _ = folding.fold_layers(manifest.model.layers)
    shape, memory = manifest.model.input, manifest.target.memory
    plan, problems = tile_steps(shape, folded, make_plan(shape, folded, 0), memory.l1,
                                memory.l2, manifest.target.tiling.double_buffer,
                                validation.optimized(manifest))
    assert not problems
    assert plan.memory.traffic_bytes >= plan.memory.traffic_lower_bound


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
    run = subprocess.run(["build/cnn_kat"], cwd=root, capture_output=True, text=True, timeout=60)
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
    assert tile.bytes_in + tile.bytes_out >= tiling.lower_bound(w)


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
        DIGITS_MANIFEST.format(name="small").replace("l1: 16KiB", "l1: 48B"))
    result = run_cli(["build", "--until", "plan"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "target.memory.l1: 48 B is too small: layer fc needs at least" in result.stderr
    assert "other layers over the budget: conv1 56 bytes" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "build" / "small" / "train").exists()  # found before training
