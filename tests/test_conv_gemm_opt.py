"""The optimized kernels' im2col/GEMM convolution (eb_conv2d(_wide)_opt, dense and grouped)
against the reference kernels on the host, on hypothesis-drawn shapes (portable C; the
KAT runs the same algorithm on the Cortex-M4 under QEMU):

* 4-pixel blocks inside one output row, blocks spanning output rows (built row by row from
  word loads and merged by lanes) and a layer's last, partial block, 1-D and 2-D, any width;
* odd channel counts, strides, padding, dilation, groups;
* requantization straight from the registers (right shifts, none/relu, both roundings), the
  exact fallbacks (left shifts, abs, a bias so large that the rounding addend could
  overflow int32) and wide outputs.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernels_opt import (
    conv_out,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    random_bias,
    run_conv_pair,
)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no host C compiler")


@st.composite
def gemm_convs(draw) -> dict:
    """Dense or grouped (not depthwise: that is its own path) convs, small maps."""
    groups = draw(st.sampled_from([1, 1, 1, 2, 3]))
    in_c = groups * draw(st.integers(1, 7))
    out_c = groups * draw(st.integers(1, 9))
    assume(not (groups == in_c and groups > 1))
    one_d = draw(st.booleans())
    pick = st.integers
    cfg = {"in_c": in_c, "out_c": out_c, "groups": groups,
           "in_h": 1 if one_d else draw(pick(1, 9)), "in_w": draw(pick(1, 30)),
           "k_h": 1 if one_d else draw(pick(1, 4)), "k_w": draw(pick(1, 5)),
           "stride_h": 1 if one_d else draw(pick(1, 2)),
           "stride_w": draw(st.sampled_from([1, 1, 1, 2, 3])),
           "pad_h": 0 if one_d else draw(pick(0, 2)), "pad_w": draw(pick(0, 3)),
           "dil_h": 1 if one_d else draw(pick(1, 2)), "dil_w": draw(pick(1, 2)),
           "shift": draw(st.sampled_from([-12, -9, -7, -3, -1, 0, 0, 2])),
           "rounding": draw(pick(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"],
                            cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"],
                            cfg["dil_w"])
    assume(cfg["out_h"] >= 1 and cfg["out_w"] >= 1)
    return cfg


def check(lib, cfg, seed, bias_kind):  # noqa: F811 (lib: the fixture)
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    if bias_kind == "random":
        bias = random_bias(rng, cfg["out_c"])
    elif bias_kind == "none":
        bias = None
    else:  # near the int32 limits, where bias + 2^(s-1) + the sums could overflow
        k = cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"]
        top = 2**31 - 1 - k * 16384
        bias = rng.integers(top - 2**12, top, size=cfg["out_c"]).astype(np.int32)
        bias[rng.integers(cfg["out_c"])] = -2**31 + k * 16384
    for wide in (True, False):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


@settings(max_examples=400, deadline=None)
@given(cfg=gemm_convs(), seed=st.integers(0, 2**32 - 1),
       bias_kind=st.sampled_from(["random", "random", "none", "extreme"]))
def test_gemm_conv_opt_random(lib, cfg, seed, bias_kind):  # noqa: F811
    check(lib, cfg, seed, bias_kind)


@pytest.mark.parametrize("in_w, out_h", [(6, 3), (5, 4), (7, 2), (9, 3), (4, 3)])
def test_blocks_across_rows(lib, in_w, out_h):  # noqa: F811
    """Widths not a multiple of 4: blocks take lanes from two or three output rows."""
    cfg = {"in_c": 3, "out_c": 5, "groups": 1, "in_h": out_h, "in_w": in_w, "k_h": 3,
           "k_w": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1,
           "dil_w": 1, "shift": -7, "rounding": 0, "act": 1, "out_h": out_h, "out_w": in_w}
    for seed in range(4):
        check(lib, cfg, seed, "random")
