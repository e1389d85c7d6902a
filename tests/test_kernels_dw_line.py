"""The line kernel's row function (templates/kernels/eb_dw_line.h): one program draws rows
of 1..8 tap pairs (odd tap counts: a last zero weight), even output counts, both modes, both
immediate shifts (c = 8 with s = 0..8, c = 16 with s = 9..16) and the three kinds of row --
stride 1 at dilation 1 and 2 (the row then widened as its two phases), stride 2 --, with
extremes, and compares each output with a plain
tap-by-tap sum requantized the reference way; on the host it runs the C twin, on the M4
(QEMU) each of the twelve assembly forms. The layers that take it: test_kernel_selection,
test_kernels_opt's drawn shapes."""

from __future__ import annotations

import subprocess

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernels_dw_tile_m4 import big_biases
from test_kernels_opt import (
    GCC,
    KERNELS,
    assert_conv_opt_exact,
    build_m4,
    dw_1d,
    dw_config,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    needs_m4,
    plane_of,
    run_conv_pair,
    run_qemu,
)

from edgebuild.ops.conv_path import kernel_paths

PROGRAM = r"""
#include <stdio.h>
#include <stdint.h>
#include "eb_dw_line.h"

static uint32_t seed = 12345u;
static int32_t draw(int32_t lo, int32_t hi) /* [lo, hi] */
{
    seed = seed * 1103515245u + 12345u;
    return lo + (int32_t)((seed >> 8) % (uint32_t)(hi - lo + 1));
}

static int16_t row[2 * (48 + 32)], buf[2 * EB_DW_LINE_PHASE];
static int8_t wt[16], got[64 + 2], want[64 + 2];

static void run(eb_dw_line_job *j, int relu, int c, int kind)
{
#ifdef EB_DW_LINE_ASM
    void (*const fn[2][2][3])(const eb_dw_line_job *) = {
        {{eb_dw_line_none_8, eb_dw_line_none_8_d2, eb_dw_line_none_8_s2},
         {eb_dw_line_none_16, eb_dw_line_none_16_d2, eb_dw_line_none_16_s2}},
        {{eb_dw_line_relu_8, eb_dw_line_relu_8_d2, eb_dw_line_relu_8_s2},
         {eb_dw_line_relu_16, eb_dw_line_relu_16_d2, eb_dw_line_relu_16_s2}}};
    fn[relu][c == 16][kind - 1](j);
#else
    eb_dw_line_c(j, relu, c, kind);
#endif
}

int main(void)
{
    int bad = 0, cases = 0, k;
    for (k = 0; k < 600; ++k) {
        const int pairs = 1 + k % 8, taps = 2 * pairs - (k / 8) % 2, n = 2 * draw(1, 24);
        const int relu = (k / 16) % 2, c = (k / 32) % 2 ? 16 : 8, kind = 1 + (k / 64) % 3;
        const int d = kind == 2 ? 2 : 1, st = kind == 3 ? 2 : 1;
        const int s = c == 8 ? draw(0, 8) : draw(9, 16), t = c - s;
        const int extreme = k % 5 == 4;
        const int32_t half = s > 0 ? (int32_t)1 << (s - 1) : 0;
        const int32_t bias = extreme ? draw(-2000, 2000) * 16 : draw(-3000, 3000);
        eb_dw_line_job j;
        int i, p;
        for (i = 0; i < st * n + d * taps + 2; ++i) {
            row[i] = (int16_t)(extreme ? (i % 2 ? -128 : 127) : draw(-128, 127));
        }
        for (i = 0; i < taps; ++i) {
            wt[i] = (int8_t)(extreme ? -128 : draw(-128, 127));
        }
        if (taps % 2) {
            wt[taps] = 0;
        }
        for (i = 0; i < n; ++i) { /* the reference: tap by tap, then the shift */
            int64_t a = (int64_t)bias + half;
            for (p = 0; p < taps; ++p) {
                a += (int64_t)wt[p] * row[st * i + d * p];
            }
            a >>= s;
            want[i] = (int8_t)(relu ? (a < 0 ? 0 : a > 127 ? 127 : a)
                                    : (a < -128 ? -128 : a > 127 ? 127 : a));
        }
        j.skip = EB_DW_LINE_PAIRS - pairs;
        for (i = 0; i < EB_DW_LINE_PHASE; ++i) { /* dilation 2: the phases */
            buf[i] = i < 48 + 32 ? row[2 * i] : 0;
            buf[EB_DW_LINE_PHASE + i] = i < 48 + 32 ? row[2 * i + 1] : 0;
        }
        j.x = (d == 1 ? row : buf) - 2 * j.skip;
        j.out = got;
        j.end = got + n;
        j.init = (int32_t)((uint32_t)(bias + half) << t);
        for (p = 0; p < EB_DW_LINE_PAIRS; ++p) {
            j.w[p] = 0;
        }
        for (p = 0; p < pairs; ++p) {
            j.w[j.skip + p] = (uint32_t)(uint16_t)(int16_t)(wt[2 * p] * (1 << t)) |
                              (uint32_t)(uint16_t)(int16_t)(wt[2 * p + 1] * (1 << t)) << 16;
        }
        got[n] = got[n + 1] = 0x5A;
        run(&j, relu, c, kind);
        for (i = 0; i < n; ++i) {
            bad += got[i] != want[i];
        }
        bad += got[n] != 0x5A || got[n + 1] != 0x5A; /* nothing past the end */
        ++cases;
    }
    printf("%d cases, %d mismatching outputs\n", cases, bad);
    return bad != 0;
}
"""


