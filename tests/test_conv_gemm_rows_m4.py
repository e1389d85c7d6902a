"""The im2col/GEMM convolution's hand-written Cortex-M4 row functions (eb_kernels_opt.c:
eb_gemm4_relu / eb_gemm4_none, the whole row loop of a 4-pixel block in assembly, and
EB_GEMM_ROW_ASM, a row's weight words for the other modes) against the reference kernels
under QEMU, on hypothesis-drawn layers: the host never runs that code (portable C).

Each example is one firmware of several dense or grouped convs (the strategies of
tests/test_conv_gemm_opt.py and tests/test_conv_gemm_m4.py: 1-D and 2-D, odd channel counts,
strides, padding, dilation, groups, so K % 4 = 0..3 and any number of whole weight words),
each compared with eb_conv2d / eb_conv2d_wide; the bias random, absent, or near the int32
limits on some rows only (the assembly stops at such a row and the C loop takes the rest;
tests/test_conv_gemm_m4.py has layers with every row so)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv_gemm_m4 import wide_convs
from test_conv_gemm_opt import gemm_convs
from test_kernels_opt import (
    build_m4,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    random_bias,
    run_qemu,
)


def assert_m4_exact(library, build, name: str, convs: list) -> None:
    """The convs as one M4 firmware under QEMU: every call equal to the reference kernel's."""
    elf = build_m4(build, name, m4_test_program(library, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


def case_bias(rng, cfg: dict, kind: str) -> np.ndarray | None:
    """Random, none, or random with a few rows near the int32 limit (exact rows)."""
    if kind == "none":
        return None
    bias = random_bias(rng, cfg["out_c"])
    if kind == "random" or bias is None:
        return bias
    k = cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"]
    top = 2**31 - 1 - k * 16384
    rows = rng.integers(cfg["out_c"], size=max(1, cfg["out_c"] // 3))
    bias[rows] = rng.integers(top - 2**12, top, size=rows.size)
    return bias


@needs_m4
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(cfgs=st.lists(st.one_of(wide_convs(), gemm_convs()), min_size=6, max_size=10),
       seed=st.integers(0, 2**32 - 1),
       kinds=st.lists(st.sampled_from(["random", "random", "none", "extreme"]), min_size=10,
                      max_size=10))
def test_m4_gemm_rows_equal_reference(lib, m4_build, cfgs, seed, kinds):  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = []
    for cfg, kind in zip(cfgs, kinds[:len(cfgs)], strict=True):
        x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
        w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                 cfg["k_w"]))
        convs.append((cfg, x, w, case_bias(rng, cfg, kind)))
    assert_m4_exact(lib, m4_build, "gemm_rows", convs)


def _two_pixel_layer(in_c: int, k_w: int, out_c: int, in_h: int, act: int, groups: int = 1):
    """A dense (or grouped) 1 x k_w conv whose out_h x 2 (or x 6) outputs end in a block of 2
    pixels: in_w = k_w + 1, so each output row is 2 wide (in_h odd: 2 mod 4 in all)."""
    return {"in_c": in_c, "in_h": in_h, "in_w": k_w + 1, "out_c": out_c, "out_h": in_h,
            "out_w": 2, "k_h": 1, "k_w": k_w, "stride_h": 1, "stride_w": 1, "pad_h": 0,
            "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": groups, "shift": -9,
            "rounding": 0, "act": act}


@needs_m4
def test_m4_two_pixel_rows_equal_reference(lib, m4_build):  # noqa: F811
    """eb_gemm22_relu / _none (blocks of exactly 2 pixels, two rows at a time): K % 4 = 0..3
    and 1..7 whole weight words beside longer rows, even and odd row counts (the last row
    alone through eb_gemm2_*), grouped rows, and exact rows (bias near the int32 limit) as
    the first or the second row of a pair -- where the pair loop must stop
    (the C loop then takes the rest from the right row)."""
    rng = np.random.default_rng(22)
    convs = []
    shapes = [(4, 1, 1), (1, 5, 2), (3, 3, 5), (2, 3, 8), (5, 7, 7), (24, 13, 6), (7, 5, 3),
              (16, 13, 4), (9, 3, 9)]
    for i, (in_c, k_w, out_c) in enumerate(shapes):
        for act in (0, 1):
            cfg = _two_pixel_layer(in_c, k_w, out_c, in_h=1 + 2 * (i % 2), act=act)
            x = int8_data(rng, (in_c, cfg["in_h"], cfg["in_w"]))
            w, _ = int_weights(rng, (out_c, in_c, 1, k_w))
            bias = rng.integers(-2**16, 2**16, size=out_c).astype(np.int32)
            if i % 3 == 2:  # an exact row, a pair's second (row 1) or first (row 2): with
                # the rounding addend (half up) its sum overflows int32 unless computed
                # exactly (inputs and weights -128); the rows before it run in the pair loop,
                # from it on the C loop
                exact = [1 + act]
                bias[exact] = 2**31 - 1 - in_c * k_w * 16384 - 5
                w[exact] = -128
                x[:] = -128
            convs.append((cfg, x, w, bias))
    grouped = _two_pixel_layer(6, 5, 8, in_h=1, act=1, groups=2)
    convs.append((grouped, int8_data(rng, (6, 1, 6)), int_weights(rng, (8, 3, 1, 5))[0],
                  rng.integers(-2**12, 2**12, size=8).astype(np.int32)))
    assert_m4_exact(lib, m4_build, "gemm_2px", convs)


# (in_c, k_w) whose K = in_c * k_w has every (whole words % 4, K % 4): the word
# EB_GEMM_PASSES enters its first pass at, and the tail word, in each combination; more than
# 8 input channels and 4 outputs, so that neither the tile kernel (eb_dw_group_claims) nor
# the column kernels (eb_col_fits) take the conv
_PASS_ENTRIES = [(16, 2), (11, 3), (9, 2), (17, 3), (10, 2), (23, 3), (11, 2), (13, 3),
                 (12, 2), (19, 3), (13, 2), (9, 3), (14, 2), (15, 3), (15, 2), (21, 3)]


def test_pass_entries_cover_every_word_and_tail():
    seen = {((a * b >> 2) % 4, a * b % 4) for a, b in _PASS_ENTRIES}
    assert seen == {(w, t) for w in range(4) for t in range(4)}


@needs_m4
def test_m4_gemm_pass_entries_equal_reference(lib, m4_build):  # noqa: F811
    """eb_gemm4_* / eb_gemm2_* enter a row's first pass of 4 weight words by a TBB at the
    word that leaves the rest whole passes: K of every whole-word count mod 4 and every tail,
    in 1-D convs whose blocks of 4 pixels read inside the input (the direct columns) and the
    padding (through T), a last block of 1 or 2 pixels, both modes, and a row near the int32
    limit in a block's middle (the asm rows stop there; eb_dot_store takes the block's rest)."""
    rng = np.random.default_rng(56)
    convs = []
    for i, (in_c, k_w) in enumerate(_PASS_ENTRIES):
        in_w = k_w + 11 + i % 2  # out_w 13 or 14 with pad 1: a last block of 1 or 2
        cfg = {"in_c": in_c, "in_h": 1, "in_w": in_w, "out_c": 5, "out_h": 1,
               "out_w": in_w - k_w + 3, "k_h": 1, "k_w": k_w, "stride_h": 1,
               "stride_w": 1, "pad_h": 0, "pad_w": 1, "dil_h": 1, "dil_w": 1, "groups": 1,
               "shift": -(6 + i % 5), "rounding": 0 if i % 4 == 3 else i % 2,
               "act": (i // 2) % 2}
        x = int8_data(rng, (in_c, 1, in_w))
        w, _ = int_weights(rng, (5, in_c, 1, k_w))
        bias = rng.integers(-2**14, 2**14, size=5).astype(np.int32)
        if i % 4 == 3:  # row 1 exact: with the rounding addend (half up) its sum overflows
            # int32 unless computed exactly
            bias[1] = 2**31 - 1 - in_c * k_w * 16384 - 3
            w[1] = -128
            x[:] = -128
        convs.append((cfg, x, w, bias))
    assert_m4_exact(lib, m4_build, "gemm_passes", convs)


# (in_c, in_h, in_w, k_h, k_w, stride, groups, out_c): unpadded convs (no band) of more than
# 8 inputs and 4 outputs a group (neither the column nor the tile kernels) whose outputs end
# in a block of 3 -- 3 x 5 (blocks across rows), 1 x 7, 3 x 5 at stride 2, grouped -- and
# one of only 3 outputs (no block of 4 to step back to)
_LAST_THREE = [(9, 5, 7, 3, 3, 1, 1, 6), (10, 1, 11, 1, 5, 1, 1, 5), (12, 7, 11, 3, 3, 2, 1, 8),
               (16, 3, 7, 1, 3, 1, 2, 10), (10, 1, 5, 1, 3, 1, 1, 5)]


@needs_m4
def test_m4_last_block_of_three_steps_back(lib, m4_build):  # noqa: F811
    """A layer's last block of 3 pixels runs as the block of 4 ending at the last pixel (one
    pixel's outputs computed again, eb_core_back), through the asm rows: both modes, and an
    exact row (bias near the int32 limit) whose block the C loop then finishes."""
    rng = np.random.default_rng(33)
    convs = []
    for i, (in_c, in_h, in_w, k_h, k_w, s, groups, out_c) in enumerate(_LAST_THREE):
        for act in (0, 1):
            cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c,
                   "out_h": (in_h - k_h) // s + 1, "out_w": (in_w - k_w) // s + 1,
                   "k_h": k_h, "k_w": k_w, "stride_h": s, "stride_w": s, "pad_h": 0,
                   "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": groups, "shift": -8,
                   "rounding": act, "act": act}
            assert cfg["out_h"] * cfg["out_w"] % 4 == 3
            x = int8_data(rng, (in_c, in_h, in_w))
            w, _ = int_weights(rng, (out_c, in_c // groups, k_h, k_w))
            bias = rng.integers(-2**14, 2**14, size=out_c).astype(np.int32)
            if i == 1 and act == 1:  # row 2 exact: its sum overflows int32 unless exact
                bias[2] = 2**31 - 1 - in_c * k_h * k_w * 16384 - 3
                w[2] = -128
                x[:] = -128
            convs.append((cfg, x, w, bias))
    assert_m4_exact(lib, m4_build, "gemm_back", convs)
