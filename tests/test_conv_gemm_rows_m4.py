"""The im2col/GEMM convolution's hand-written Cortex-M4 row functions (eb_kernels_opt.c:
eb_gemm4_relu / eb_gemm4_none, the whole row loop of a 4-pixel block in assembly, and
EB_GEMM_ROW_ASM, a row's weight words for the other modes) against the reference kernels
under QEMU, on hypothesis-drawn layers: the host never runs that code (portable C).

Each example is one firmware of several dense or grouped convs (the strategies of
tests/test_conv_gemm_opt.py and tests/test_conv_gemm_m4.py: 1-D and 2-D, odd channel counts,
strides, padding, dilation, groups, so K % 4 = 0..3 and any number of whole weight words),
each compared with eb_conv2d / eb_conv2d_wide; the bias random, absent, or near the int32
limits on some rows only (the assembly stops at such a row and the C loop takes the rest;
tests/test_conv_gemm_m4.py has layers with every row so)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conv_gemm_m4 import wide_convs
from test_conv_gemm_opt import gemm_convs
from test_kernels_opt import (
    build_m4,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    random_bias,
    run_qemu,
)


def case_bias(rng, cfg: dict, kind: str) -> np.ndarray | None:
    """Random, none, or random with a few rows near the int32 limit (exact rows)."""
    if kind == "none":
        return None
    bias = random_bias(rng, cfg["out_c"])
    if kind == "random" or bias is None:
        return bias
    k = cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"]
    top = 2**31 - 1 - k * 16384
    rows = rng.integers(cfg["out_c"], size=max(1, cfg["out_c"] // 3))
    bias[rows] = rng.integers(top - 2**12, top, size=rows.size)
    return bias


@needs_m4
@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(cfgs=st.lists(st.one_of(wide_convs(), gemm_convs()), min_size=6, max_size=10),
       seed=st.integers(0, 2**32 - 1),
       kinds=st.lists(st.sampled_from(["random", "random", "none", "extreme"]), min_size=10,
                      max_size=10))
def test_m4_gemm_rows_equal_reference(lib, m4_build, cfgs, seed, kinds):  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = []
    for cfg, kind in zip(cfgs, kinds[:len(cfgs)], strict=True):
        x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
        w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                 cfg["k_w"]))
        convs.append((cfg, x, w, case_bias(rng, cfg, kind)))
    elf = build_m4(m4_build, "gemm_rows", m4_test_program(lib, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
