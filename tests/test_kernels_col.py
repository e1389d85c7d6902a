"""The column kernels (eb_dw_opt.c, "column kernels"): layers with stride_w 1 or 2 and few
outputs per group -- depthwise with any channel multiplier and a kernel one column wide
(k_w == 1), grouped or dense with 1..4 output channels, any kernel width (a 1-D conv's row
kernel) and width padding (its edge outputs apart, eb_col_edge) -- summed from whole input
rows at the taps' offsets with a table of taps in the scratch. Drawn by hypothesis over
kernel heights 1..15, widths 1..5 and their dilations and padding, strides, dilations and
height padding (tap rows in the padding left out), odd widths (the scalar tail), stride 2
(words past the row end: pixels one at a time), every requantization (fast none/relu; abs,
left shifts, biases near the int32 limits: the generic stores) and wide outputs; on the
host (portable C) and on the Cortex-M4 under QEMU (the DSP intrinsics). Each layer's table
stays inside EB_CONV_OPT_SCRATCH (run_conv_pair checks nothing is written past the
claim)."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernels_dw_m4 import m4_run
from test_kernels_opt import (
    I8,
    I16,
    check_extremes,
    conv_out,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    params_of,
    ptr,
    run_conv_pair,
    scratch_buffer,
)
from test_kernels_opt_paths import check_conv

from edgebuild.core.geometry import Plane
from edgebuild.ops import column_copy, column_edge, column_rows, conv_path


@st.composite
def column_layers(draw, small: bool = False) -> dict:
    """A conv the column kernels take: depthwise (multiplier 1..4) k_h x 1, grouped or dense
    k_h x k_w with 1..4 outputs per group."""
    kind = draw(st.sampled_from(["depthwise", "grouped", "dense"]))
    groups = draw(st.integers(1, 3 if small else 5))
    cin_g = 1 if kind == "depthwise" else draw(st.integers(1 if kind == "grouped" else 2, 4))
    cout_g = draw(st.integers(1, 4))
    if kind == "dense":
        groups = 1
    k_h = draw(st.integers(1, 15))
    stride_h, stride_w = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    dil_h, pad_h = draw(st.integers(1, 3)), draw(st.integers(0, 8))
    shortest = max(1, dil_h * (k_h - 1) + 1 - 2 * pad_h)  # one output row
    in_h = shortest + draw(st.integers(0, 6 if small else 24))
    k_w = 1 if cin_g == 1 else draw(st.sampled_from([1, 1, 2, 3, 5]))
    dil_w = draw(st.integers(1, 3)) if k_w > 1 else 1
    pad_w = draw(st.integers(0, dil_w * (k_w - 1))) if k_w > 1 else 0
    span = dil_w * (k_w - 1) + 3 * stride_w + 1 + (24 if pad_w else 0)  # out_w >= 4
    in_w = draw(st.integers(span, span + (20 if small else 66)))
    cfg = {"in_c": groups * cin_g, "in_h": in_h, "in_w": in_w, "out_c": groups * cout_g,
           "k_h": k_h, "k_w": k_w, "stride_h": stride_h, "stride_w": stride_w,
           "pad_h": pad_h, "pad_w": pad_w, "dil_h": dil_h, "dil_w": dil_w, "groups": groups,
           "shift": draw(st.sampled_from([-1, -7, -9, -12, -20, 0, 2])),
           "rounding": draw(st.integers(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    cfg["out_h"] = conv_out(in_h, k_h, stride_h, pad_h, dil_h)
    cfg["out_w"] = conv_out(in_w, k_w, stride_w, pad_w, dil_w)
    assume(conv_path.column(_plane(cfg)))
    return cfg


def _plane(c: dict) -> Plane:
    return Plane(c["in_c"], c["in_h"], c["in_w"], c["out_c"], c["out_h"], c["out_w"], c["k_h"],
                 c["k_w"], c["stride_h"], c["stride_w"], c["pad_h"], c["pad_w"], c["dil_h"],
                 c["dil_w"], c["groups"])


@settings(max_examples=300, deadline=None)
@given(cfg=column_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_column_kernels_equal_reference(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


def test_column_kernels_extreme_sums(lib):  # noqa: F811
    """A dense 8 -> 2 15x1 layer (8 x 15 taps) on random data and at the largest sums, with
    biases so near the int32 limits that the rounding term cannot be folded in (the generic
    stores): equal."""
    cfg = {"in_c": 8, "in_h": 15, "in_w": 9, "out_c": 2, "k_h": 15, "k_w": 1, "stride_h": 1,
           "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 1,
           "out_h": 1, "out_w": 9, "rounding": 0}
    room = 8 * 15 * 128 * 128
    bias = np.array([2**31 - 1 - room, -2**31 + room], dtype=np.int32)
    check_extremes(lib, cfg, dw_data(cfg, np.random.default_rng(3)), bias)


def test_column_table_is_in_the_scratch(lib):  # noqa: F811
    """A dense 8 -> 1 k11x1 layer (no depthwise claim) writes its 88-tap table -- 8 bytes a
    tap -- into EB_CONV_OPT_SCRATCH and nothing past it."""
    cfg = {"in_c": 8, "in_h": 48, "in_w": 55, "out_c": 1, "k_h": 11, "k_w": 1, "stride_h": 2,
           "stride_w": 2, "pad_h": 5, "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 1,
           "shift": -9, "rounding": 1, "act": 1}
    cfg["out_h"], cfg["out_w"] = conv_out(48, 11, 2, 5, 1), conv_out(55, 1, 2, 0, 1)
    rng = np.random.default_rng(7)
    x, w = dw_data(cfg, rng)
    elements = lib.eb_test_conv_scratch(8, 11, 1)
    assert elements * 2 == 8 * ((88 + 3) & ~3)
    scratch = scratch_buffer(elements)
    out = np.zeros(cfg["out_h"] * cfg["out_w"], dtype=np.int8)
    lib.eb_conv2d_opt(ctypes.byref(params_of(cfg)), ptr(x, I8), ptr(w, I8), None,
                      ptr(out, I8), ptr(scratch, I16))
    written = scratch.view(np.uint8) != 0x5A
    assert written[:8 * 88].any() and not written[2 * elements:].any()
    ref, _ = run_conv_pair(lib, cfg, x, w, None, False)
    np.testing.assert_array_equal(out, ref)


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(column_layers(small=True), min_size=8, max_size=12),
       seed=st.integers(0, 2**32 - 1))
def test_m4_column_kernels_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "columns")


def _col(in_c: int, out_c: int, groups: int, in_h: int, in_w: int, k_h: int, stride: tuple,
         pad_h: int, dil_h: int, act: int, shift: int, k_w: int = 1, dil_w: int = 1,
         pad_w: int = 0) -> dict:
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c, "k_h": k_h, "k_w": k_w,
           "stride_h": stride[0], "stride_w": stride[1], "pad_h": pad_h, "pad_w": pad_w,
           "dil_h": dil_h, "dil_w": dil_w, "groups": groups, "shift": shift, "rounding": 1,
           "act": act}
    cfg["out_h"] = conv_out(in_h, k_h, stride[0], pad_h, dil_h)
    cfg["out_w"] = conv_out(in_w, k_w, stride[1], pad_w, dil_w)
    return cfg


# The M4's two-channel rows by hand (eb_col2_row_s1 / _s2): widths 4 (one block), 5, 7 and 9
# (a last block overlapping the one before) and 12, odd and even tap counts (entered at the
# loop's second tap), tap rows in the padding (fewer taps near the edges), relu and none,
# stride 1 and 2: depthwise with multiplier 2, dense 3 -> 2.
COL2_CASES = [
    _col(1, 2, 1, 18, 4, 14, (1, 1), 0, 1, 1, -9),
    _col(1, 2, 1, 7, 4, 1, (1, 1), 2, 1, 0, -7),
    _col(3, 2, 1, 6, 5, 2, (1, 1), 0, 1, 1, -12),
    _col(5, 2, 1, 7, 5, 1, (1, 1), 2, 1, 0, -9),  # (3 inputs: the few-input kernel)
    _col(3, 2, 1, 6, 7, 2, (1, 1), 0, 1, 0, -12),
    _col(1, 2, 1, 7, 7, 1, (1, 1), 2, 1, 1, -1),
    _col(3, 2, 1, 6, 9, 2, (1, 1), 0, 1, 1, -20),
    _col(1, 2, 1, 18, 12, 14, (1, 1), 0, 1, 0, -9),
    _col(1, 2, 1, 18, 7, 14, (1, 2), 0, 1, 1, -9),
    _col(1, 2, 1, 7, 7, 1, (2, 2), 0, 1, 0, -7),
    _col(3, 2, 1, 6, 9, 2, (1, 2), 0, 1, 1, -12),
    _col(3, 2, 1, 7, 13, 1, (1, 2), 0, 1, 0, -9),
    _col(3, 2, 1, 6, 17, 2, (1, 2), 0, 1, 0, -12),
    _col(1, 2, 1, 18, 23, 14, (1, 2), 0, 1, 1, -9),
    # a 1-D conv's row kernel (k_h = 1: 32 -> 2 k3), a 2-D one with rows in the padding
    _col(32, 2, 1, 1, 41, 1, (1, 1), 0, 1, 1, -12, k_w=3),
    _col(4, 2, 1, 1, 30, 1, (1, 2), 0, 1, 0, -9, k_w=5, dil_w=2),
    _col(10, 2, 1, 6, 11, 3, (1, 1), 1, 1, 1, -9, k_w=3),
    # width padding (its edge outputs apart): 1-D 24 -> 2 k5 p2, 2-D stride 2 (one each end)
    _col(24, 2, 1, 1, 40, 1, (1, 1), 0, 1, 1, -12, k_w=5, pad_w=2),
    _col(12, 2, 1, 5, 37, 2, (1, 2), 1, 1, 0, -9, k_w=3, pad_w=1),
    # ... of input channels no multiple of 4 (the edge outputs' loop takes 4 a pass)
    _col(11, 2, 1, 1, 40, 1, (1, 2), 0, 1, 0, -9, k_w=3, pad_w=1),
    # two channel pairs on the same taps (the second's weights rewritten in place): 10 x 5
    # taps, and 9 x 3 (an odd count: the last pair's second weight 0)
    _col(10, 4, 1, 1, 33, 1, (1, 1), 0, 1, 1, -9, k_w=5),
    _col(9, 4, 1, 1, 30, 1, (1, 1), 0, 1, 0, -12, k_w=3),
    # a pointwise conv of few outputs (and more inputs than the few-input kernel's), its
    # 9 x 7 plane one row (eb_col_flat)
    _col(6, 4, 1, 9, 7, 1, (1, 1), 0, 1, 1, -9),
]
# ... and one channel's (eb_col1_row_s1 / _s2): dense 8 -> 1 and 3 -> 1, depthwise 3 -> 3,
# with tap rows in the padding at stride 2 down the columns.
COL1_CASES = [
    _col(8, 1, 1, 8, 4, 2, (1, 1), 0, 1, 1, -12),
    _col(3, 3, 3, 9, 4, 5, (1, 1), 0, 1, 0, -7),  # (3 taps: the few-input kernel)
    _col(3, 1, 1, 9, 5, 3, (1, 1), 0, 1, 1, -9),
    _col(8, 1, 1, 8, 6, 2, (1, 1), 0, 1, 0, -12),
    _col(3, 3, 3, 9, 7, 3, (2, 1), 2, 1, 1, -9),
    _col(3, 1, 1, 9, 9, 3, (1, 1), 0, 1, 0, -20),
    _col(8, 1, 1, 8, 7, 2, (1, 2), 0, 1, 1, -12),
    _col(3, 1, 1, 9, 9, 3, (1, 2), 0, 1, 0, -9),
    _col(8, 1, 1, 8, 11, 2, (1, 2), 0, 1, 1, -12),
    _col(3, 3, 3, 9, 13, 3, (2, 2), 2, 1, 0, -7),
    _col(3, 3, 3, 9, 23, 3, (1, 2), 0, 1, 1, -9),
    _col(6, 1, 1, 1, 37, 1, (1, 1), 0, 1, 0, -12, k_w=4),
    _col(27, 3, 3, 5, 21, 2, (2, 2), 1, 1, 1, -9, k_w=3, dil_w=2),
    # width padding, dilated; a grouped 1x1 (48 -> 2 g2: no pointwise kernel takes it)
    _col(24, 1, 1, 1, 60, 1, (1, 2), 0, 1, 1, -9, k_w=3, dil_w=2, pad_w=2),
    _col(7, 1, 1, 3, 30, 1, (1, 1), 0, 1, 1, -9, k_w=5, pad_w=2),
    _col(48, 2, 2, 2, 29, 1, (1, 1), 0, 1, 0, -9),
    # 6 of a row's 41 outputs in the width padding (more than an eighth, at most a quarter:
    # 32 -> 1 1x8 p3 had run im2col at 4.8 insn/MAC)
    _col(32, 1, 1, 2, 42, 1, (1, 1), 0, 1, 1, -9, k_w=8, pad_w=3),
    _col(5, 1, 1, 3, 3, 1, (1, 1), 0, 1, 1, -7),  # 5 -> 1 1x1 on 3-wide rows: 9 as one row
    # rows of 4 n + 1 and 4 n + 2 outputs: their last block of 2 pixels (stepping back over
    # 1 or none), odd and even tap pair counts, rows in the padding, stride 1 and 2 (seed
    # 32's 8 -> 1 5x1 stride 2 on 12-wide rows: 6 outputs a row)
    _col(8, 1, 1, 8, 10, 3, (1, 1), 1, 1, 1, -9),
    _col(5, 1, 1, 9, 13, 2, (1, 1), 0, 1, 0, -9),
    _col(10, 2, 2, 9, 9, 5, (1, 1), 2, 1, 0, -7),
    _col(8, 1, 1, 20, 12, 5, (2, 2), 2, 1, 1, -9),
    _col(3, 1, 1, 9, 17, 3, (1, 2), 0, 1, 1, -9),
    _col(7, 1, 1, 12, 19, 4, (2, 2), 3, 1, 0, -12),
    _col(2, 2, 2, 11, 58, 12, (2, 2), 5, 1, 1, -9),
]

# ... and one channel's rows two at a time (eb_col1_rows2_s1 / _s2): 8 -> 1 11x1 stride 2 on
# 5-wide rows (seed 32's, odd width: the last block steps back), depthwise 12x1 stride 2
# (an odd record count), 15x1 at stride 1 (dense 1 -> 1, padded, depthwise of 3 channels on
# odd and even widths), dilation 2 at stride 2 (the rows one kernel row apart), dense
# 12 -> 3 11x3 (the third channel alone: the first two a pair) and 10 -> 1, grouped, rows of
# 4 outputs; rows in the padding (each pair's union cut to the input: a table of its own),
# a pair whose first row has no tap inside (9 -> 1 11x1 pad 12) and pairs whose rows both
# have none (pad 16: the one-row path's biases), an odd count of rows (the last one alone).
ROWS2_CASES = [
    _col(9, 1, 1, 24, 9, 11, (2, 2), 12, 1, 1, -9),
    _col(9, 1, 1, 9, 9, 11, (2, 2), 16, 1, 0, -7),
    _col(8, 1, 1, 30, 9, 11, (2, 2), 5, 1, 1, -9),
    _col(3, 3, 3, 30, 33, 12, (2, 2), 5, 1, 0, -7),
    _col(1, 1, 1, 30, 20, 15, (1, 1), 0, 1, 0, -12),
    _col(1, 1, 1, 30, 21, 15, (1, 1), 3, 1, 1, -12),
    _col(3, 3, 3, 30, 19, 15, (1, 1), 0, 1, 1, -9),
    _col(4, 1, 1, 24, 10, 5, (2, 2), 2, 2, 1, -9),
    _col(12, 3, 1, 30, 13, 11, (2, 2), 0, 1, 1, -9, k_w=3),
    _col(10, 1, 1, 30, 13, 11, (2, 2), 0, 1, 0, -9, k_w=3),
    _col(6, 3, 3, 24, 9, 11, (2, 2), 1, 1, 1, -12),
    _col(5, 1, 1, 14, 7, 5, (1, 2), 0, 1, 0, -9),
]

# The column kernels over a copy (eb_colc_layer, "dw_column_copy"): strides 1 and 2 along the
# rows (the copy's phases), odd and even input counts a group (a pair with zeros), 1..4
# outputs a group, grouped, tap rows in the height padding, width padding of odd and even
# pixels, dilation 2 along the rows, row widths of every remainder (the last block stepping
# back), relu and none -- each checked to take the copy.
COPY_CASES = [
    _col(32, 1, 1, 2, 42, 1, (1, 1), 0, 1, 1, -9, k_w=8, pad_w=3),
    _col(2, 1, 1, 2, 17, 1, (1, 1), 0, 1, 0, -7, k_w=2, pad_w=1, dil_w=2),
    _col(2, 4, 1, 1, 13, 1, (2, 1), 0, 1, 0, -7, k_w=2, pad_w=1),
    _col(2, 3, 1, 1, 41, 1, (2, 2), 0, 1, 0, -12, k_w=2, pad_w=1),
    _col(2, 1, 1, 1, 37, 1, (2, 2), 0, 1, 0, -7, k_w=7, pad_w=4),
    _col(3, 1, 1, 2, 19, 1, (1, 1), 0, 1, 0, -7, k_w=5, pad_w=2),
    _col(5, 1, 1, 1, 46, 1, (2, 2), 0, 1, 0, -7, k_w=9, pad_w=6),
    _col(16, 8, 2, 2, 60, 1, (2, 2), 0, 1, 0, -9, k_w=5, pad_w=4),
    _col(6, 2, 1, 10, 21, 3, (1, 2), 2, 1, 1, -12, k_w=3, pad_w=2),
    _col(12, 3, 3, 9, 37, 3, (1, 1), 0, 1, 1, -9, k_w=2, pad_w=1),
    _col(24, 2, 2, 1, 27, 2, (1, 1), 1, 1, 0, -9, k_w=5, pad_w=2),
    _col(6, 3, 1, 5, 51, 3, (2, 2), 2, 1, 1, -9, k_w=3, pad_w=2),
    _col(4, 3, 1, 4, 59, 3, (2, 2), 1, 1, 1, -9, k_w=7, pad_w=2, dil_w=2),
    _col(11, 3, 1, 4, 29, 1, (2, 1), 0, 1, 1, -9, k_w=5, pad_w=2),
    _col(3, 3, 1, 16, 51, 3, (2, 2), 1, 1, 1, -9, k_w=3, pad_w=1),
]
# ... and rows too much in the width padding for the tap pairs (eb_col_edges_fit), which the
# column kernels take only over the copy: 8 of 19 outside, 4 of 8 (5x5, grouped), none
# inside at all (a kernel wider than the row), stride 2 with 4 of 11 and 12 outside.
COPY_ONLY_CASES = [
    _col(32, 2, 1, 5, 19, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4),
    _col(24, 4, 2, 4, 8, 5, (1, 1), 2, 1, 0, -9, k_w=5, pad_w=2),
    _col(16, 1, 1, 1, 6, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4),
    _col(8, 2, 1, 2, 5, 1, (1, 1), 0, 1, 0, -9, k_w=7, pad_w=3),
    _col(16, 2, 1, 3, 21, 3, (2, 2), 1, 1, 0, -9, k_w=7, pad_w=3),
    _col(12, 3, 1, 4, 23, 3, (2, 2), 1, 1, 1, -9, k_w=9, pad_w=4),
]

# ... and rows of one output a group more in the width padding than the share where the tap
# pairs and eb_col_edge beat the GEMM (eb_col_edge_beats_gemm; copies past its cap):
# stride 2 and 1, dilation 2 (eb_col_edge's tap loop), kernel rows of 2..9 taps inside the
# input (its words, their last 1..3, a byte at a time).
EDGE_CASES = [
    _col(8, 1, 1, 40, 17, 9, (2, 2), 4, 1, 1, -9, k_w=9, pad_w=4),
    _col(8, 1, 1, 48, 12, 7, (1, 1), 3, 1, 0, -9, k_w=7, pad_w=3),
    _col(8, 1, 1, 40, 20, 3, (1, 1), 1, 1, 1, -9, k_w=5, dil_w=2, pad_w=4),
    _col(32, 1, 1, 24, 10, 3, (1, 1), 1, 1, 1, -9, k_w=7, pad_w=5),
]


def test_col_cases_take_the_column_kernels():
    for c in COL2_CASES + COL1_CASES:
        assert "dw_column" in conv_path.kernel_choice(_plane(c)), c
    for c in ROWS2_CASES:
        assert "dw_column_rows2" in conv_path.kernel_choice(_plane(c)), c
        assert column_rows.elements(_plane(c)) > 0
    for c in COPY_CASES + COPY_ONLY_CASES:
        assert "dw_column_copy" in conv_path.kernel_choice(_plane(c)), c
        assert conv_path.copy_claim(_plane(c), False)[1] > 0
    for c in COPY_ONLY_CASES:
        p = _plane(c)
        first, end = conv_path.column_inside(p)
        assert not conv_path.edges_fit(p, end - first), c


def test_rows_only_a_copy_takes_fall_through_exact_elsewhere(lib):  # noqa: F811
    """Where the copy is not linked (the host: no M4 assembly) or a channel's mode is not
    its, eb_col_layer declines a row the tap pairs do not take (returns 0, nothing written),
    and the next path runs it exact."""
    for i, cfg in enumerate(COPY_ONLY_CASES):
        check_conv(lib, cfg, 40 + i, i % 2 == 0)


def test_rows_in_the_padding_only_over_a_copy_that_beats_the_gemm():
    """eb_colc_beats_gemm's twin: a row too much in the width padding for the tap pairs
    goes to the column kernels only over the copy, and only where the copy's estimate is
    below the GEMM's -- 32 -> 2 1x9 pad 4 on 19-wide rows (8 outside) 2.26 -> 1.45 insn/MAC
    over it (seed 11's s012); 96 -> 4 k9 pad 4 on 9 samples (its 432 records an output
    channel for 9 outputs) ran 15 % more instructions over it: the GEMM; a copy past its
    cap: the GEMM."""
    def paths(cfg):
        return conv_path.kernel_choice(_plane(cfg))
    assert "dw_column_copy" in paths(COPY_ONLY_CASES[0])
    assert paths(_col(96, 4, 1, 1, 9, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4)) == {"im2col"}
    assert not conv_path.copy_beats_gemm(
        _plane(_col(96, 4, 1, 1, 9, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4)))
    wide = _col(256, 2, 1, 5, 19, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4)
    assert column_copy.size(_plane(wide))[2] * 4 > column_copy.COPY_BYTES
    assert paths(wide) == {"im2col"}


def test_copy_only_where_it_gains():
    """eb_colc_gains's twin: a padded row's edge outputs (by tap pairs three times an
    inside one and eb_col_edge's loops) and few uses of a value (the copy's 6.5
    instructions a word) weigh the choice, in instructions and cycles -- a 1-D 32 -> 1 1x8
    with 6 of 41 outputs in the padding takes the copy (2.45 -> 1.70 insn/MAC, 3.36 -> 3.02
    cycles), 96 -> 1 k5 pad 2 does not (7 % fewer instructions, 14 % more cycles), nor the
    same unpadded with 4 groups of 32 -> 1 k5 (2.13 on the tap pairs, 2.60 over the copy),
    nor a 1x1 (one use of a value), nor a copy past its cap, nor an unpadded conv or a tiled
    pass (whose tiles come unpadded: no claim), nor one input a group (a depthwise layer: no
    channel pairs)."""
    claim = conv_path.copy_claim
    assert claim(_plane(COPY_CASES[0]), False)[0] is not None
    assert claim(_plane(_col(96, 1, 1, 1, 40, 1, (1, 1), 0, 1, 1, -9, k_w=5, pad_w=2)),
                 False)[0] is None
    assert claim(_plane(_col(128, 4, 4, 1, 24, 1, (1, 1), 0, 1, 1, -9, k_w=5)), False)[1] == 0
    assert claim(_plane(_col(8, 2, 1, 9, 40, 1, (1, 1), 0, 1, 1, -9)), False)[1] == 0
    big = _col(256, 1, 1, 4, 40, 1, (1, 1), 0, 1, 1, -9, k_w=5, pad_w=2)
    assert conv_path.column(_plane(big)) and column_copy.size(_plane(big))[2] * 4 > \
        column_copy.COPY_BYTES and claim(_plane(big), False)[1] == 0
    assert claim(_plane(COPY_CASES[0]), True) == (None, 0)  # a tiled pass: unpadded tiles
    unpadded = _plane(_col(32, 1, 1, 2, 42, 1, (1, 1), 0, 1, 1, -9, k_w=8))
    assert conv_path.column(unpadded) and claim(unpadded, False)[1] == 0


def test_rows_two_at_a_time_only_where_the_union_gains():
    """eb_col_rows2_gains's twin: a kernel at most its stride tall shares no rows (its
    records cost more than one row's pairs), a stride down the columns no multiple of the
    dilation puts the rows' taps on different grids, a record's cycles must gain too (an
    8 -> 1 7x1 stride 2 ran 10 % fewer instructions two rows at a time but 3.7 % more
    cycles; 9x1 2.8 % fewer), and a channel pair's rows (an even count of outputs a group)
    have their own kernel."""
    assert not column_rows.gains(_plane(_col(8, 1, 1, 30, 9, 2, (2, 2), 0, 1, 1, -9)))
    assert not column_rows.gains(_plane(_col(4, 1, 1, 24, 10, 5, (3, 2), 0, 2, 1, -9)))
    assert not column_rows.gains(_plane(_col(8, 1, 1, 40, 40, 7, (2, 2), 3, 1, 1, -9)))
    assert column_rows.gains(_plane(_col(8, 1, 1, 40, 40, 9, (2, 2), 4, 1, 1, -9)))
    assert column_rows.gains(_plane(_col(8, 2, 1, 30, 9, 11, (2, 2), 5, 1, 1, -9)))
    assert not column_rows.takes(_plane(_col(8, 2, 1, 30, 9, 11, (2, 2), 5, 1, 1, -9)))
    assert {c["out_c"] // c["groups"] for c in COL2_CASES} == {2, 4}
    assert {c["out_c"] // c["groups"] for c in COL1_CASES} == {1}


def test_width_padding_share_by_outputs_a_group():
    """A row with width padding goes to the column kernels with up to a quarter of its
    outputs outside for one output a group (the GEMM would serve one dot product a pixel),
    a sixth for more: 96 -> 3 k3 pad 1 on an 11-wide row (2 of 11 outside) ran 2.28
    insn/MAC on the GEMM and 4.79 on the column kernels; 32 -> 1 1x8 pad 3 (6 of 41) 4.83
    on the GEMM, 2.85 on them; 48 -> 64 3x3 dilation 2 g16 (4 of 31) 2.91, 1.83."""
    def paths(cfg):
        return conv_path.kernel_choice(_plane(cfg))
    assert "dw_column" in paths(_col(32, 1, 1, 2, 42, 1, (1, 1), 0, 1, 1, -9, k_w=8, pad_w=3))
    assert "dw_column" not in paths(_col(96, 3, 1, 1, 11, 1, (1, 1), 0, 1, 1, -9, k_w=3,
                                         pad_w=1))
    assert "dw_column" not in paths(_col(192, 8, 2, 1, 21, 1, (1, 1), 0, 1, 1, -9, k_w=5,
                                         pad_w=2))
    assert "dw_column" in paths(_col(96, 3, 1, 1, 21, 1, (1, 1), 0, 1, 1, -9, k_w=3, pad_w=1))
    grouped = _col(48, 64, 16, 20, 31, 3, (1, 1), 2, 2, 1, -9, k_w=3, dil_w=2, pad_w=2)
    assert "dw_column" in paths(grouped)  # 4 of 31 outside, 4 outputs a group


def test_rows_mostly_in_the_padding_where_the_gemm_would_cost_more(lib):  # noqa: F811
    """One output a group of several inputs: the column kernels take rows more in the width
    padding than the quarter (eb_col_edge for the outputs outside) where their estimate beats
    the GEMM's by a third (ops.column_edge.beats_gemm); with several outputs a group, or a
    layer whose GEMM costs less, the share stays the rule; exact on the host."""
    for i, c in enumerate(EDGE_CASES):
        p = _plane(c)
        first, end = conv_path.column_inside(p)
        assert 4 * (p.out_w - (end - first)) > p.out_w, c  # past the share
        assert "dw_column" in conv_path.kernel_choice(p), c
        assert not conv_path.copy_taken(p), c  # (eb_col_edge's outputs, not the copy's)
        check_conv(lib, c, 60 + i, i % 2 == 0)
    two = _plane(_col(8, 2, 1, 9, 17, 9, (2, 2), 4, 1, 1, -9, k_w=9, pad_w=4))
    assert not column_edge.edges_fit(two, 5)  # two outputs: the share
    cheap = _plane(_col(96, 1, 1, 1, 9, 1, (1, 1), 0, 1, 1, -9, k_w=9, pad_w=4))
    assert not column_edge.beats_gemm(cheap, *column_edge.column_inside(cheap))

def test_pointwise_of_few_inputs_and_outputs_takes_the_column_kernels():
    """A dense 1x1 conv of 5..8 inputs and at most 4 outputs runs on the column kernels over
    its plane as one row (eb_col_flat), of 2..4 inputs and any outputs on the few-input
    kernel (a plane of 3 pixels too) where a form of it requantizes, else on the column
    kernels for at most 4 outputs; with more of either, on the pointwise kernels."""
    def pw(in_c: int, out_c: int, h: int = 9, w: int = 7) -> Plane:
        return _plane(_col(in_c, out_c, 1, h, w, 1, (1, 1), 0, 1, 1, -9))
    assert conv_path.pointwise_column(pw(3, 1)) and conv_path.pointwise_column(pw(8, 4))
    assert conv_path.pointwise_column(pw(3, 2, 3, 3))  # rows of 3 pixels: 9 as one
    assert not conv_path.pointwise_column(pw(9, 4)) and not conv_path.pointwise_column(pw(5, 5))
    assert conv_path.pointwise_column(pw(3, 5)) and conv_path.pointwise_column(pw(4, 64))
    assert not conv_path.pointwise_column(pw(3, 5), forms=False)
    assert conv_path.pointwise_column(pw(3, 4), forms=False)  # the column kernels
    assert "dw_column" in conv_path.kernel_choice(pw(8, 4))
    assert conv_path.pointwise_column(pw(3, 2, 1, 3))  # 3 pixels in all
    assert not conv_path.pointwise_column(pw(6, 2, 1, 3))
    assert "dw_few" in conv_path.kernel_choice(pw(3, 1, 1, 3))
    assert "dw_few" in conv_path.kernel_choice(pw(4, 3))


def test_multiplier_one_long_rows_leave_the_tile():
    """A k x 1 depthwise of multiplier 1 goes to the column kernels (their one-channel rows
    pair taps) on rows of 16 outputs or more, and stays on the tile kernel's turned frame on
    shorter rows (a row's set-up outweighs the pairs) or with a multiplier (its fan)."""
    long = _col(3, 3, 3, 12, 20, 6, (1, 1), 2, 1, 1, -9)
    short = _col(3, 3, 3, 12, 15, 6, (1, 1), 2, 1, 1, -9)
    fan = _col(3, 6, 3, 12, 20, 6, (1, 1), 2, 1, 1, -9)
    assert "dw_column" in conv_path.kernel_choice(_plane(long))
    assert "dw_tile" in conv_path.kernel_choice(_plane(short))
    assert "dw_tile" in conv_path.kernel_choice(_plane(fan))


@needs_m4
def test_m4_column_rows_by_hand_equal_reference(lib, m4_build):  # noqa: F811
    m4_run(lib, COL2_CASES + COL1_CASES + EDGE_CASES, 32, m4_build, "columns_asm")


@needs_m4
def test_m4_column_kernels_over_a_copy_equal_reference(lib, m4_build):  # noqa: F811
    """The copy and the records stay inside the claim (ops.column_copy: the guard after
    it)."""
    m4_run(lib, COPY_CASES + COPY_ONLY_CASES, 11, m4_build, "columns_copy")


@needs_m4
def test_m4_column_rows_two_at_a_time_equal_reference(lib, m4_build):  # noqa: F811
    """The records stay inside the claim (ops.column_rows.elements: the guard after it)."""
    m4_run(lib, ROWS2_CASES, 7, m4_build, "columns_rows2")


@st.composite
def pair_layers(draw) -> dict:
    """A depthwise layer the tile kernel takes with a channel multiplier of 2..4 (one input
    channel too: a first layer), output channels run two at a time: kernels 1..7 x 2..7,
    strides 1..3 (2 and others), dilation, padding, small maps."""
    in_c, m = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    k_h, k_w = draw(st.integers(1, 7)), draw(st.integers(2, 7))
    stride_h, stride_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dil_h, dil_w = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pad_h, pad_w = draw(st.integers(0, k_h)), draw(st.integers(0, k_w))
    in_h = max(1, dil_h * (k_h - 1) + 1 - 2 * pad_h) + draw(st.integers(0, 12))
    in_w = max(1, dil_w * (k_w - 1) + 1 - 2 * pad_w) + draw(st.integers(0, 30))
    assume(not (k_h == 3 and k_w == 3))  # the 3-tap kernels' layers
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": m * in_c, "k_h": k_h,
           "k_w": k_w, "stride_h": stride_h, "stride_w": stride_w, "pad_h": pad_h,
           "pad_w": pad_w, "dil_h": dil_h, "dil_w": dil_w, "groups": in_c,
           "shift": draw(st.sampled_from([-1, -7, -9, -12, 0, 2])),
           "rounding": draw(st.integers(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    cfg["out_h"] = conv_out(in_h, k_h, stride_h, pad_h, dil_h)
    cfg["out_w"] = conv_out(in_w, k_w, stride_w, pad_w, dil_w)
    return cfg


@settings(max_examples=200, deadline=None)
@given(cfg=pair_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_tile_pairs_equal_reference(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(pair_layers(), min_size=8, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_m4_tile_pairs_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    """The pair loop is inline assembly on the M4 (stride 1 and 2; other strides and a single
    tap pair take the one-channel loop)."""
    m4_run(lib, cfgs, seed, m4_build, "tile_pairs")
