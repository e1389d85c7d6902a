"""The 3-tap rows two output channels a pass (eb_dw_opt.c: eb_dw3_row with `two`, a depthwise
multiplier >= 2 on the rows the padded path does not take -- 1-D layers, 3x3 layers with one
output row or rows too wide for its buffer): one input word split once for both channels.
Multipliers 2-4 (an odd one: a channel left for a pass of its own), tap rows in the padding
(their weights zeroed for both channels), biases near the int32 limits on about a third of
the channels (those run in the generic requantization, in passes of their own), on the host
and on the Cortex-M4 under QEMU: bit-identical to the reference kernel. A pair shifts by an
immediate (8 for right shifts 0..8, 16 for 9..16: its weights and starts scaled), so its
shifts are drawn either side of those ranges, and its starts either side of the limit past
which a scaled sum could overflow (those channels go one at a time)."""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_dw_m4 import bands, limit_case, shift_count
from test_kernels_dw_refill import mixed_bias
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

PAIR_CASES = [
    dw_1d(3, 97, 3, 3, pad=1, act=1, rounding=1),          # 1-D, a pair and a lone channel
    dw_1d(2, 9, 3, 2, act=0),                              # short rows, no padding
    dw_1d(2, 40, 3, 4, pad=1, act=1, shift=-12),           # two pairs a channel
    dw_config(2, 3, 30, 3, 2, pad=(0, 1), act=1),          # 3x3, one output row
    dw_config(3, 1, 25, 3, 2, pad=1, act=0, shift=-9, rounding=1),  # tap rows 0, 2 padding
    dw_config(1, 5, 600, 3, 2, pad=1, act=1),              # 3x3, too wide for the buffer
    dw_config(2, 4, 560, 3, 3, pad=(1, 2), act=0, rounding=1),  # the same, multiplier 3
]


# right shifts either side of the immediate forms' ranges (0..8 -> 8, 9..16 -> 16, 17: none)
SHIFT_CASES = [dw_1d(2, 37, 3, 2, pad=1, act=i % 2, rounding=(i // 2) % 2, shift=-sh)
               for i, sh in enumerate((0, 1, 8, 9, 12, 16, 17))] + [
    # 3x3 on two rows too wide for the padded path's buffer, padded by 3: the first and last
    # output rows' taps all in the padding
    # (their outputs the pairs' scaled starts alone)
    dw_config(1, 2, 600, 3, 2, pad=(3, 1), act=1, shift=-5),
    dw_config(1, 2, 600, 3, 2, pad=(3, 1), act=0, shift=-11, rounding=1)]


def test_pair_cases_take_the_rows():
    """Each case is a 3-tap layer (k_w 3, stride 1) with a multiplier of 2 or more that the
    padded path leaves to the rows: 1-D, or fewer than two rows a band."""
    for cfg in PAIR_CASES + SHIFT_CASES:
        assert cfg["k_w"] == 3 and cfg["stride_w"] == 1 and cfg["out_c"] >= 2 * cfg["in_c"]
        if cfg["k_h"] == 3:
            assert cfg["out_h"] < 2 or bands(cfg) < 2, cfg


@pytest.mark.parametrize("index", range(len(PAIR_CASES)))
def test_pair_cases_equal_reference(lib, index):  # noqa: F811
    cfg = PAIR_CASES[index]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x, w = dw_data(cfg, rng)
        bias = mixed_bias(rng, cfg["out_c"])
        for wide in (False, True):
            ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
            np.testing.assert_array_equal(opt, ref, err_msg=f"seed {seed} wide={wide} {cfg}")


@needs_m4
def test_m4_pair_cases_equal_reference(lib, m4_build):  # noqa: F811
    rng = np.random.default_rng(32)
    convs = []
    for cfg in PAIR_CASES:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, mixed_bias(rng, cfg["out_c"])))
    m4_convs_exact(lib, m4_build, "dw3_pairs", convs)


def _limit_case(sh: int, sign: int) -> tuple:
    """A 1-D k3 pair layer at the limit of its scaled starts (3 products: 2 pairs;
    test_kernels_dw_m4.limit_case): one apart up to the limit, then to twice it, pairs with
    both channels at it -- a pair past the limit would overflow and saturate wrong."""
    return limit_case(dw_1d(8, 12, 3, 2, pad=1, act=0, rounding=1, shift=-sh), 2, sign,
                      lambda lim: [lim - 2, lim - 1, lim, lim, lim + 1, lim + 1, lim, lim + 5,
                                   2 * lim, lim, lim - 1, 2 * lim - 9, lim + 2, lim + 2, 3, -3])


LIMIT_CASES = [_limit_case(sh, sign) for sh in (1, 8, 9, 16) for sign in (1, -1)]


@pytest.mark.parametrize("index", range(len(SHIFT_CASES)))
def test_pair_shifts_equal_reference(lib, index):  # noqa: F811
    cfg = SHIFT_CASES[index]
    rng = np.random.default_rng(index)
    x, w = dw_data(cfg, rng)
    for bias in (rng.integers(-3000, 3000, size=cfg["out_c"]).astype(np.int32),
                 mixed_bias(rng, cfg["out_c"])):
        for wide in (False, True):
            ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
            np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


@pytest.mark.parametrize("index", range(len(LIMIT_CASES)))
def test_pair_starts_at_the_limit_equal_reference(lib, index):  # noqa: F811
    cfg, x, w, bias = LIMIT_CASES[index]
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, False)
    np.testing.assert_array_equal(opt, ref, err_msg=f"{cfg} {bias}")


@needs_m4
def test_m4_pair_shifts_and_limits_equal_reference(lib, m4_build):  # noqa: F811
    rng = np.random.default_rng(33)
    convs = list(LIMIT_CASES)
    for cfg in SHIFT_CASES:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, mixed_bias(rng, cfg["out_c"])))
    m4_convs_exact(lib, m4_build, "dw3_pair_shifts", convs)


@needs_m4
def test_m4_pairs_shift_by_an_immediate(lib, m4_build):  # noqa: F811
    """A pair layer (1-D k3, multiplier 2) whose right shift has an immediate form runs
    fewer instructions an output than the same layer at a shift of 17, which has none (its
    channels then go one at a time, an ASR by the shift before each saturation)."""
    counts = {sh: shift_count(lib, m4_build, "dw3_pair_imm",
                              dw_1d(4, 96, 3, 2, pad=1, act=1, shift=-sh)) for sh in (7, 17)}
    outputs = 8 * 96 * 2  # out_c x out_w, narrow and wide calls
    assert counts[7] <= counts[17] - outputs // 2, counts
