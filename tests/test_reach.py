"""ops.reach: a convolution's kernel cut to the taps its outputs reach computes the same
integers as the whole kernel (what the generated C then runs), keeps the plane one the C
kernels take (padding before >= 0, after it at most the padding before, the formula's output
size) and leaves out only taps no output reaches; through the generated C, layers with such
taps pass their known answers on the host and the Cortex-M4 and store the cut weights."""

from __future__ import annotations

from argparse import Namespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_opt import needs_m4
from test_shapes_bench import shapes

from edgebuild.core.geometry import ShapeError, window_out
from edgebuild.ops.conv import reference_conv
from edgebuild.ops.reach import AxisReach, axis_reach, cut_weight, trim

AXIS = st.tuples(st.integers(1, 20), st.integers(1, 15), st.integers(1, 3), st.integers(0, 9),
                 st.integers(1, 3))


def _valid(n_in: int, k: int, s: int, p: int, d: int) -> bool:
    try:
        return window_out(n_in, k, s, p, d) >= 1
    except ShapeError:
        return False


@settings(max_examples=400, deadline=None)
@given(axis=AXIS)
def test_an_axis_cut_leaves_out_only_unreached_taps_and_keeps_the_plane(axis):
    n_in, k, s, p, d = axis
    if not _valid(*axis):
        return
    r = axis_reach(*axis)
    n_out = window_out(*axis)
    assert r.first >= 0 and r.taps >= 1 and r.first + r.taps <= k
    assert r.pad == p - r.first * d >= 0
    assert window_out(n_in, r.taps, s, r.pad, d) == n_out
    after = (n_out - 1) * s + (r.taps - 1) * d + 1 - n_in - r.pad
    assert after <= r.pad
    for t in [*range(r.first), *range(r.first + r.taps, k)]:  # left out: never inside
        assert not any(0 <= o * s - p + t * d < n_in for o in range(n_out)), (axis, r, t)


@settings(max_examples=150, deadline=None)
@given(h=AXIS, w=AXIS, cin=st.integers(1, 3), cout=st.integers(1, 3), seed=st.integers(0, 99))
def test_the_cut_conv_computes_the_same_integers(h, w, cin, cout, seed):
    if not (_valid(*h) and _valid(*w)):
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, cin, h[0], w[0]))
    weight = rng.integers(-128, 128, (cout, cin, h[1], w[1]))
    fields = tuple(zip(h, w, strict=True))
    whole = reference_conv(x, weight, 1, *fields[1:])
    reach = trim(*fields)
    kept = cut_weight(weight, reach)
    assert kept.flags.c_contiguous and kept.shape == (cout, cin, *(r.taps for r in reach))
    part = reference_conv(x, kept, 1, tuple(r.taps for r in reach), fields[2],
                          tuple(r.pad for r in reach), fields[4])
    assert np.array_equal(whole, part)


def test_the_kernels_that_motivated_it():
    """A 3x3 on one row reads its middle row; a 1x14 stride-2 kernel padded 6 on 4-wide rows
    6 of its columns; a 10x10 dilation-2 kernel padded 9 on 4 rows 4 of its rows; a 3x3 on a
    6x6 map, stride 2, all of them."""
    assert axis_reach(1, 3, 1, 1, 1) == AxisReach(1, 1, 0)
    assert (axis_reach(4, 14, 2, 6, 1).first, axis_reach(4, 14, 2, 6, 1).taps) == (4, 6)
    assert (axis_reach(4, 10, 1, 9, 2).first, axis_reach(4, 10, 1, 9, 2).taps) == (3, 4)
    assert axis_reach(6, 3, 2, 1, 1).taps == 3 and axis_reach(40, 3, 1, 1, 1).taps == 3


@pytest.mark.slow
@needs_m4
def test_layers_with_unreached_taps_run_bit_exact_through_the_generated_c(tmp_path):
    """Dense, depthwise (with a multiplier), dilated and 1-D layers whose kernels reach past
    their input pass their known answers on the host and the M4, their C cut (k_h / k_w in
    the parameters, the weights' count in weights.c)."""
    Layer = shapes.Layer
    models = {
        "row3x3": [Layer("conv2d", 8, 6, (1, 24), (3, 3), pad=(1, 1))],
        "dwrow": [Layer("conv2d", 8, 16, (1, 30), (5, 3), pad=(2, 1), groups=8)],
        "dil": [Layer("conv2d", 4, 8, (4, 20), (10, 3), pad=(9, 1), dilation=(2, 1), groups=4)],
        "wide": [Layer("conv1d", 6, 4, (1, 4), (1, 11), pad=(0, 5))],
        "s2": [Layer("conv2d", 16, 48, (6, 4), (1, 14), stride=(1, 2), pad=(0, 6), groups=16)],
    }
    # (rows, columns) of the cut kernels, by hand: one row of 3 or 5 (the middle), rows 3..6
    # of 10 (row 2 k reads input row o - 9 + 2 k), taps 2..8 of 11 (o - 5 + t for o < 4),
    # columns 4..9 of 14 (2 o - 6 + t for o < 2)
    expect = {"row3x3": (1, 3), "dwrow": (1, 3), "dil": (4, 3), "wide": (1, 7), "s2": (1, 6)}
    args = Namespace(samples=2, seed=5, jobs=2, no_cmsis=True, code=False)
    rows = shapes.measure(tmp_path, models, args)
    failed = [r["model"] for r in rows if r["status"] != "pass"]
    assert not failed, (tmp_path / "build.log").read_text()[-4000:]
    for name, (k_h, k_w) in expect.items():
        model = tmp_path / "build" / name / "codegen" / "model"
        cnn = (model / "cnn.c").read_text()
        assert f".k_h = {k_h}," in cnn and f".k_w = {k_w}," in cnn, name
        layer = models[name][0]
        count = layer.cout * layer.cin // layer.groups * k_h * k_w
        assert f"[{count}]" in (model / "weights.c").read_text(), name
