"""The im2col path's padded band (eb_kernels_opt.c, eb_conv_band): a dense or grouped conv
with padding whose group's input rows of an output row fit EB_CONV_BAND_BYTES copies them,
zero-padded, into the scratch after the columns, so that every block of the row -- those at
its edges and in the padding rows too -- takes its columns straight from the band, where
the gather cost about three times as much. Drawn by hypothesis over small input channel
counts (first layers: 1-3), kernels to 7, strides 1-2 along the rows (1-3 down them),
dilation, padding up to the kernel, row widths that end in blocks of 1, 2 and 3 pixels and
every requantization, on the host (portable C, the scratch's guard checking the plan's
twin, ops.im2col_band) and on the Cortex-M4 under QEMU; which layers take it and claim its
scratch; and on the M4 that a first layer at stride 2 and a pad-0x2 row kernel run in fewer
instructions than without it."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernel_selection import m4_path_counts
from test_kernels_opt import (
    conv_out,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    needs_m4,
    plane_of,
    random_bias,
    run_conv_pair,
)

from edgebuild.core.geometry import Plane
from edgebuild.ops import im2col_band


def dense_config(in_c, in_h, in_w, out_c, k, stride=1, pad=0, dil=1, groups=1,
                 **quant) -> dict:
    """A dense (or grouped) layer; k, stride, pad and dil one int for both axes or a pair."""
    def hw(v):
        return (v, v) if isinstance(v, int) else v
    (k_h, k_w), (s_h, s_w), (p_h, p_w), (d_h, d_w) = map(hw, (k, stride, pad, dil))
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c, "k_h": k_h, "k_w": k_w,
           "stride_h": s_h, "stride_w": s_w, "pad_h": p_h, "pad_w": p_w, "dil_h": d_h,
           "dil_w": d_w, "groups": groups, "shift": -7, "rounding": 0, "act": 0, **quant}
    cfg["out_h"] = conv_out(in_h, k_h, s_h, p_h, d_h)
    cfg["out_w"] = conv_out(in_w, k_w, s_w, p_w, d_w)
    return cfg


def data(cfg: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    x = rng.integers(-128, 128, (cfg["in_c"], cfg["in_h"], cfg["in_w"]), dtype=np.int8)
    w = rng.integers(-128, 128, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                 cfg["k_w"]), dtype=np.int8)
    return x, w


@st.composite
def band_layers(draw) -> dict:
    groups = draw(st.sampled_from([1, 1, 1, 2]))
    in_c = groups * draw(st.integers(1, 3))
    out_c = groups * draw(st.integers(1, 9))
    k_h, k_w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    s_h, s_w = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    d_h, d_w = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    p_h, p_w = draw(st.integers(0, k_h)), draw(st.integers(0, k_w))
    assume(p_h + p_w > 0)
    in_h = max(1, d_h * (k_h - 1) + 1 - 2 * p_h) + draw(st.integers(0, 8))
    in_w = max(1, d_w * (k_w - 1) + 1 - 2 * p_w) + draw(st.integers(3, 40))
    assume(conv_out(in_h, k_h, s_h, p_h, d_h) >= 1 and
           conv_out(in_w, k_w, s_w, p_w, d_w) >= 4)
    cfg = dense_config(in_c, in_h, in_w, out_c, (k_h, k_w), (s_h, s_w), (p_h, p_w),
                       (d_h, d_w), groups,
                       shift=draw(st.sampled_from([-1, -7, -9, -14, 0, 2])),
                       act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)))
    assume(im2col_band.band_bytes(plane_of(cfg)) > 0)
    return cfg


@settings(max_examples=300, deadline=None)
@given(cfg=band_layers(), seed=st.integers(0, 2**32 - 1), wide=st.booleans(),
       with_bias=st.booleans())
def test_band_equals_reference(lib, cfg, seed, wide, with_bias):  # noqa: F811
    rng = np.random.default_rng(seed)
    x, w = data(cfg, rng)
    bias = random_bias(rng, cfg["out_c"]) if with_bias else None
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def test_band_extreme_inputs(lib):  # noqa: F811
    """Every input and weight at -128 (the largest sums a tap), the padding's zeros among
    them: a first layer at stride 2, a row kernel padded only along the rows, a 1-D k11."""
    for cfg in (dense_config(3, 16, 51, 3, 3, stride=2, pad=1),
                dense_config(3, 27, 8, 8, (1, 5), pad=(0, 2), act=1),
                dense_config(1, 1, 30, 6, (1, 11), pad=(0, 5), shift=-12)):
        x = np.full((cfg["in_c"], cfg["in_h"], cfg["in_w"]), -128, dtype=np.int8)
        w = np.full((cfg["out_c"], cfg["in_c"], cfg["k_h"], cfg["k_w"]), -128, dtype=np.int8)
        for wide in (False, True):
            ref, opt = run_conv_pair(lib, cfg, x, w, np.zeros(cfg["out_c"], np.int32), wide)
            np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def test_band_takes_padded_convs_that_fit():
    """It takes a padded conv of stride 1 or 2 along its rows whose band fits (2 -> 12 3x3
    stride 2 on 11 x 85: 2 x 3 rows of 96 bytes), not an unpadded one, one of stride 3 along
    the rows, rows of fewer than 4 outputs, more than 512 taps a group or a band past 1,536
    bytes; its claim counts the columns, the band and the taps' offsets."""
    def band(cfg: dict) -> int:
        return im2col_band.band_bytes(plane_of(cfg))
    first = dense_config(2, 11, 85, 12, 3, stride=2, pad=1)
    assert band(first) == 2 * 3 * 96
    assert im2col_band.elements(plane_of(first)) == 4 * 20 + 2 * 3 * 96 // 2 + 2 * 18
    assert im2col_band.scratch(plane_of(first)) == "EB_CONV_BAND_SCRATCH(2, 3, 3, 85, 1)"
    for cfg in (dense_config(3, 27, 8, 8, (1, 5), pad=(0, 2)),
                dense_config(3, 96, 96, 8, 3, stride=2, pad=1),
                dense_config(8, 12, 12, 16, 3, pad=1, groups=2),
                dense_config(24, 4, 8, 4, 5, pad=2, groups=2)):  # seed 7's: 300 taps a group
        assert band(cfg) > 0, cfg
    for cfg in (dense_config(2, 11, 85, 12, 3, stride=2),
                dense_config(2, 11, 85, 12, 3, stride=(1, 3), pad=1),
                dense_config(2, 5, 5, 12, 3, stride=2, pad=1),
                dense_config(50, 1, 4, 2, (1, 15), pad=(0, 7)),  # 750 taps in 1,400 bytes
                dense_config(8, 12, 200, 16, 3, pad=1)):
        assert band(cfg) == 0 and im2col_band.scratch(plane_of(cfg)) is None, cfg
    assert im2col_band.pitch(Plane(1, 1, 85, 1, 1, 43, pad_w=1)) == 96


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(band_layers(), min_size=8, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_m4_band_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    m4_convs_exact(lib, m4_build, "im2col_band",
                   [(cfg, *data(cfg, rng), random_bias(rng, cfg["out_c"])) for cfg in cfgs])


@needs_m4
def test_m4_band_beats_the_gather(lib, m4_build):  # noqa: F811
    """With "im2col_band" left out and in: exact, and in at least `fewer` instructions an
    output fewer (measured 8.9, 11.8 and 23.8): seed 32's 2 -> 12 3x3 stride 2 on 11 x 85, a
    3 -> 16 first layer at stride 2 on 31 x 31, seed 7's 3 -> 8 1x5 pad 0x2 on 27 x 8."""
    rng = np.random.default_rng(32)
    for cfg, fewer in ((dense_config(2, 11, 85, 12, 3, stride=2, pad=1, act=1), 6),
                       (dense_config(3, 31, 31, 16, 3, stride=2, pad=1, act=1), 8),
                       (dense_config(3, 27, 8, 8, (1, 5), pad=(0, 2), act=1), 16)):
        case = (cfg, *data(cfg, rng), random_bias(rng, cfg["out_c"]))
        counts = m4_path_counts(lib, m4_build, case, "im2col_band", "band")
        outputs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
        print(cfg["in_c"], cfg["in_w"], counts, (counts[1] - counts[0]) / outputs)
        assert counts[0] <= counts[1] - fewer * outputs, (cfg, counts, outputs)
