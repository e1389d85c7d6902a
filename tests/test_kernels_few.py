"""The few-input kernel (eb_dw_opt.c, "pointwise convs of few inputs a group"): a 1x1,
stride-1, unpadded conv of 1..4 input channels a group, any outputs a group, dense (3 -> 1,
3 -> 4) or grouped (a 1x1 depthwise of multiplier 3, 4 -> 192 in 2 groups) -- one output
channel at a time over its inputs' planes (one output a group, or one input), else each
pixel's inputs loaded and paired once for up to 32 channel records of its group, four
pixels a word against weights and inputs scaled so that the outputs are the sums' top
halves, the last block overlapping the one before. Drawn by hypothesis over groups, inputs
and outputs a group (past one pass of records), plane sizes (a plane of fewer than 4
pixels, odd ones), every requantization (the immediate forms at right shifts 0..8 and
9..16, NONE's offset; abs, shifts past 16, left shifts, biases past the scaled start's
limit: a pixel at a time) and wide outputs; on the host (portable C) and on the Cortex-M4
under QEMU (the DSP intrinsics); which layers it takes (ops.dw_few.few), and that it
runs its layers in fewer instructions than the kernels that ran them before."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernel_selection import m4_path_counts
from test_kernels_col import _plane
from test_kernels_dw_m4 import m4_run
from test_kernels_opt import (
    check_extremes,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    random_bias,
)
from test_kernels_opt_paths import check_conv

from edgebuild.ops import conv_path, dw_few


def _few(in_c: int, out_c: int, groups: int, h: int, w: int, shift: int = -9,
         act: int = 1, rounding: int = 1, k: tuple[int, int] = (1, 1),
         dil: tuple[int, int] = (1, 1), pad: tuple[int, int] = (0, 0)) -> dict:
    return {"in_c": in_c, "in_h": h, "in_w": w, "out_c": out_c, "k_h": k[0], "k_w": k[1],
            "stride_h": 1, "stride_w": 1, "pad_h": pad[0], "pad_w": pad[1], "dil_h": dil[0],
            "dil_w": dil[1], "groups": groups, "out_h": h + 2 * pad[0] - dil[0] * (k[0] - 1),
            "out_w": w + 2 * pad[1] - dil[1] * (k[1] - 1), "shift": shift,
            "rounding": rounding, "act": act}


@st.composite
def few_layers(draw, small: bool = False) -> dict:
    """A stride-1 conv of 2..4 terms (inputs a group times taps: 1x1 of 2..4 inputs, 2x1,
    1x3, 2x2 ... of one or two, dilated; one column wide, padded along its rows up to rows
    wholly in the padding) and 1..40 outputs a group, dense, grouped or depthwise."""
    groups = draw(st.integers(1, 3 if small else 5))
    cin_g = draw(st.integers(1, 4))
    k_h = draw(st.integers(1, 4 // cin_g))
    k_w = draw(st.integers(1, 4 // (cin_g * k_h)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    cout_g = draw(st.sampled_from([1, 1, 2, 3, 5] + ([] if small else [33, 40])))
    h = draw(st.integers(1, 6 if small else 9)) + dil[0] * (k_h - 1)
    w = draw(st.integers(1, 11 if small else 23)) + dil[1] * (k_w - 1)
    cfg = _few(groups * cin_g, groups * cout_g, groups, h, w,
               shift=draw(st.sampled_from([-1, -2, -7, -8, -9, -12, -16, -17, -20, 0, 2])),
               act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)),
               k=(k_h, k_w), dil=dil,
               pad=(draw(st.sampled_from([0, 0, 1, 2, k_h + 1])) if k_w == 1 else 0, 0))
    assume(dw_few.few(_plane(cfg)))
    return cfg


@settings(max_examples=300, deadline=None)
@given(cfg=few_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_few_input_kernel_equals_reference(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


def test_few_input_kernel_extreme_sums_and_starts(lib):  # noqa: F811
    """4 -> 1, 6 -> 2 in 2 groups, 2 -> 1, 4 -> 6 in 2 groups and a 1x1 depthwise of
    multiplier 2 on random data and at the largest sums, every activation, shifts of both
    immediates and past them; biases either side of the scaled start's limit (the sums
    scaled by 2^(16 - s): 2^31 less the products' room k 2^(30 - s), less NONE's offset
    2^23, over 2^(16 - s)) and past it by up to the offset's room, and near the int32
    limits (the generic stores): equal."""
    rng = np.random.default_rng(11)
    for in_c, out_c, groups in ((4, 1, 1), (6, 2, 2), (2, 1, 1), (4, 6, 2), (2, 4, 2)):
        cfg = _few(in_c, out_c, groups, 3, 7)
        data = dw_data(cfg, rng)
        k = in_c // groups
        for s in (9, 16, 8, 4, 2):
            sh = 16 - s
            half = 1 << max(s - 1, 0)
            room = 2**31 - 1 - (k << (14 + sh))
            for off in (0, 1 << 23):
                lim = (room - off) >> sh
                if lim < 0:
                    continue
                starts = [lim - half + d for d in (-1, 0, 1, 2, 99)]
                bias = np.resize(np.array(starts, dtype=np.int64), out_c)
                check_extremes(lib, cfg, data, bias.astype(np.int32), shifts=(-s,))
                check_extremes(lib, cfg, data, (-bias).astype(np.int32), shifts=(-s,))
        room = k * 128 * 128
        near = np.resize(np.array([2**31 - 1 - room, -2**31 + room, 5, -5], dtype=np.int32),
                         out_c)
        check_extremes(lib, cfg, data, near)


def test_few_input_layers_take_the_kernel():
    """Stride-1 convs of 2..4 terms an output take it (1x1 of 2..4 inputs a group, 2x1, 1x2,
    2x2, 1x3 of one, dilated, padded), whatever their outputs a group, dense 1x1 ones on
    the optimized conv (pointwise_column: a plane of 3 pixels too), with their shift's form;
    padded along the rows of one a column wide (a 1-D layer laid as a column); not where no
    form requantizes (wide, abs, a shift past 16: the kernels before), one
    term (the table kernel's per-channel scale: 4.2 insn/MAC on 1 x 583 where an output
    channel at a time here ran 4.5), a depthwise of multiplier 2 or more the 3-tap kernels
    take (their channel pairs), 5 or more terms, stride 2, padded row ends (a 1-D
    layer's row: 4.7 insn/MAC here, 3.2 on the 3-tap kernel), fewer than 4 outputs a row
    whose terms lie inside, packed weights (the GEMM's short rows)."""
    def paths(cfg: dict, packed: bool = False) -> frozenset[str]:
        return conv_path.kernel_choice(_plane(cfg), packed)
    for cfg in (_few(3, 1, 1, 9, 7), _few(2, 1, 1, 1, 3), _few(8, 4, 4, 1, 433),
                _few(12, 3, 3, 5, 5), _few(3, 2, 1, 9, 7), _few(4, 4, 2, 9, 7),
                _few(4, 192, 2, 1, 433), _few(3, 4, 1, 89, 69),
                _few(4, 4, 4, 28, 21, k=(2, 1)), _few(8, 32, 8, 56, 24, k=(1, 2)),
                _few(16, 16, 16, 32, 32, k=(2, 2)), _few(1, 32, 1, 16, 16, k=(2, 2)),
                _few(8, 8, 4, 20, 20, k=(2, 1), dil=(2, 1)), _few(5, 5, 5, 9, 9, k=(1, 3)),
                _few(5, 5, 5, 9, 9, k=(3, 1), pad=(1, 0)), _few(5, 15, 5, 97, 1, k=(2, 1),
                                                               pad=(1, 0)),
                _few(8, 8, 4, 4, 9, k=(1, 1), pad=(3, 0))):
        assert paths(cfg) == {"depthwise", "dw_few"}, cfg
        assert "dw_few" not in conv_path.kernel_choice(_plane(cfg), forms=False), cfg
    for cfg in (_few(24, 24, 24, 1, 583), _few(256, 768, 256, 1, 46)):  # per-channel scales
        assert paths(cfg) == {"depthwise", "dw_table"}, cfg
    assert conv_path.pointwise_column(_plane(_few(3, 1, 1, 1, 3)))
    assert conv_path.shift_forms(paths(_few(3, 1, 1, 9, 7)), 8) == {"dw_few8"}
    assert conv_path.shift_forms(paths(_few(3, 1, 1, 9, 7)), 9) == {"dw_few16"}
    for cfg in (_few(5, 2, 1, 9, 7), _few(10, 2, 2, 9, 7), _few(3, 1, 1, 9, 8, k=(1, 2)),
                _few(5, 5, 5, 9, 9, k=(1, 5)), _few(4, 4, 4, 9, 9, k=(3, 3)),
                _few(4, 8, 4, 6, 5, k=(1, 3)),  # rows of 3 pixels
                _few(5, 15, 5, 1, 97, k=(1, 3), pad=(0, 1)),  # padded row ends
                _few(5, 15, 5, 97, 1, k=(3, 1), pad=(1, 0)),  # the 3-tap channel pairs
                _few(4, 4, 4, 9, 9, k=(2, 2), pad=(1, 1)),
                {**_few(3, 1, 1, 9, 8), "stride_w": 2, "out_w": 4},
                _few(4, 4, 4, 9, 5, k=(1, 3), pad=(0, 2))):  # 3 outputs a row inside
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
def test_m4_few_input_kernel_beats_the_kernels_before(lib, m4_build):  # noqa: F811
    """Run exact with "dw_few" left out (the kernels that ran them before: the column
    kernels, the GEMM's short rows, the tile kernel) and in, and in at least `fewer`
    instructions an output fewer (measured 5.9, 4.7, 5.7, 3.0, 7.4, 1.7): 3 -> 1 on 29 x 33 (relu,
    right shift 7: the immediate 8), 8 -> 4 in 4 groups on 17 x 21 (none, 12: the
    immediate 16), 4 -> 96 in 2 groups on 1 x 101, a dense 3 -> 4 on 23 x 19, a 2x1
    depthwise on 28 x 21 and a 1x2 depthwise of multiplier 4 on 30 x 24."""
    rng = np.random.default_rng(12)
    for cfg, fewer in ((_few(3, 1, 1, 29, 33, shift=-7), 2),
                       (_few(8, 4, 4, 17, 21, shift=-12, act=0), 2),
                       (_few(4, 96, 2, 1, 101, shift=-6), 2),
                       (_few(3, 4, 1, 23, 19, shift=-10, act=0), 2),
                       (_few(4, 4, 4, 28, 21, k=(2, 1)), 2),
                       (_few(8, 32, 8, 30, 24, k=(1, 2), shift=-10, act=0), 1)):
        case = (cfg, *dw_data(cfg, rng), random_bias(rng, cfg["out_c"]))
        counts = m4_path_counts(lib, m4_build, case, "dw_few", "few")
        outputs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
        print(cfg["in_c"], cfg["out_c"], counts, (counts[1] - counts[0]) / outputs)
        assert counts[0] <= counts[1] - fewer * outputs, (cfg, counts, outputs)