def test_line_c_twin_equals_reference(tmp_path):
    source = tmp_path / "line.c"
    source.write_text(PROGRAM)
    exe = tmp_path / "line"
    built = subprocess.run([GCC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
                            f"-I{KERNELS}", str(source), "-o", str(exe)],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert "600 cases, 0 mismatching outputs" in ran.stdout, ran.stdout + ran.stderr


@needs_m4
def test_m4_line_rows_equal_reference(m4_build):  # noqa: F811
    elf = build_m4(m4_build, "dw_line", PROGRAM)
    result = run_qemu(elf)
    assert "600 cases, 0 mismatching outputs" in result.stdout, result.stdout + result.stderr


def takes_line(cfg: dict) -> bool:
    return "dw_line" in kernel_paths(plane_of(cfg))


# Each shift form and mode (c = 8: s 0..8; c = 16: 9..16), both dilations, then shifts the
# line kernel does not take (a left shift, 17): those layers run on the tile kernel.
LINE_QUANTS = [{"rounding": r, "act": a, "shift": s}
               for r, a, s in ((0, 0, -7), (1, 1, -9), (1, 1, 0), (0, 0, -16), (1, 0, -3),
                               (0, 1, -12), (1, 1, 2), (0, 0, -17))]


@st.composite
def line_layers(draw) -> dict:
    """A depthwise layer of multiplier 1 whose frame is one tap row (1-D in both layouts,
    1xK on 2-D maps), 4..16 taps, stride 1 at dilation 1 or 2 or stride 2, padding up to the
    kernel's reach and past it, odd and even rows, that the line kernel takes by its
    shape."""
    layout = draw(st.sampled_from(["2d", "1d", "1d-vertical"]))
    channels, k = draw(st.integers(1, 4)), draw(st.integers(4, 16))
    stride, dil = draw(st.sampled_from([(1, 1), (1, 2), (2, 1)]))
    pad, q = draw(st.integers(0, k + 2)), draw(st.sampled_from(LINE_QUANTS))
    width = draw(st.integers(max(1, (k - 1) * dil + 1 + stride - 2 * pad), 140))
    if layout == "2d":
        cfg = dw_config(channels, draw(st.integers(1, 5)), width, (1, k), 1, (1, stride),
                        (draw(st.integers(0, 1)), pad), (1, dil), **q)
    else:
        cfg = dw_1d(channels, width, k, 1, stride, pad, dil, vertical=layout == "1d-vertical",
                    **q)
    assume(takes_line(cfg))
    return cfg


@settings(max_examples=200, deadline=None)
@given(cfg=line_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_line_layers_equal_reference(lib, cfg, seed, with_bias):  # noqa: F811
    """Drawn line layers on the host (the C twin), int8 and wide, with and without a bias."""
    assert_conv_opt_exact(lib, cfg, seed, with_bias)


# Rows the kernel's paths reach: an odd count at dilation 1 (the overlapping last pair) and
# 2 (the spare word), a row of exactly 2, a dilation-2 row whose phases fill the patch
# (out_w 480: 240 + 16 of 256), 16 taps, rows wholly in the padding on a 2-D map; stride 2
# with an odd count (65) and a row that fills the patch (2 x 507 + 8 + 2 = 1024 int16).
LINE_CASES = [
    dw_config(3, 4, 37, (1, 9), 1, 1, (0, 4), act=1),
    dw_config(2, 1, 63, (1, 7), 1, 1, (0, 6), dil=(1, 2), act=0),
    dw_config(2, 19, 5, (1, 4), 1, 1, (0, 0), act=1),  # (38 outputs: past the small planes)
    dw_config(1, 1, 480, (1, 16), 1, 1, (0, 15), dil=(1, 2), act=0, shift=-12),
    dw_config(2, 3, 40, (1, 16), 1, 1, (1, 7), act=1, shift=0),
    dw_config(2, 2, 129, (1, 11), 1, (1, 2), (0, 5), act=0),
    dw_config(1, 1, 1014, (1, 8), 1, (1, 2), (0, 3), act=1, shift=-10),
]


def test_line_cases_take_the_line_kernel():
    assert all(takes_line(cfg) for cfg in LINE_CASES)
    assert [c["out_w"] % 2 for c in LINE_CASES] == [1, 1, 0, 0, 1, 1, 1]
    assert [c["stride_w"] for c in LINE_CASES[-2:]] == [2, 2]
    assert not takes_line({**LINE_CASES[-1], "in_w": 1016, "out_w": 508})  # one more: past it


def test_line_mixed_biases_equal_reference(lib):  # noqa: F811
    """Biases near the int32 limits or past the scaled sums' (big_biases): the line kernel
    declines the layer, the tile kernel runs it; exact either way."""
    rng = np.random.default_rng(41)
    for cfg in LINE_CASES:
        x, w = dw_data(cfg, rng)
        ref, opt = run_conv_pair(lib, cfg, x, w, big_biases(rng, cfg), False)
        np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


@needs_m4
@settings(max_examples=4, deadline=None)
@given(cfgs=st.lists(line_layers(), min_size=6, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_m4_line_layers_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    """Drawn line layers under QEMU (the assembly forms), int8 and wide."""
    rng = np.random.default_rng(seed)
    convs = []
    for cfg in cfgs:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, rng.integers(-3000, 3000, cfg["out_c"]).astype(np.int32)))
    m4_convs_exact(lib, m4_build, "dw_line_drawn", convs)


@needs_m4
def test_m4_line_cases_equal_reference(lib, m4_build):  # noqa: F811
    """The fixed cases under QEMU in each of LINE_QUANTS' requantizations, small biases and
    big ones (the tile kernel then)."""
    rng = np.random.default_rng(42)
    convs = []
    for i, quant in enumerate(LINE_QUANTS):
        for cfg in LINE_CASES:
            cfg = {**cfg, **quant}
            x, w = dw_data(cfg, rng)
            bias = big_biases(rng, cfg) if i % 2 else \
                rng.integers(-3000, 3000, cfg["out_c"]).astype(np.int32)
            convs.append((cfg, x, w, bias))
    m4_convs_exact(lib, m4_build, "dw_line_cases", convs)
