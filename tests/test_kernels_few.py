"""The few-input kernel (eb_dw_opt.c, "pointwise convs of few inputs and one output a
group"): a 1x1, stride-1, unpadded conv of 2..4 input channels and one output channel a
group, dense (3 -> 1) or grouped -- an output channel at a time over its inputs' planes, four
pixels a word, one SMLAxB a MAC against weights scaled to the immediate shift 8 or 16, the
last 1..3 pixels one at a time. Drawn by hypothesis over groups, inputs and outputs a group, plane sizes (a plane of
fewer than 4 pixels, odd ones), every requantization (the immediate forms at right shifts
0..8 and 9..16, NONE's offset at 16; abs, shifts past 16, left shifts, biases past the
scaled start's limit: a pixel at a time) and wide outputs; on the host (portable C) and on
the Cortex-M4 under QEMU (the DSP intrinsics); which layers it takes (ops.conv_path.few),
and that it runs a 3 -> 1 layer in fewer instructions than the column kernels did."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernel_selection import _defines
from test_kernels_col import _plane
from test_kernels_dw_m4 import m4_run
from test_kernels_opt import (
    assert_m4_exact,
    build_m4,
    check_extremes,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_instructions,
    m4_test_program,
    needs_m4,
    random_bias,
)
from test_kernels_opt_paths import check_conv

from edgebuild.ops import conv_path


def _few(in_c: int, out_c: int, groups: int, h: int, w: int, shift: int = -9,
         act: int = 1, rounding: int = 1) -> dict:
    return {"in_c": in_c, "in_h": h, "in_w": w, "out_c": out_c, "k_h": 1, "k_w": 1,
            "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
            "groups": groups, "out_h": h, "out_w": w, "shift": shift, "rounding": rounding,
            "act": act}


@st.composite
def few_layers(draw, small: bool = False) -> dict:
    """A 1x1 conv of 2..4 inputs and one output a group, dense or grouped."""
    groups = draw(st.integers(1, 3 if small else 5))
    cin_g, cout_g = draw(st.integers(2, 4)), 1
    h, w = draw(st.integers(1, 6 if small else 9)), draw(st.integers(1, 11 if small else 23))
    cfg = _few(groups * cin_g, groups * cout_g, groups, h, w,
               shift=draw(st.sampled_from([-1, -7, -8, -9, -12, -16, -17, -20, 0, 2])),
               act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)))
    assume(conv_path.few(_plane(cfg)))
    return cfg


@settings(max_examples=300, deadline=None)
@given(cfg=few_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_few_input_kernel_equals_reference(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


def test_few_input_kernel_extreme_sums_and_starts(lib):  # noqa: F811
    """4 -> 1, 6 -> 2 in 2 groups and 2 -> 1 on random data and at the largest sums, every activation, shifts of
    both immediates and past them; biases either side of the scaled start's limit
    (eb_dw_imm_limit: 2^31 >> t less the products' room), at 16 with NONE's offset one pair
    more, and past it by up to the room (a start that scaled alone stays an int32), and near
    the int32 limits (the generic stores): equal."""
    rng = np.random.default_rng(11)
    for in_c, out_c, groups in ((4, 1, 1), (6, 2, 2), (2, 1, 1)):
        cfg = _few(in_c, out_c, groups, 3, 7)
        data = dw_data(cfg, rng)
        k = in_c // groups
        for t, s in ((7, 9), (0, 16), (8, 0), (4, 4)):
            pairs = (k + 1) // 2 + (1 if s > 8 else 0)
            lim = (2**31 - 1 - (2 * pairs << 22)) >> t
            half = 1 << max(s - 1, 0)
            top = ((2**31 - 1) >> t) - half  # past the limit, short of int32's once scaled
            bare = (2**31 - 1 - (2 * (pairs - (s > 8)) << 22)) >> t  # no room for the offset
            for starts in ([lim - half + d for d in (-1, 0, 1, 2)], [top, top - 99],
                           [bare - half, bare - half - 1]):
                bias = np.array(starts[:out_c], dtype=np.int64)
                check_extremes(lib, cfg, data, bias.astype(np.int32), shifts=(-s,))
                check_extremes(lib, cfg, data, (-bias).astype(np.int32), shifts=(-s,))
        room = k * 128 * 128
        near = np.array([2**31 - 1 - room, -2**31 + room, 5, -5][:out_c], dtype=np.int32)
        check_extremes(lib, cfg, data, near)


def test_few_input_layers_take_the_kernel():
    """1x1 convs of 2..4 inputs and one output a group take it, dense ones on the optimized
    conv (pointwise_column: a plane of 3 pixels too), with their shift's form; not 1 or 5
    inputs a group, two outputs a group (the column kernels' channel pairs: 3 -> 2, 4 -> 4 in
    2 groups) or 96 (the GEMM), a 1x2 kernel, stride 2, padding, packed weights (the GEMM's
    short rows)."""
    def paths(cfg: dict, packed: bool = False) -> frozenset[str]:
        return conv_path.kernel_choice(_plane(cfg), packed)
    for cfg in (_few(3, 1, 1, 9, 7), _few(2, 1, 1, 1, 3), _few(8, 4, 4, 1, 433),
                _few(12, 3, 3, 5, 5)):
        assert paths(cfg) == {"depthwise", "dw_few"}, cfg
    assert conv_path.pointwise_column(_plane(_few(3, 1, 1, 1, 3)))
    assert conv_path.shift_forms(paths(_few(3, 1, 1, 9, 7)), 8) == {"dw_few8"}
    assert conv_path.shift_forms(paths(_few(3, 1, 1, 9, 7)), 9) == {"dw_few16"}
    for cfg in (_few(5, 2, 5, 9, 7), _few(10, 2, 2, 9, 7), _few(3, 2, 1, 9, 7),
                _few(4, 4, 2, 9, 7), _few(8, 192, 2, 1, 433), {**_few(3, 1, 1, 9, 8), "k_w": 2,
                                                            "out_w": 7},
                {**_few(3, 1, 1, 9, 8), "stride_w": 2, "out_w": 4},
                {**_few(3, 1, 1, 9, 8), "pad_w": 1, "out_w": 10}):
        assert "dw_few" not in paths(cfg), cfg
    assert "dw_few" not in paths(_few(4, 2, 2, 9, 7), packed=True)
    assert "gemm_short" in conv_path.kernel_paths(_plane(_few(4, 2, 2, 9, 7)), packed=True)


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(few_layers(small=True), min_size=8, max_size=12),
       seed=st.integers(0, 2**32 - 1))
def test_m4_few_input_kernel_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "few")


@needs_m4
def test_m4_few_input_kernel_beats_the_columns(lib, m4_build):  # noqa: F811
    """3 -> 1 on 29 x 33 (relu, right shift 7: the immediate 8) and 8 -> 4 in 4 groups on
    17 x 21 (none, 12: the immediate 16, its packed stores) run exact, with "dw_few" left
    out (the column kernels then) and in; in, at least 2 instructions an output fewer
    (measured 3.3 and 5.8 fewer)."""
    rng = np.random.default_rng(12)
    cases = []
    for cfg in (_few(3, 1, 1, 29, 33, shift=-7), _few(8, 4, 4, 17, 21, shift=-12, act=0)):
        cases.append((cfg, *dw_data(cfg, rng), random_bias(rng, cfg["out_c"])))
    for case in cases:
        cfg = case[0]
        source = m4_test_program(lib, [case], linears=False)
        counts = []
        for name, left_out in (("few_on", ()), ("few_off", ("dw_few",))):
            elf = build_m4(m4_build, f"{name}_{cfg['in_c']}", source, _defines(left_out))
            assert_m4_exact(elf, name)
            counts.append(m4_instructions(m4_build, elf))
        outputs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
        assert counts[0] <= counts[1] - 2 * outputs, (cfg, counts, outputs)
