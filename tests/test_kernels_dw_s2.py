"""The depthwise stride-2 kernel of 3-wide kernel rows (eb_dw_opt.c, eb_dw_s2): a depthwise
conv of multiplier 1 whose kernel rows are 3 wide at stride 2 (a 3x3 stride-2 layer of a
MobileNet, a 1-D k3 stride 2), rows of 8 outputs or more, run from a band of each channel's
rows copied int8 and zero-padded into the scratch, 4 outputs a block. Drawn by hypothesis
over kernel heights 1..7, height strides and dilations, padding up to the kernel (rows and
columns wholly in it), plane sizes (several bands and one; widths of every remainder: the
last block stepping back) and every requantization (none, relu, abs, left shifts, biases
near the int32 limits: the layer then goes on to the next kernel) and wide outputs, on the
host (portable C) and on the Cortex-M4 under QEMU; which layers take it; and on the M4
that it runs MobileNet's downsampling layers in fewer instructions than the kernels
before."""

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

from edgebuild.ops import conv_path, dw_s2


@st.composite
def s2_layers(draw) -> dict:
    c, k_h = draw(st.integers(1, 4)), draw(st.integers(1, 7))
    s_h, d_h = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    p_h, p_w = draw(st.integers(0, k_h)), draw(st.integers(0, 3))
    in_h = max(1, d_h * (k_h - 1) + 1 - 2 * p_h) + draw(st.integers(0, 40))
    in_w = draw(st.integers(max(1, 17 - 2 * p_w), 160))
    assume(conv_out(in_h, k_h, s_h, p_h, d_h) >= 1 and conv_out(in_w, 3, 2, p_w, 1) >= 8)
    cfg = dw_config(c, in_h, in_w, (k_h, 3), 1, (s_h, 2), (p_h, p_w), (d_h, 1),
                    shift=draw(st.sampled_from([-1, -7, -8, -9, -12, -20, 0, 2])),
                    act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)))
    assume(dw_s2.takes(_plane(cfg)))
    return cfg


@settings(max_examples=200, deadline=None)
@given(cfg=s2_layers(), seed=st.integers(0, 2**32 - 1), wide=st.booleans())
def test_s2_kernel_equals_reference(lib, cfg, seed, wide):  # noqa: F811
    assert_drawn_equal(lib, cfg, seed, wide)


def test_s2_kernel_extreme_sums(lib):  # noqa: F811
    """A MobileNet 3x3 stride 2, a 1-D k3 stride 2 and a 5x3 at the largest sums, every
    activation and several shifts, biases near the int32 limits: equal."""
    check_extremes_near_limits(lib, (dw_config(8, 16, 16, 3, stride=2, pad=1),
                               dw_config(4, 1, 40, (1, 3), stride=(1, 2), pad=(0, 1)),
                               dw_config(3, 12, 21, (5, 3), stride=2, pad=(2, 0))), 23)


def test_s2_layers_take_the_kernel():
    """MobileNet's 3x3 stride-2 layers on 16x16 to 64x64 maps, a 5x3 and a 1-D k3 at
    stride 2 take it; not rows of fewer than 8 outputs (8x8 and 12x12 maps: its set-up a
    block and band outweighs their sums), a multiplier of 2, a 3x3 at stride 1 (the 3-tap
    kernels'), a 5-wide kernel row, a dilation along the rows, packed weights."""
    def paths(cfg: dict, packed: bool = False) -> frozenset[str]:
        return conv_path.kernel_choice(_plane(cfg), packed)
    for cfg in (dw_config(16, 16, 16, 3, stride=2, pad=1), dw_config(24, 64, 64, 3, stride=2,
                pad=1), dw_config(8, 32, 32, 3, stride=2), dw_config(8, 24, 40, (5, 3),
                stride=2, pad=(2, 1)), dw_config(32, 1, 200, (1, 3), stride=(1, 2), pad=(0, 1))):
        assert paths(cfg) == {"depthwise", "dw_s2"}, cfg
    for cfg in (dw_config(64, 8, 8, 3, stride=2, pad=1), dw_config(32, 12, 12, 3, stride=2,
                pad=1), dw_config(16, 20, 20, 3, m=2, stride=2, pad=1),
                dw_config(16, 16, 16, 3, pad=1), dw_config(16, 16, 16, 5, stride=2, pad=2),
                dw_config(16, 16, 33, 3, stride=2, dil=(1, 2))):
        assert "dw_s2" not in paths(cfg), cfg
    assert "dw_s2" not in paths(dw_config(16, 16, 16, 3, stride=2, pad=1), packed=True)


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(s2_layers(), min_size=6, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_m4_s2_kernel_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_drawn_exact(lib, m4_build, "dw_s2", cfgs, seed)


@needs_m4
def test_m4_s2_layers_beat_the_kernels_before(lib, m4_build):  # noqa: F811
    """With "dw_s2" left out (the tile kernel) and in: exact, and in at least `fewer`
    instructions an output fewer (measured 25.8, 10.8, 7.8 over the test program's narrow
    and wide runs; the wide outputs go on to the tile kernel): 16 channels of 3x3 stride 2
    on 16x16 (relu) and on 32x32 (none), a 5x3 stride 2 on 24 x 40."""
    assert_path_beats(lib, m4_build, ((dw_config(16, 16, 16, 3, stride=2, pad=1, act=1,
                                                 shift=-7), 18),
                                      (dw_config(16, 32, 32, 3, stride=2, pad=1, shift=-8), 7),
                                      (dw_config(8, 24, 40, (5, 3), stride=2, pad=(2, 1),
                                                 act=1), 5)),
                      "dw_s2", "s2", 24)
