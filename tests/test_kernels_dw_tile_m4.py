"""The depthwise tile kernel's inner loops (eb_dw_opt.c) on drawn shapes, on the host (their
portable C) and on the Cortex-M4 under QEMU, where four of them are inline assembly the host
never runs: the two-channel loop (multiplier >= 2, an odd count of tap pairs entering it at its
second pair), the sliding single-channel rows at stride 1 and 2 (a tap row's neighbouring pairs
share loaded words), and the single-tap-pair loop of 1x1 / 1x2 kernels in the frame. Frames
turned (a kernel taller than wide: outputs stored down the columns), dilation 1-3, tap rows
wholly in the padding (no taps at all for some output rows), every requantization (none, relu,
abs; left shifts: the generic store). Each M4 example is one firmware of several layers, each
compared with the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kernel_selection import assert_path_beats
from test_kernels_dw_m4 import m4_run
from test_kernels_dw_refill import mixed_bias
from test_kernels_opt import (
    assert_conv_opt_exact,
    build_m4,
    dw_1d,
    dw_config,
    dw_data,
    dw_layers,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    plane_of,
    run_conv_pair,
    run_qemu,
)

from edgebuild.ops.conv_path import (
    fan,
    fill_cost,
    group_tile,
    kernel_paths,
    tile_frame,
    tile_shape,
)

QUANTS = [{"rounding": r, "act": a, "shift": s}
          for r, a, s in ((0, 0, -7), (1, 1, -9), (0, 2, -12), (1, 1, 2), (0, 0, 0), (1, 0, -1))]


def tile_loop(cfg: dict) -> str:
    """Which inner loop of the tile kernel a layer's channels run (its frame's whole tap
    table; rows near the padding may run fewer taps): "fan" (many channels of one input
    channel, few tap pairs), "tap1", "pair" (multiplier >= 2),
    "slide1" / "slide2" (one channel, stride 1 / 2) or "generic"."""
    f = tile_frame(plane_of(cfg))
    if fan(plane_of(cfg)):
        return "fan"
    if f.ntaps == 1:
        return "tap1"
    if cfg["out_c"] // cfg["groups"] >= 2 and f.s_w in (1, 2):
        return "pair"
    if f.pairs >= 2 and f.d_w in (1, 2) and f.s_w in (1, 2):
        return f"slide{f.s_w}"
    return "generic"


def takes_tile(cfg: dict) -> bool:
    """Whether the tile kernel takes cfg, or would but for the line kernel (a one-row frame
    of multiplier 1: its int8 outputs by the immediate go there, its wide ones and those
    of biases past the line's limits here)."""
    return "dw_tile" in kernel_paths(plane_of(cfg), lines=False)


def tile_layers() -> st.SearchStrategy[dict]:
    """A depthwise layer the tile kernel takes: 2-D or 1-D (both layouts), multiplier 1-4,
    long 1-D kernels and wide padding (rows wholly in it)."""
    return dw_layers(in_c=(1, 3), m=st.sampled_from([1, 1, 2, 3, 4, 8]),
                     quant=st.sampled_from(QUANTS), hw=(18, 22), k2=7, pad2=5, length=90,
                     k1=15, pad1=8).filter(takes_tile)


@settings(max_examples=300, deadline=None)
@given(cfg=tile_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_tile_kernel_equals_reference(lib, cfg, seed, with_bias):  # noqa: F811
    assert_conv_opt_exact(lib, cfg, seed, with_bias)


# Layers chosen to take each loop, in both requantizations the loops store inline, with tap
# rows in the padding and a turned frame for each loop that has one.
LOOP_CASES = [
    dw_config(3, 9, 23, (1, 2), 4, 1, (0, 1), act=1),             # tap1, multiplier 4 (padded:
    # the few-input kernel takes an unpadded 1x2)
    dw_config(2, 5, 17, (1, 1), 1, 1, (0, 1), act=0, shift=-3),   # tap1, 1x1 padded
    dw_1d(2, 40, 5, 3, pad=2, act=1),                             # pair, 3 tap pairs (odd)
    dw_1d(1, 97, 8, 4, stride=2, pad=3, act=0),                   # pair, stride 2, 4 pairs
    dw_config(1, 21, 9, 3, 2, 2, 6, act=1),                       # pair, rows in the padding
    dw_config(2, 19, 5, (5, 2), 2, (2, 1), (2, 0), act=0),        # pair, turned
    dw_1d(3, 60, 15, 1, pad=7, act=1),                            # slide1, 8 pairs
    dw_1d(2, 70, 11, 1, pad=10, dil=2, act=0),                    # slide1, dilation 2
    dw_config(2, 6, 31, 7, 1, 2, 3, act=1),                       # slide2, 7x7 stride 2
    dw_config(2, 4, 30, (3, 9), 1, (1, 2), (4, 4), act=0),        # slide2, rows all padding
    dw_config(1, 25, 6, (7, 3), 1, 1, (3, 1), act=1),             # slide1, turned
    dw_config(2, 11, 26, (2, 5), 1, 3, 1, act=0),                 # generic, stride 3
    dw_config(2, 9, 24, (2, 3), 1, 1, 1, dil=3, act=2),           # generic, dilation 3, abs
    # maps shorter than the kernel: most patch rows in the padding, left unwritten, and only
    # the tap rows some output row reads inside built
    dw_config(3, 2, 18, 7, 1, 1, 6, dil=2, act=1),                # slide1, 2-row map, d 2
    dw_config(2, 3, 40, 7, 2, 2, 3, act=0),                       # pair, 3-row map, stride 2
    dw_config(2, 3, 45, (13, 10), 2, 1, (6, 4), act=1),           # pair, 65 tap pairs
    # a dilation along the rows at stride 1 split into phases (eb_dw_tile_phase): padding
    # of either parity, 3 phases, channel pairs, a turned frame, a row not a multiple of D
    dw_1d(2, 64, 5, 1, pad=6, dil=3, act=1),                      # slide1, 3 phases
    dw_1d(2, 51, 7, 2, pad=5, dil=2, act=0),                      # pair, 2 phases, odd pad
    dw_config(2, 41, 6, (9, 1), 1, 1, (8, 0), dil=(2, 1), act=1), # slide1, turned, 2 phases
    # phase 0's row in three tiles (500 + 500 + 1 outputs), phase 1's in two of 500: each phase's
    # last tile copies the columns its own outputs read (eb_dw_tile_reach per phase)
    dw_1d(1, 2001, 5, 1, pad=4, dil=2, act=0),                    # slide1, 2 phases, tiles
]
# The fan (one input channel's many outputs over 1-6 tap pairs): two pixels at a time with
# an odd last one, more channels than a chunk of records (16), stride 2, a turned frame
# (outputs down the columns), odd multipliers (the channel loop, two a pass, entered at its
# second; a last chunk of 5), tiles near the padding (the other loops),
# a dilation split into phases; one pixel at a time over 5 and 6 pairs.
FAN_CASES = [
    dw_1d(1, 45, 5, 21, pad=2, act=1),                            # 3 pairs, 21 channels
    dw_1d(2, 98, 3, 7, stride=2, pad=1, act=0),                   # 2 pairs, stride 2
    dw_config(1, 17, 9, (5, 1), 8, 1, (2, 0), act=1),             # 3 pairs, turned
    dw_1d(1, 40, 2, 9, pad=1, act=0),                             # 1 pair, 9 channels
    dw_config(1, 10, 20, (2, 4), 5, 1, 1, act=1),                 # 4 pairs, rows padded
    dw_1d(1, 70, 3, 6, pad=2, dil=2, act=0),                      # 2 pairs, 2 phases
    dw_1d(1, 33, 9, 13, pad=4, act=1),                            # 5 pairs, one pixel
    dw_config(1, 15, 13, 3, 12, 2, 0, act=0),                     # 6 pairs, 3x3 stride 2
    # records held from tile to tile for up to 32 channels (eb_dw_fan_held), made per tile
    # past that: 20 channels (two chunks) and 40 (three) over rows of several tiles
    dw_1d(1, 600, 5, 20, pad=2, act=1),                           # 3 pairs, 2 chunks held
    dw_config(1, 40, 30, (5, 1), 40, 1, (2, 0), act=0),           # turned, 3 chunks a tile
]
# The patch's copies (eb_dw_tile_fill_turned): a turned frame four rows at a time (then two
# or one where fewer remain in the input), its first input column odd (padding 3: a byte,
# then words), every 2nd row of a one-row kernel at stride 2, and one row a tile (two values
# a word); along the rows at stride 2 every row.
FILL_CASES = [
    dw_config(2, 40, 9, (7, 1), 1, 1, (3, 0), act=1),             # turned, odd padding
    dw_config(2, 44, 13, (9, 1), 1, 2, (4, 0), act=0),            # turned, every 2nd row
    dw_config(1, 30, 11, (5, 1), 2, (1, 2), (2, 0), act=1),       # the same, channel pairs
    dw_config(3, 21, 17, (6, 1), 1, (1, 2), (3, 0), act=0),       # even kernel, every 2nd
    dw_config(2, 12, 40, (1, 5), 1, 2, (0, 2), act=1),            # along the rows, 2nd rows
    dw_config(1, 600, 4, (9, 1), 1, 1, (4, 0), act=0),            # turned, one row a tile
    # along the rows, contiguous (eb_dw_tile_rows1): 5 values from an odd column (a word,
    # then one stepping back 3), 4 exactly after 3 of padding, 11 (2 words, back 1)
    dw_config(1, 9, 5, (2, 4), 1, 1, (1, 1), act=1),
    dw_config(2, 10, 4, (3, 6), 1, 1, (1, 3), act=0),
    dw_config(1, 8, 11, (3, 5), 1, 1, (1, 2), act=1),
]
# The one-channel rows unrolled (EB_DW_R1_SLIDE1U: 5 or more tap pairs a row at stride 1):
# entered at every step but 5 (5..17 pairs: skip 3, 2, 1, 0, 7, 6, 4, 7), one to three passes
# of 8, a turned frame, dilation 2 (single taps), a multiplier of 3 (its third channel's
# rows; a 1xK of multiplier 1 is the line kernel's), rows in the padding, both
# requantizations.
LONG_CASES = [
    dw_config(2, 4, 40, (2, 9), 1, 1, (1, 4), act=1),             # 5 pairs, 2 tap rows
    dw_config(1, 3, 41, (3, 11), 1, 1, (0, 5), act=0),            # 6 pairs
    dw_config(2, 2, 37, (2, 13), 1, 1, (1, 0), act=1),            # 7 pairs
    dw_config(1, 3, 50, (2, 16), 1, 1, (0, 8), act=0),            # 8 pairs: one whole pass
    dw_config(2, 2, 60, (2, 17), 1, 1, (0, 8), act=1),            # 9: two passes, skip 7
    dw_config(1, 2, 70, (2, 19), 1, 1, 0, act=0),                 # 10 pairs
    dw_config(1, 3, 64, (1, 24), 3, 1, (1, 11), act=1),           # 12, every 3rd channel
    dw_config(1, 2, 90, (2, 33), 1, 1, (0, 16), act=0),           # 17 pairs: three passes
    dw_config(2, 40, 5, (13, 1), 1, 1, (6, 0), act=1),            # turned, 7 pairs
    dw_config(1, 2, 25, (1, 6), 3, 1, (0, 5), dil=(1, 2), act=0), # dilation 2, 6 single taps
]
# The one-channel rows straight (EB_DW_R1_FIX_ROW, EB_DW_R2_FIX_ROW: exactly 2, 3 or 4 tap
# pairs a row at stride 1 or 2): each count square at each stride, a row kernel of 2 tap
# rows, turned (a Kx1 kernel), at dilation 2 (single taps), a multiplier of 3's third
# channel, rows in the padding, both requantizations.
FIX_CASES = [
    dw_config(2, 9, 21, (4, 4), 1, 1, (1, 2), act=1),              # 2 pairs
    dw_config(1, 11, 18, (5, 5), 1, 1, (2, 2), act=0),             # 3 pairs
    dw_config(2, 13, 14, (7, 7), 1, 1, (3, 3), act=1),             # 4 pairs
    dw_config(1, 6, 30, (2, 8), 1, 1, (1, 0), act=0),              # 4 pairs, 2 tap rows
    dw_config(2, 40, 5, (5, 1), 1, 1, (2, 0), act=1),              # turned, 3 pairs
    dw_config(1, 9, 25, (3, 3), 1, 1, (2, 2), dil=(2, 2), act=0),  # dilation 2, 3 single taps
    dw_config(1, 7, 33, (2, 6), 3, 1, (0, 2), act=1),              # 3 pairs, every 3rd channel
    dw_config(2, 15, 13, (3, 3), 1, 2, (1, 1), act=1),             # stride 2: 2 pairs
    dw_config(1, 13, 26, (5, 5), 1, 2, (2, 2), act=0),             # 3 pairs
    dw_config(2, 15, 30, (7, 7), 1, 2, (3, 3), act=1),             # 4 pairs
    dw_config(1, 40, 6, (5, 1), 1, 2, (2, 0), act=0),              # turned, 3 pairs
]
ALL_CASES = LOOP_CASES + FAN_CASES + FILL_CASES + LONG_CASES + FIX_CASES


def test_fan_cases_take_the_fan():
    """The fan cases run by the fan, over every count of tap pairs it has, in a turned
    frame and split into phases; a pair loop's case with too few channels a pair does not."""
    assert all(tile_loop(c) == "fan" for c in FAN_CASES)
    frames = [tile_frame(plane_of(c)) for c in FAN_CASES]
    assert {f.ntaps for f in frames} == set(range(1, 7))
    assert any(f.turned for f in frames) and any(f.phases > 1 for f in frames)
    assert tile_loop(dw_config(3, 9, 23, (1, 2), 4)) == "tap1"  # 1 pair, 4 channels
    assert tile_loop(dw_1d(1, 33, 9, 8, pad=4)) == "pair"  # 5 pairs, 8 channels


# A large multiplier on short rows: the fan before the column kernels (tile_better), which
# set up every output channel's every row
SHORT_ROWS = [dw_config(1, 3, 12, (5, 1), 256, pad=(2, 0), act=1),
              dw_config(1, 6, 16, (5, 1), 32, pad=(2, 0)),
              dw_config(4, 6, 10, (5, 1), 16, act=1)]


def test_short_rows_take_the_fan_before_the_columns():
    """Multipliers of 16 or more on rows of at most 16 outputs link the fan, not the column
    kernels; rows of 20 or more, or a multiplier of 4, stay on the column kernels."""
    for cfg in SHORT_ROWS:
        paths = kernel_paths(plane_of(cfg))
        assert "dw_fan" in paths and "dw_column" not in paths, (cfg, paths)
    for cfg in (dw_config(2, 6, 20, (5, 1), 16), dw_config(1, 2, 64, (5, 1), 32, pad=(2, 0)),
                dw_config(4, 9, 12, (5, 1), 4)):
        assert "dw_column" in kernel_paths(plane_of(cfg)), cfg


@needs_m4
def test_m4_short_rows_fan_beats_the_columns(lib, m4_build):  # noqa: F811
    """With "dw_fan" left out (the column kernels) and in: exact, and at least `fewer`
    instructions an output fewer (measured 6.0, 7.8, 2.1), biases of a trained layer's size
    (the fan's requantization takes them; one near the int32 limits is not the fan's)."""
    def trained(rng, count: int) -> np.ndarray:
        return rng.integers(-2**10, 2**10, size=count).astype(np.int32)
    assert_path_beats(lib, m4_build, zip(SHORT_ROWS, (4, 5, 1), strict=True), "dw_fan",
                      "fan_rows", 7, trained)

# Right shifts the fan cases run by each immediate, in both modes (relu: the even cases):
# 8 (records scaled by 2^(8 - s): s 0, 3, 5, 7, 8) and 16 (s 9, 10, 12, 16).
FAN_SHIFTS = [9, 12, 3, 16, 12, 0, 7, 8, 10, 5]


def big_biases(rng, cfg: dict) -> np.ndarray:
    """mixed_bias, and on about one channel in six 2^26 or 2^28 in magnitude: the fast
    form's, but scaled by 2^t past the limit of the sums that shift by an immediate for
    t >= 5 or 3 (the channel then takes the generic store)."""
    bias = mixed_bias(rng, cfg["out_c"]).astype(np.int64)
    big = rng.random(cfg["out_c"]) < 0.17
    bias[big] = rng.choice([-1, 1], int(big.sum())) << rng.choice([26, 28], int(big.sum()))
    return bias.astype(np.int32)


def fan_mixed(seed: int) -> list:
    """The fan cases, each at its shift of FAN_SHIFTS, with big_biases: near the int32
    limits (the fast requantization does not take them: the fan stops at the first and the
    other loops run the rest of the channels) or past the scaled sums' limit, data drawn
    from seed."""
    rng = np.random.default_rng(seed)
    convs = []
    for i, cfg in enumerate(FAN_CASES):
        cfg = {**cfg, "shift": -FAN_SHIFTS[i]}
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, big_biases(rng, cfg)))
    return convs


