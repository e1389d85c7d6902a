"""The depthwise padded path reusing its buffer across channels (eb_dw_opt.c, eb_dw_refill:
when the buffer holds a whole padded plane, the next channel rewrites only its in-plane rows,
pooled (the fused 2x2 max pool, SSUB8/SEL and PKH/UXTB16 on the M4) or copied, and the zeros
of the padding stay). Hypothesis-drawn layers with several channels, pooled widths a multiple
of four and not (the pool's whole groups and its overlapping last group), odd sizes, pads
0..3, and biases near the int32 limits on some channels, so that a channel taking the
generic requantization (which does not touch the buffer) sits between two that refill it;
bit-identical to the reference on the host and on the Cortex-M4 under QEMU."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, POOL_FIELDS
from test_kernels_dw_m4 import column_layers
from test_kernels_dw_pool import fused_layers, run_fused
from test_kernels_opt import (
    SCRATCH,
    assert_m4_exact,
    build_m4,
    c_array,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    needs_m4,
    run_conv_pair,
)

NEAR_LIMIT = (2**31 - 50, -(2**31) + 50)  # biases the fast requantization does not take


def mixed_bias(rng, count: int) -> np.ndarray:
    """Small biases, with about one channel in three near an int32 limit."""
    bias = rng.integers(-2000, 2000, size=count).astype(np.int64)
    for i in range(count):
        if rng.random() < 0.35:
            bias[i] = NEAR_LIMIT[int(rng.integers(0, 2))]
    return bias.astype(np.int32)


def several_channels(case: dict, channels: int) -> dict:
    """A fused case with `channels` input channels (and its multiplier kept)."""
    pool, conv = dict(case["pool"]), dict(case["conv"])
    m = conv["out_c"] // conv["in_c"]
    pool["c"] = conv["in_c"] = conv["groups"] = channels
    conv["out_c"] = m * channels
    return {"pool": pool, "conv": conv}


@settings(max_examples=60, deadline=None)
@given(case=fused_layers(widest=72), channels=st.integers(3, 7), seed=st.integers(0, 2**32 - 1))
def test_fused_refill_equals_reference(lib, case, channels, seed):  # noqa: F811
    case = several_channels(case, channels)
    rng = np.random.default_rng(seed)
    conv = case["conv"]
    x, w = dw_data({**conv, "in_h": case["pool"]["in_h"], "in_w": case["pool"]["in_w"]}, rng)
    ref, out = run_fused(lib, case, x, w, mixed_bias(rng, conv["out_c"]))
    np.testing.assert_array_equal(out, ref, err_msg=str(case))


@settings(max_examples=60, deadline=None)
@given(cfg=column_layers(), channels=st.integers(3, 7), seed=st.integers(0, 2**32 - 1))
def test_copy_refill_equals_reference(lib, cfg, channels, seed):  # noqa: F811
    m = cfg["out_c"] // cfg["in_c"]
    cfg = {**cfg, "in_c": channels, "groups": channels, "out_c": m * channels}
    rng = np.random.default_rng(seed)
    x, w = dw_data(cfg, rng)
    ref, opt = run_conv_pair(lib, cfg, x, w, mixed_bias(rng, cfg["out_c"]), False)
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def fused_program(lib, cases, rng) -> str:  # noqa: F811
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_kernels.h"\n'
             '#include "eb_dw_opt.h"\n#include "eb_kernels_opt.h"\n']
    calls, most = [], 16
    for i, case in enumerate(cases):
        conv = case["conv"]
        x, w = dw_data({**conv, "in_h": case["pool"]["in_h"], "in_w": case["pool"]["in_w"]},
                       rng)
        bias = mixed_bias(rng, conv["out_c"])
        ref, _ = run_fused(lib, case, x, w, bias)
        most = max(most, conv["in_c"] * conv["in_h"] * conv["in_w"], ref.size)
        q = ", ".join(str(case["pool"][k]) for k in (*POOL_FIELDS, "mode", "rounding"))
        p = ", ".join(str(conv[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"
        parts += [f"static const eb_pool_params q{i} = {{{q}}};\n",
                  f"static const eb_conv_params p{i} = {{{p}}};\n",
                  c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e{i}", ref), c_array("int32_t", f"b{i}", bias)]
        calls.append(f"eb_dw_pool_conv_opt(&q{i}, &p{i}, x{i}, pooled, w{i}, b{i}, out, "
                     f"scratch);\n"
                     f"bad += memcmp(out, e{i}, {ref.size}) != 0;\n")
    parts.append(f"static int8_t pooled[{most}], out[{most}];\n{SCRATCH}")
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "    ".join(calls) +
                 '    printf("%d mismatching calls\\n", bad);\n    return bad != 0;\n}\n')
    return "".join(parts)


@needs_m4
@settings(max_examples=2, deadline=None)
@given(cases=st.lists(st.tuples(fused_layers(widest=60), st.integers(3, 6)), min_size=4,
                      max_size=6),
       cfgs=st.lists(column_layers(), min_size=4, max_size=6), seed=st.integers(0, 2**32 - 1))
def test_m4_refill_equals_reference(lib, m4_build, cases, cfgs, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    fused = [several_channels(case, n) for case, n in cases]
    assert_m4_exact(build_m4(m4_build, "dw_refill_pool", fused_program(lib, fused, rng)),
                    "dw_refill_pool")
    convs = []
    for cfg in cfgs:
        m = cfg["out_c"] // cfg["in_c"]
        cfg = {**cfg, "in_c": 4, "groups": 4, "out_c": 4 * m}
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, mixed_bias(rng, cfg["out_c"])))
    m4_convs_exact(lib, m4_build, "dw_refill_copy", convs)
