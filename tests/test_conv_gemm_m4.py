"""The optimized GEMM convolution (eb_conv2d(_wide)_opt, dense and grouped) on the Cortex-M4
under QEMU, on hypothesis-drawn shapes: on the M4 its dot loops are hand-scheduled inline
assembly (4 weight words per step, LDMIA of the interleaved columns), which the host tests
(portable C, the twin) never run. Shapes as in test_conv_gemm_opt (odd channel counts,
strides, padding, dilation, groups, 1-D and 2-D, partial blocks, blocks spanning rows) plus
wider ones whose K = in_c / groups * k_h * k_w takes the assembly loop once or many times
with every remainder (K % 16); every requantization (fast none/relu, the exact fallbacks,
wide outputs). Each example is one firmware of several layers, each compared with the
reference kernel."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_conv_gemm_opt import gemm_convs
from test_kernels_opt import (
    build_m4,
    conv_out,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    random_bias,
    run_qemu,
)


@st.composite
def wide_convs(draw) -> dict:
    """Dense or grouped convs with K from 16 to ~300 (the assembly loop's range)."""
    groups = draw(st.sampled_from([1, 1, 2]))
    in_c = groups * draw(st.integers(4, 33))
    one_d = draw(st.booleans())
    k_h = 1 if one_d else draw(st.integers(1, 3))
    k_w = draw(st.integers(1, 5))
    assume(in_c // groups * k_h * k_w >= 16)
    cfg = {"in_c": in_c, "out_c": groups * draw(st.integers(1, 6)), "groups": groups,
           "in_h": 1 if one_d else draw(st.integers(1, 6)), "in_w": draw(st.integers(1, 12)),
           "k_h": k_h, "k_w": k_w, "stride_h": 1, "stride_w": draw(st.sampled_from([1, 1, 2])),
           "pad_h": 0 if one_d else draw(st.integers(0, 1)), "pad_w": draw(st.integers(0, 2)),
           "dil_h": 1, "dil_w": draw(st.sampled_from([1, 1, 2])),
           "shift": draw(st.sampled_from([-12, -9, -7, -1, 0, 2])),
           "rounding": draw(st.integers(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    cfg["out_h"] = conv_out(cfg["in_h"], k_h, 1, cfg["pad_h"], 1)
    cfg["out_w"] = conv_out(cfg["in_w"], k_w, cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    assume(cfg["out_h"] >= 1 and cfg["out_w"] >= 1)
    return cfg


def conv_data(cfg: dict, rng, extreme: bool):
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    bias = random_bias(rng, cfg["out_c"])
    if extreme:  # near the int32 limits: the exact requantization fallback
        k = cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"]
        top = 2**31 - 1 - k * 16384
        bias = rng.integers(top - 2**12, top, size=cfg["out_c"]).astype(np.int32)
    return cfg, x, w, bias


@needs_m4
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(cfgs=st.lists(st.one_of(wide_convs(), wide_convs(), gemm_convs()), min_size=6,
                     max_size=10),
       seed=st.integers(0, 2**32 - 1), extreme=st.integers(0, 9))
def test_m4_gemm_conv_equals_reference(lib, m4_build, cfgs, seed, extreme):  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = [conv_data(cfg, rng, i == extreme) for i, cfg in enumerate(cfgs)]
    elf = build_m4(m4_build, "gemm_conv", m4_test_program(lib, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