def loops_mixed(seed: int) -> list:
    """The loop and grouped cases at right shifts 0..16 in turn (the row functions' forms
    by 8 and by 16), with big_biases."""
    rng = np.random.default_rng(seed)
    convs = []
    for i, cfg in enumerate(LOOP_CASES + FILL_CASES + GROUP_CASES):
        cfg = {**cfg, "shift": -[9, 3, 12, 8, 16, 0, 7][i % 7]}
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, big_biases(rng, cfg)))
    return convs


def test_fan_mixed_biases_equal_reference(lib):  # noqa: F811
    for cfg, x, w, bias in fan_mixed(32):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, False)
        np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


@needs_m4
@pytest.mark.parametrize("mixed", [fan_mixed, loops_mixed])
def test_m4_mixed_biases_equal_reference(lib, m4_build, mixed):  # noqa: F811
    elf = build_m4(m4_build, f"dw_{mixed.__name__}",
                   m4_test_program(lib, mixed(33), linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


def test_loops_mixed_biases_equal_reference(lib):  # noqa: F811
    for cfg, x, w, bias in loops_mixed(34):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, False)
        np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def test_fill_cases_take_each_copy():
    """The fill cases' frames: turned two rows at a time (tiles of 2 rows or more), with
    rows skipped (a one-row kernel at stride 2), and one row a tile; along the rows, every
    2nd, and contiguous from an odd first column (padding 1 and 3) and an even one."""
    frames = [tile_frame(plane_of(c)) for c in FILL_CASES]
    rows = [tile_shape(f)[0] for f in frames]
    assert [f.turned for f in frames] == [True] * 4 + [False, True] + [False] * 3
    assert [f.k_h == 1 and f.s_h == 2 for f in frames] == \
        [False, True, True, True, True, False, False, False, False]
    assert min(rows[:5]) >= 2 and rows[5] == 1, rows
    assert [fill_cost(f) for f in frames] == [30] * 4 + [15, 45] + [15] * 3
    assert [(c["pad_w"] % 2, c["in_w"]) for c in FILL_CASES[6:]] == [(1, 5), (1, 4), (0, 11)]
    assert all(takes_tile(c) for c in FILL_CASES[6:])


def test_phase_cases_split():
    """The phase cases (and the dilation-2 k11 one) run split into phases, in dilation-1
    frames whose taps pair; a dilation at stride 2 is not split."""
    phases = [tile_frame(plane_of(c)).phases for c in LOOP_CASES]
    assert phases[-4:] == [3, 2, 2, 2] and phases[7] == 2, phases
    assert all(tile_frame(plane_of(c)).d_w == 1 for c in LOOP_CASES[-3:])
    assert tile_frame(plane_of(dw_1d(2, 64, 5, 1, stride=2, pad=4, dil=2))).phases == 1
    # nor a short row: fewer than 16 outputs a phase (a 7x7 dilation-2 on 2 x 18 maps)
    assert tile_frame(plane_of(dw_config(3, 2, 18, 7, 1, 1, 6, dil=2))).phases == 1


def test_long_cases_take_the_unrolled_rows():
    """The long cases are predicted on the unrolled rows ("dw_tile_long"), with 5 to 17 tap
    pairs a row (every entry step, up to three passes); rows of 4 pairs are not."""
    pairs = [tile_frame(plane_of(c)).pairs for c in LONG_CASES]
    assert all("dw_tile_long" in kernel_paths(plane_of(c), lines=False) for c in LONG_CASES)
    assert pairs == [5, 6, 7, 8, 9, 10, 12, 17, 7, 6], pairs
    assert {-n % 8 for n in pairs} == set(range(8)) - {5}, pairs
    assert "dw_tile_long" not in kernel_paths(plane_of(dw_config(2, 4, 40, (2, 7), 1)))


def test_fix_cases_take_the_straight_rows():
    """The fix cases are predicted on the straight rows of their count and stride
    ("dw_tile_fix2" .., "dw_tile_fix2_s2" ..), every count at each stride, turned and at
    dilation 2 among them; rows of 5 pairs are not."""
    frames = [tile_frame(plane_of(c)) for c in FIX_CASES]
    assert all(f"dw_tile_fix{f.pairs}" + ("_s2" if f.s_w == 2 else "")
               in kernel_paths(plane_of(c), lines=False)
               for c, f in zip(FIX_CASES, frames, strict=True))
    assert {(f.pairs, f.s_w) for f in frames} == {(p, s) for p in (2, 3, 4) for s in (1, 2)}
    assert any(f.turned for f in frames) and any(f.d_w == 2 for f in frames)
    paths = kernel_paths(plane_of(dw_config(2, 4, 40, (2, 9), 1, 1, (1, 4))), lines=False)
    assert not any(p.startswith("dw_tile_fix") for p in paths), paths


def test_loop_cases_take_each_loop():
    """The fixed cases reach every loop (so the M4 test below runs each assembly loop)."""
    loops = [tile_loop(cfg) for cfg in ALL_CASES]
    assert all(takes_tile(cfg) for cfg in ALL_CASES)
    assert set(loops) == {"fan", "tap1", "pair", "slide1", "slide2", "generic"}, loops
    turned = {tile_loop(c) for c in ALL_CASES if tile_frame(plane_of(c)).turned}
    assert {"pair", "slide1", "fan"} <= turned, turned


@needs_m4
@pytest.mark.parametrize("quant", [0, 3])
def test_m4_tile_loops_equal_reference(lib, m4_build, quant):  # noqa: F811
    """Each loop's case (and each grouped case: GROUP_CASES) under QEMU, in its case's
    requantization and in a generic one."""
    cfgs = [cfg if quant == 0 else {**cfg, **QUANTS[quant]} for cfg in ALL_CASES + GROUP_CASES]
    m4_run(lib, cfgs, 7 + quant, m4_build, f"dw_tile_loops{quant}")


@needs_m4
@settings(max_examples=5, deadline=None)
@given(cfgs=st.lists(tile_layers(), min_size=6, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_m4_tile_kernel_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "dw_tile")


# ---- dense and grouped convs on the tile kernel (a group's input channels in the patch) ----

def grouped(cfg: dict, groups: int, out_c: int) -> dict:
    """cfg (a depthwise layer's shape) with `groups` groups and out_c outputs."""
    return {**cfg, "groups": groups, "out_c": out_c}


# One of each loop the tile kernel runs them on: one channel turned (a Kx1 kernel, 3 and 2
# input channels), along the rows at stride 1 (1-D, padded), the fan (3 -> 32 2x1 turned,
# 2 -> 16 3x1, a 1-D layer laid as a column), the pair loop (8 channels in 2 groups -> 4,
# 9x1); a 2x2 kernel padded on all sides (tap rows in the padding: the table's rows of
# chans x pairs left out).
GROUP_CASES = [
    grouped(dw_config(3, 30, 6, (15, 1), 1, act=1), 1, 1),
    grouped(dw_config(3, 26, 16, (12, 1), 1, 1, (5, 0), act=0), 1, 1),
    grouped(dw_1d(2, 60, 15, 1, pad=7, act=1), 1, 1),
    grouped(dw_config(3, 14, 11, (2, 1), 1, act=1), 1, 32),
    grouped(dw_config(2, 20, 9, (3, 1), 1, 1, (1, 0), act=0), 1, 16),
    grouped(dw_1d(2, 40, 3, 1, pad=1, vertical=True, act=1), 1, 24),
    grouped(dw_config(8, 25, 7, (9, 1), 1, 1, (4, 0), act=0), 2, 4),
    grouped(dw_config(4, 9, 10, 2, 1, 1, 1, act=1), 2, 8),
]


def test_group_cases_take_the_tile_kernel():
    """The grouped cases run on the tile kernel, over each of its loops and frames; a conv
    the GEMM or the column kernels run cheaper does not."""
    assert all(group_tile(plane_of(c)) for c in GROUP_CASES)
    loops = {tile_loop(c) for c in GROUP_CASES}
    assert {"fan", "pair", "slide1"} <= loops, loops
    assert {tile_frame(plane_of(c)).turned for c in GROUP_CASES} == {False, True}
    assert tile_frame(plane_of(GROUP_CASES[-1])).chans == 2
    big = grouped(dw_config(6, 10, 15, 5, 1, 1, 2), 1, 96)  # K = 150 over 96 rows: GEMM
    strided = grouped(dw_config(8, 102, 12, (5, 1), 1, 2, (2, 0)), 1, 1)  # 5x1 stride 2
    assert not group_tile(plane_of(big)) and not group_tile(plane_of(strided))
    assert "dw_column" in kernel_paths(plane_of(strided))


@pytest.mark.parametrize("index", range(len(GROUP_CASES)))
def test_group_cases_equal_reference(lib, index):  # noqa: F811
    for quant in QUANTS:
        assert_conv_opt_exact(lib, {**GROUP_CASES[index], **quant}, 32 + index, True)


def group_layers() -> st.SearchStrategy[dict]:
    """A dense or grouped conv the tile kernel takes: a depthwise shape with 1-4 input
    channels a group, 1-2 groups and 1-32 outputs a group."""
    def build(cfg, ipg, groups, m):
        return {**cfg, "in_c": ipg * groups, "groups": groups, "out_c": m * groups}
    return st.builds(build, dw_layers(in_c=(1, 1), m=st.just(1), quant=st.sampled_from(QUANTS),
                                      hw=(18, 22), k2=7, pad2=5, length=90, k1=15, pad1=8),
                     st.integers(2, 4), st.integers(1, 2),
                     st.sampled_from([1, 1, 2, 3, 4, 8, 32])).filter(
                         lambda c: group_tile(plane_of(c)))


# about one drawn shape in four is one the tile kernel takes (the others: GEMM, column)
FILTERED = [HealthCheck.filter_too_much, HealthCheck.too_slow]


@settings(max_examples=150, deadline=None, suppress_health_check=FILTERED)
@given(cfg=group_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_group_tile_equals_reference(lib, cfg, seed, with_bias):  # noqa: F811
    assert_conv_opt_exact(lib, cfg, seed, with_bias)


@needs_m4
@settings(max_examples=3, deadline=None, suppress_health_check=FILTERED)
@given(cfgs=st.lists(group_layers(), min_size=4, max_size=6), seed=st.integers(0, 2**32 - 1))
def test_m4_group_tile_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    m4_run(lib, cfgs, seed, m4_build, "dw_group")
