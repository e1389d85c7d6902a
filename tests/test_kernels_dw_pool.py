"""A depthwise 3x3 stride-1 conv after its fused 2x2 stride-2 max pool in one call
(eb_dw_pool_conv_opt, eb_dw_opt.c: each channel pooled straight into the depthwise path's
padded copy) against the reference eb_pool2d then eb_conv2d, on hypothesis-drawn shapes:
odd input sizes (the pool drops the last row / column), pads 0..3, channel multipliers,
every activation and rounding, right and left shifts (the generic requantization pools a
channel on its own), biases or none, pooled rows wide enough for bands and too wide for the
buffer (the whole-layer fallback); on the host (portable C) and on the Cortex-M4 under QEMU
(SSUB8/SEL, the inline-asm column loop)."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, POOL_FIELDS, ConvParams, PoolParams
from test_kernels_opt import (
    I8,
    I16,
    I32,
    P8,
    P16,
    P32,
    SCRATCH,
    build_m4,
    c_array,
    check_scratch,
    conv_out,
    conv_scratch_elements,
    dw_data,
    guarded,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    params_of,
    ptr,
    random_bias,
    run_qemu,
    scratch_buffer,
)

EB_POOL_MAX = 0


@st.composite
def fused_layers(draw, widest: int = 320) -> dict:
    """(pool, conv) configurations: the pool's input in_c x h x w, the conv on its output."""
    in_c, m = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    h, w = draw(st.integers(2, 30)), draw(st.integers(8, widest))
    pad_h, pad_w = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    ph, pw = h // 2, w // 2
    if conv_out(ph, 3, 1, pad_h, 1) < 1:
        pad_h = 1
    conv = {"in_c": in_c, "in_h": ph, "in_w": pw, "out_c": m * in_c, "k_h": 3, "k_w": 3,
            "stride_h": 1, "stride_w": 1, "pad_h": pad_h, "pad_w": pad_w, "dil_h": 1,
            "dil_w": 1, "groups": in_c, "shift": draw(st.sampled_from([-1, -6, -9, -12, 0, 2])),
            "rounding": draw(st.integers(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    conv["out_h"], conv["out_w"] = conv_out(ph, 3, 1, pad_h, 1), conv_out(pw, 3, 1, pad_w, 1)
    pool = {"c": in_c, "in_h": h, "in_w": w, "out_h": ph, "out_w": pw, "k_h": 2, "k_w": 2,
            "stride_h": 2, "stride_w": 2, "mode": EB_POOL_MAX, "rounding": 0}
    return {"pool": pool, "conv": conv}


def layer_data(case: dict, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    pool, conv = case["pool"], case["conv"]
    x, w = dw_data({**conv, "in_h": pool["in_h"], "in_w": pool["in_w"]}, rng)
    return x, w, random_bias(rng, conv["out_c"])


def run_fused(lib, case: dict, x, w, bias) -> tuple[np.ndarray, np.ndarray]:  # noqa: F811
    """(reference, fused) outputs."""
    for name, args in (("eb_pool2d", [ctypes.POINTER(PoolParams), P8, P8]),
                       ("eb_dw_pool_conv_opt", [ctypes.POINTER(PoolParams),
                                                ctypes.POINTER(ConvParams), P8, P8, P8, P32,
                                                P8, P16])):
        getattr(lib, name).argtypes, getattr(lib, name).restype = args, None
    pool, conv = PoolParams(**case["pool"]), params_of(case["conv"])
    c = case["conv"]
    n_pooled, count = c["in_c"] * c["in_h"] * c["in_w"], c["out_c"] * c["out_h"] * c["out_w"]
    pooled, ref = guarded(n_pooled, np.int8), guarded(count, np.int8)
    lib.eb_pool2d(ctypes.byref(pool), ptr(x, I8), ptr(pooled, I8))
    lib.eb_conv2d(ctypes.byref(conv), ptr(pooled, I8), ptr(w, I8), ptr(bias, I32), ptr(ref, I8))
    scratch, out = guarded(n_pooled, np.int8), guarded(count, np.int8)
    need = conv_scratch_elements(lib, c)
    buf = scratch_buffer(need)
    lib.eb_dw_pool_conv_opt(ctypes.byref(pool), ctypes.byref(conv), ptr(x, I8),
                            ptr(scratch, I8), ptr(w, I8), ptr(bias, I32), ptr(out, I8),
                            ptr(buf, I16))
    assert (scratch[n_pooled:] == 0x5A).all() and (out[count:] == 0x5A).all(), "wrote past"
    check_scratch(buf, need, "eb_dw_pool_conv_opt")
    return ref[:count], out[:count]


@settings(max_examples=80, deadline=None)
@given(case=fused_layers(), seed=st.integers(0, 2**32 - 1))
def test_dw_pool_conv_equals_reference(lib, case, seed):  # noqa: F811
    ref, out = run_fused(lib, case, *layer_data(case, np.random.default_rng(seed)))
    np.testing.assert_array_equal(out, ref, err_msg=str(case))


@settings(max_examples=10, deadline=None)
@given(case=fused_layers(widest=1100))
def test_dw_pool_conv_rows_too_wide_for_the_buffer(lib, case):  # noqa: F811
    """Pooled rows of 550 bytes do not fit two bands in 2 KiB: pool, then convolve."""
    case["pool"].update(in_w=1100, out_w=550)
    case["conv"].update(in_w=550, out_w=conv_out(550, 3, 1, case["conv"]["pad_w"], 1))
    ref, out = run_fused(lib, case, *layer_data(case, np.random.default_rng(3)))
    np.testing.assert_array_equal(out, ref)


def m4_program(lib, cases, rng) -> str:  # noqa: F811
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_kernels.h"\n'
             '#include "eb_dw_opt.h"\n#include "eb_kernels_opt.h"\n']
    calls, most = [], 16
    for i, case in enumerate(cases):
        x, w, bias = layer_data(case, rng)
        ref, _ = run_fused(lib, case, x, w, bias)
        c = case["conv"]
        most = max(most, c["in_c"] * c["in_h"] * c["in_w"], ref.size)
        q = ", ".join(str(case["pool"][k]) for k in (*POOL_FIELDS, "mode", "rounding"))
        p = ", ".join(str(c[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"
        parts += [f"static const eb_pool_params q{i} = {{{q}}};\n",
                  f"static const eb_conv_params p{i} = {{{p}}};\n",
                  c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e{i}", ref)]
        if bias is not None:
            parts.append(c_array("int32_t", f"b{i}", bias))
        b = f"b{i}" if bias is not None else "NULL"
        calls.append(f"eb_dw_pool_conv_opt(&q{i}, &p{i}, x{i}, pooled, w{i}, {b}, out, scratch);\n"
                     f"bad += memcmp(out, e{i}, {ref.size}) != 0;\n")
    parts.append(f"static int8_t pooled[{most}], out[{most}];\n{SCRATCH}")
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "    ".join(calls) +
                 '    printf("%d mismatching calls\\n", bad);\n    return bad != 0;\n}\n')
    return "".join(parts)


@needs_m4
@settings(max_examples=2, deadline=None)
@given(cases=st.lists(fused_layers(widest=60), min_size=4, max_size=6),
       seed=st.integers(0, 2**32 - 1))
def test_m4_dw_pool_conv_equals_reference(lib, m4_build, cases, seed):  # noqa: F811
    elf = build_m4(m4_build, "dw_pool", m4_program(lib, cases, np.random.default_rng(seed)))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
