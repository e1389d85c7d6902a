"""The depthwise 3x3 padded path (eb_dw_opt.c: each channel copied with its padding into a
stack buffer, then columns of pixel pairs, two output rows per step) on hypothesis-drawn
shapes, on the host (portable C: the column loop's C twin) and on the Cortex-M4 under QEMU,
where the column loop is hand-scheduled inline assembly (eb_dw3_band_asm) that the host
never runs. 3x3, stride and dilation 1, pad_h and pad_w 0..3, odd and even sizes (an odd
width or height: the last pair overlaps), planes small enough for one band and planes so
wide or tall that the buffer takes them in bands of rows (odd heights: the last band
overlaps), channel multipliers, both fast requantizations (act none, relu) and the generic
ones (abs, left shifts: the row kernels; packed weights: tests/test_packing.py). Each M4
example is one firmware of several layers, each compared with the reference kernel. On the M4
a band whose right shift is 0..16 shifts by an immediate (8 or 16; its weights and start
scaled) unless its start could then overflow: starts either side of that limit, with the
largest sums, are checked, and the immediate form's speed."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernels_opt import (
    assert_conv_opt_exact,
    conv_out,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    m4_instructions,
    needs_m4,
    random_bias,
)

from edgebuild.ops import dw_spec

EB_DW_PAD_BYTES = dw_spec.DW_PAD_BYTES  # eb_kernels_opt.h: the padded path's buffer


def bands(cfg: dict) -> int:
    """Output rows per band of the padded path (as eb_dw3_band computes it)."""
    row = cfg["in_w"] + cfg["pad_w"]
    return ((EB_DW_PAD_BYTES - cfg["pad_w"]) // row - 2) & ~1


@st.composite
def column_layers(draw, wide: bool = False) -> dict:
    """A 3x3 stride-1 depthwise layer; `wide`: planes up to 120 x 40 (banded)."""
    in_h = draw(st.integers(1, 40 if wide else 14))
    in_w = draw(st.integers(4, 120 if wide else 21))
    in_c, m = draw(st.integers(1, 3 if wide else 5)), draw(st.integers(1, 3))
    pad_h, pad_w = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    assume(conv_out(in_h, 3, 1, pad_h, 1) >= 1)
    act = draw(st.sampled_from([0, 1, 1, 2]))
    shift = draw(st.sampled_from([-1, -7, -8, -9, -12, -16, -17, 0, 2]))
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": m * in_c, "k_h": 3, "k_w": 3,
           "stride_h": 1, "stride_w": 1, "pad_h": pad_h, "pad_w": pad_w, "dil_h": 1,
           "dil_w": 1, "groups": in_c, "shift": shift, "rounding": draw(st.integers(0, 1)),
           "act": act}
    cfg["out_h"] = conv_out(in_h, 3, 1, pad_h, 1)
    cfg["out_w"] = conv_out(in_w, 3, 1, pad_w, 1)
    return cfg


@settings(max_examples=200, deadline=None)
@given(cfg=column_layers(wide=True), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_dw3_padded_equals_reference(lib, cfg, seed, with_bias):  # noqa: F811
    assert_conv_opt_exact(lib, cfg, seed, with_bias)


def test_dw3_banded_shapes_are_drawn():
    """The wide strategy's range reaches several bands and odd band tails."""
    assert bands({"in_w": 120, "pad_w": 3}) == 14  # 40 rows: 3 bands, the last of 12
    assert bands({"in_w": 21, "pad_w": 1}) >= 38


def m4_run(lib, cfgs, seed: int, build, name: str) -> None:  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = []
    for cfg in cfgs:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, random_bias(rng, cfg["out_c"])))
    m4_convs_exact(lib, build, name, convs)


@needs_m4
@settings(max_examples=4, deadline=None)
@given(cfgs=st.lists(column_layers(), min_size=6, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_m4_dw3_columns_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "dw3_columns")


@needs_m4
@settings(max_examples=2, deadline=None)
@given(cfgs=st.lists(column_layers(wide=True), min_size=3, max_size=4),
       seed=st.integers(0, 2**32 - 1))
def test_m4_dw3_bands_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "dw3_bands")


def _band(sh: int, act: int = 0, in_c: int = 8, hw: int = 6) -> dict:
    """A 3x3 pad-1 depthwise layer on hw x 10 (or hw x hw) that the padded path takes in one
    band."""
    w = 10 if hw == 6 else hw
    cfg = {"in_c": in_c, "in_h": hw, "in_w": w, "out_c": in_c, "k_h": 3, "k_w": 3,
           "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1, "dil_w": 1,
           "groups": in_c, "shift": -sh, "rounding": 1, "act": act}
    cfg["out_h"], cfg["out_w"] = hw, w
    assert bands(cfg) >= hw
    return cfg


def limit_case(cfg: dict, pairs: int, sign: int, starts) -> tuple:
    """cfg with every sum the largest of its sign (x = -128, w = -128 or 127) and its biases
    around the limit of a scaled start, lim = eb_dw_imm_limit(pairs, c - s) (INT32_MAX less
    2 pairs x 2^22, shifted by c - s): the starts (bias + 2^(s - 1)) `starts(lim)`, a value
    of magnitude 5 or less taken as the bias itself. A start scaled past the limit would
    overflow its sum and saturate the wrong way."""
    sh = -cfg["shift"]
    c = 8 if sh <= 8 else 16
    lim = (2**31 - 1 - (2 * pairs << 22)) >> (c - sh)
    half = 1 << (sh - 1)
    bias = np.array([sign * (v - half) if v > 5 else v for v in starts(lim)], dtype=np.int64)
    x = np.full((cfg["in_c"], cfg["in_h"], cfg["in_w"]), -128, dtype=np.int8)
    w = np.full((cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"]),
                -128 if sign > 0 else 127, dtype=np.int8)
    return cfg, x, w, bias.astype(np.int32)


def band_limit_case(sh: int, sign: int) -> tuple:
    """A band's starts one apart at the limit of 9 products (5 pairs), then to twice it; 144
    outputs a channel (eb_dw3_padded scales from 48)."""
    return limit_case(_band(sh, hw=12), 5, sign,
                      lambda lim: [lim - 1, lim, lim + 1, lim + 7, 2 * lim, lim * 3 // 2, 5, -5])


@needs_m4
def test_m4_band_starts_at_the_limit_equal_reference(lib, m4_build):  # noqa: F811
    convs = [band_limit_case(sh, sign) for sh in (1, 8, 9, 16) for sign in (1, -1)]
    m4_convs_exact(lib, m4_build, "dw3_band_limits", convs)


def shift_count(lib, build, name: str, cfg: dict) -> int:  # noqa: F811
    """The instructions of a firmware of the one layer cfg (seeded data, zero biases), run
    exact: the instruction counts the immediate-shift tests compare between shifts."""
    x, w = dw_data(cfg, np.random.default_rng(3))
    zero = np.zeros(cfg["out_c"], np.int32)
    return m4_instructions(build, m4_convs_exact(lib, build, f"{name}{-cfg['shift']}",
                                                 [(cfg, x, w, zero)]))


@needs_m4
def test_m4_bands_shift_by_an_immediate(lib, m4_build):  # noqa: F811
    """A band at a right shift of 7 (the immediate form) runs fewer instructions than the same
    layer at 17 (no immediate: an ASR by the shift in a register before each saturation)."""
    counts = {sh: shift_count(lib, m4_build, "dw3_band_imm", _band(sh, act=1, in_c=4, hw=20))
              for sh in (7, 17)}
    assert counts[7] <= counts[17] - 4 * 400 // 2, counts  # 4 x 400 narrow outputs
