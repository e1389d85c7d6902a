"""The 3-tap rows two output channels a pass (eb_dw_opt.c: eb_dw3_row with `two`, a depthwise
multiplier >= 2 on the rows the padded path does not take -- 1-D layers, 3x3 layers with one
output row or rows too wide for its buffer): one input word split once for both channels.
Multipliers 2-4 (an odd one: a channel left for a pass of its own), tap rows in the padding
(their weights zeroed for both channels), biases near the int32 limits on about a third of
the channels (those run in the generic requantization, in passes of their own), on the host
and on the Cortex-M4 under QEMU: bit-identical to the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_dw_m4 import bands
from test_kernels_dw_refill import mixed_bias
from test_kernels_opt import (
    build_m4,
    dw_1d,
    dw_config,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    run_conv_pair,
    run_qemu,
)

PAIR_CASES = [
    dw_1d(3, 97, 3, 3, pad=1, act=1, rounding=1),          # 1-D, a pair and a lone channel
    dw_1d(2, 9, 3, 2, act=0),                              # short rows, no padding
    dw_1d(2, 40, 3, 4, pad=1, act=1, shift=-12),           # two pairs a channel
    dw_config(2, 3, 30, 3, 2, pad=(0, 1), act=1),          # 3x3, one output row
    dw_config(3, 1, 25, 3, 2, pad=1, act=0, shift=-9, rounding=1),  # tap rows 0, 2 padding
    dw_config(1, 5, 300, 3, 2, pad=1, act=1),              # 3x3, too wide for the buffer
    dw_config(2, 4, 260, 3, 3, pad=(1, 2), act=0, rounding=1),  # the same, multiplier 3
]


def test_pair_cases_take_the_rows():
    """Each case is a 3-tap layer (k_w 3, stride 1) with a multiplier of 2 or more that the
    padded path leaves to the rows: 1-D, or fewer than two rows a band."""
    for cfg in PAIR_CASES:
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
    elf = build_m4(m4_build, "dw3_pairs", m4_test_program(lib, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
