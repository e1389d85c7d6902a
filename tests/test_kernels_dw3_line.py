"""A lone channel's 1-D 3-tap rows in quads (eb_dw_opt.c, eb_dw3_line: a depthwise conv of
one output a group whose kernel is one row of 3 -- a 1-D k3, or a 1x3 on a 2-D map -- at
stride and dilation 1, padding 0..3): four outputs from two words of the row, the lanes by
SXTB16 (right shifts 9..16, weights x 2^(16 - s)) or as x 2^8 by AND (1..8, weights x
2^(8 - s)), so that the outputs are the sums' top halves, stored four at a time; the first
four from words with the padding shifted in, the last four over some done again. Drawn by
hypothesis over row lengths (the shortest the 3-tap kernels take, odd ones, rows whose last
quad overlaps), padding, every requantization (both forms; a right shift of 0 and past 16,
abs, left shifts: the pixel pairs; starts either side of the limit past which a sum of 3
products x 2^(16 - s) could overflow) on the host (portable C) and on the Cortex-M4 under
QEMU, and with "dw_three_tap_line" left out (the pixel pairs); which layers the few-input
kernel leaves to them (rows of 64 outputs or more) and which link them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_col import _plane
from test_kernels_opt import (
    dw_1d,
    dw_config,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    needs_m4,
    run_conv_pair,
)

from edgebuild.ops import conv_path


def _limit(s: int) -> int:
    """eb_dw3_quad_setup's largest start: INT32_MAX less 3 products and NONE's offset, over
    2^(16 - s)."""
    return (2**31 - 1 - (3 << (30 - s)) - (1 << 23)) >> (16 - s)


def _bias(rng: np.random.Generator, cfg: dict) -> np.ndarray | None:
    """Random biases, or (half the time) starts at and either side of the quads' limit for
    the layer's shift, either sign (the bias is the start less the rounding's half)."""
    n = cfg["out_c"]
    s = -cfg["shift"]
    if rng.random() < 0.5 or not 1 <= s <= 16:
        return rng.integers(-(1 << 14), 1 << 14, size=n).astype(np.int32)
    half = (1 << (s - 1)) if cfg["rounding"] == 0 else 0  # half up (EB_ROUND_HALF_UP 0)
    lim = _limit(s)
    starts = rng.choice([lim - 1, lim, lim + 1, -lim - 1, -lim, -lim + 1, 0, lim // 3], size=n)
    return np.clip(starts - half, -2**31, 2**31 - 1).astype(np.int32)


@st.composite
def line_layers(draw) -> dict:
    c = draw(st.integers(1, 3))
    pad = draw(st.integers(0, 3))
    length = draw(st.sampled_from([4, 5, 6, 7, 8, 9, 13, 30, 64, 65, 66, 67, 97, 130]))
    shift = draw(st.sampled_from([0, -1, -4, -7, -8, -9, -12, -16, -17, 2]))
    act, rounding = draw(st.sampled_from([0, 1, 1, 2])), draw(st.integers(0, 1))
    if draw(st.booleans()):
        return dw_1d(c, length, 3, pad=pad, shift=shift, act=act, rounding=rounding)
    rows = draw(st.integers(1, 4))
    return dw_config(c, rows, length, (1, 3), pad=(draw(st.integers(0, 1)), pad), shift=shift,
                     act=act, rounding=rounding)


@settings(max_examples=300, deadline=None)
@given(cfg=line_layers(), seed=st.integers(0, 2**32 - 1), wide=st.booleans())
def test_line_quads_equal_reference(lib, cfg, seed, wide):  # noqa: F811
    rng = np.random.default_rng(seed)
    x, w = dw_data(cfg, rng)
    ref, opt = run_conv_pair(lib, cfg, x, w, _bias(rng, cfg), wide)
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def test_line_quads_at_the_extremes(lib):  # noqa: F811
    """Every input -128 and every weight -128 or 127 (the largest sums), at both forms'
    shifts and each activation, starts at the limit and one past it (half-up rounding: the
    start is the bias and 2^(s - 1)): equal."""
    for length, pad in ((64, 1), (70, 3), (97, 0), (9, 2)):
        for s in (1, 7, 8, 9, 16):
            for act in (0, 1):
                cfg = dw_1d(2, length, 3, pad=pad, shift=-s, act=act, rounding=0)
                x = np.full((2, 1, length), -128, dtype=np.int8)
                for wv in (-128, 127):
                    w = np.full((2, 1, 1, 3), wv, dtype=np.int8)
                    lim = _limit(s) - (1 << (s - 1))
                    for b in (lim, -lim, lim + 1):
                        bias = np.array([b, -b], dtype=np.int32)
                        ref, opt = run_conv_pair(lib, cfg, x, w, bias, False)
                        np.testing.assert_array_equal(opt, ref, err_msg=f"{cfg} {wv} {b}")


def test_long_rows_leave_the_few_input_kernel():
    """A lone channel's rows of one kernel row go to the 3-tap quads from DW3_LINE_MIN
    outputs on (1-D k3 on 1,000 samples: 2.82 -> 2.04 insn/MAC), shorter ones stay on the
    few-input kernel (a 1x3 on 9x9: 6.0 there, 8.8 on the quads)."""
    def paths(cfg: dict) -> frozenset[str]:
        return conv_path.kernel_choice(_plane(cfg))
    line = {"depthwise", "dw_three_tap", "dw_three_tap_line"}
    assert paths(dw_1d(16, 1000, 3)) == line
    assert paths(dw_1d(16, 66, 3)) == line
    assert paths(dw_config(8, 20, 66, (1, 3))) == line
    assert paths(dw_1d(16, 1000, 3, vertical=True)) == line
    assert paths(dw_1d(16, 97, 3, 3, pad=1)) == line | {"dw_three_tap_pair"}  # a lone third
    assert paths(dw_1d(16, 97, 3, 2, pad=1)) == {"depthwise", "dw_three_tap",
                                                 "dw_three_tap_pair"}
    assert "dw_three_tap_line" not in paths(dw_config(8, 20, 30, 3, pad=1))  # 3x3
    for cfg in (dw_1d(16, 65, 3), dw_config(8, 9, 9, (1, 3)), dw_1d(16, 12, 3)):
        assert paths(cfg) == {"depthwise", "dw_few"}, cfg


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(line_layers(), min_size=8, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_m4_line_quads_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = []
    for cfg in cfgs:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, _bias(rng, cfg)))
    m4_convs_exact(lib, m4_build, "dw3_line", convs)
    m4_convs_exact(lib, m4_build, "dw3_line_off", convs, ("-DEB_OPT_NO_DW_THREE_TAP_LINE",))


@needs_m4
def test_m4_line_quads_at_the_limits(lib, m4_build):  # noqa: F811
    """Starts at and past the quads' limit, both forms, every input and weight at the
    extremes, on the M4: equal."""
    convs = []
    for s, act in ((1, 1), (8, 0), (9, 1), (16, 0)):
        cfg = dw_1d(2, 70, 3, pad=1, shift=-s, act=act, rounding=0)
        lim = _limit(s) - (1 << (s - 1))
        for wv in (-128, 127):
            convs.append((cfg, np.full((2, 1, 70), -128, dtype=np.int8),
                          np.full((2, 1, 1, 3), wv, dtype=np.int8),
                          np.array([lim, -lim - 1], dtype=np.int32)))
    m4_convs_exact(lib, m4_build, "dw3_line_limits", convs)

