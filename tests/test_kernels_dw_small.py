"""The small-plane depthwise kernel (eb_dw_opt.c, eb_dw_small): a depthwise conv of any
multiplier with at most 36 outputs a channel, a kernel row of 2 or more taps and at most 25
taps, stride 1 or 2 -- the 3x3 layers at the end of a MobileNet (256 x 3x3, a 6x6 at stride
2), 1-D layers of a few dozen samples -- run per input channel from a zero-padded int16 copy
of its plane, each output k_h x ceil(k_w / 2) LDR + SMLAD of neighbouring taps. Drawn by
hypothesis over kernels (odd and even widths: a last pair against a 0), strides, height
dilation, padding up to the kernel (rows and columns wholly in it), multipliers, plane sizes
and every requantization (none, relu, abs, left shifts, biases near the int32 limits: the
generic stores) and wide outputs, on the host (portable C) and on the Cortex-M4 under QEMU;
which layers take it; and on the M4 that MobileNet's tail layers run in fewer instructions
than on the kernels before."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernel_selection import assert_path_beats
from test_kernels_col import _plane
from test_kernels_opt import (
    assert_drawn_equal,
    check_extremes_near_limits,
    conv_out,
    dw_config,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_drawn_exact,
    needs_m4,
)

from edgebuild.ops import conv_path


@st.composite
def small_layers(draw) -> dict:
    c, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k_h, k_w = draw(st.integers(1, 5)), draw(st.integers(2, 5))
    s_h, s_w = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    d_h = draw(st.integers(1, 2))
    p_h, p_w = draw(st.integers(0, k_h)), draw(st.integers(0, k_w))
    in_h = max(1, d_h * (k_h - 1) + 1 - 2 * p_h) + draw(st.integers(0, 6))
    in_w = max(1, k_w - 2 * p_w) + draw(st.integers(0, 9))
    assume(conv_out(in_h, k_h, s_h, p_h, d_h) >= 1 and conv_out(in_w, k_w, s_w, p_w, 1) >= 1)
    cfg = dw_config(c, in_h, in_w, (k_h, k_w), m, (s_h, s_w), (p_h, p_w), (d_h, 1),
                    shift=draw(st.sampled_from([-1, -7, -8, -9, -12, -20, 0, 2])),
                    act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)))
    assume(conv_path.small(_plane(cfg)))
    return cfg


@settings(max_examples=300, deadline=None)
@given(cfg=small_layers(), seed=st.integers(0, 2**32 - 1), wide=st.booleans())
def test_small_plane_kernel_equals_reference(lib, cfg, seed, wide):  # noqa: F811
    assert_drawn_equal(lib, cfg, seed, wide)


def test_small_plane_kernel_extreme_sums(lib):  # noqa: F811
    """MobileNet's tail shapes and a 1-D k5 of multiplier 4 at the largest sums, every
    activation and several shifts, biases near the int32 limits: equal."""
    check_extremes_near_limits(lib, (dw_config(8, 3, 3, 3, pad=1), dw_config(6, 6, 6, 3,
                               stride=2, pad=1), dw_config(4, 18, 1, (5, 1), m=4, pad=(2, 0)),
                               dw_config(3, 5, 6, (2, 4), m=2)), 21)


def test_small_planes_take_the_kernel():
    """MobileNet's 3x3 on 3x3 (24.8 insn/MAC on the tile kernel) and on 6x6 at stride 2, a
    5x5 on 6x6, 1-D layers of a few dozen samples at stride 1 or 2 and multipliers 1-4 take
    it; not the 3-tap kernels' (a 3x3 at stride 1 on rows of 4 or more), a Kx1 kernel, more
    than 36 outputs or 25 taps (a 7x7 on 7x7: 2.65 on the tile kernel, 6.06 here), packed
    weights, a 2-term one (the few-input kernel's)."""
    def paths(cfg: dict, packed: bool = False) -> frozenset[str]:
        return conv_path.kernel_choice(_plane(cfg), packed)
    small = {"depthwise", "dw_small"}
    for cfg in (dw_config(256, 3, 3, 3, pad=1), dw_config(256, 6, 6, 3, stride=2, pad=1),
                dw_config(32, 6, 6, 5, pad=2), dw_config(24, 1, 18, (1, 5), m=4, pad=(0, 2)),
                dw_config(24, 18, 1, (5, 1), m=4, pad=(2, 0)),
                dw_config(32, 1, 50, (1, 3), stride=(1, 2), pad=(0, 1)),
                dw_config(64, 24, 4, (1, 6), m=3, stride=(1, 2), pad=(0, 2)),  # rows of 2
                dw_config(8, 40, 5, (3, 3), stride=2, pad=1)):  # rows of 3, 60 outputs
        assert paths(cfg) == small, cfg
    for cfg in (dw_config(64, 6, 6, 3, pad=1), dw_config(16, 12, 4, (5, 1), m=2, pad=(2, 0)),
                dw_config(64, 7, 7, 7, pad=3), dw_config(16, 16, 16, 3, stride=2, pad=1),
                dw_config(8, 8, 8, (1, 2))):
        assert "dw_small" not in paths(cfg), cfg
    assert "dw_small" not in paths(dw_config(256, 3, 3, 3, pad=1), packed=True)


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(small_layers(), min_size=8, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_m4_small_plane_kernel_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_drawn_exact(lib, m4_build, "dw_small", cfgs, seed)


@needs_m4
def test_m4_small_planes_beat_the_kernels_before(lib, m4_build):  # noqa: F811
    """With "dw_small" left out (the tile kernel, the fan) and in: exact, and in at least
    `fewer` instructions an output fewer (measured 330, 318, 26, 131): 64 channels of 3x3
    (relu, right shift 7), 64 of 6x6 at stride 2, a 1-D k5 of multiplier 4 on 18 samples
    (none, 12), a 5x5 on 6x6 and a 1x6 of multiplier 3 at stride 2 on rows of 2 outputs."""
    assert_path_beats(lib, m4_build, ((dw_config(64, 3, 3, 3, pad=1, act=1, shift=-7), 200),
                                      (dw_config(64, 6, 6, 3, stride=2, pad=1, act=1,
                                                 shift=-7), 200),
                                      (dw_config(24, 1, 18, (1, 5), m=4, pad=(0, 2),
                                                 shift=-12), 15),
                                      (dw_config(16, 6, 6, 5, pad=2, act=1, shift=-9), 60),
                                      (dw_config(16, 24, 4, (1, 6), m=3, stride=(1, 2),
                                                 pad=(0, 2), act=1, shift=-9), 20)),
                      "dw_small", "small", 22)
