"""The depthwise 3x3 column kernel (eb_dw_opt.c) on the Cortex-M4 under QEMU, on
hypothesis-drawn shapes: on the M4 its in-row steps are hand-scheduled inline assembly
(eb_dw3_pairs_asm), which the host tests (portable C, the twin) never run. 3x3, stride and
dilation 1, pad_h 0 or 1, pad_w 0..3, in_h >= 4 (the column path), any width (odd ones:
the last pair overlaps), channel multipliers, both fast requantizations (act none, relu) and
the generic ones (abs, left shifts: by rows). Each example is one firmware of several layers,
each compared with the reference kernel."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_opt import (
    build_m4,
    conv_out,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_test_program,
    needs_m4,
    random_bias,
    run_qemu,
)


@st.composite
def column_layers(draw) -> dict:
    in_h, in_w = draw(st.integers(4, 14)), draw(st.integers(4, 21))
    in_c, m = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    pad_h, pad_w = draw(st.integers(0, 1)), draw(st.integers(0, 3))
    act = draw(st.sampled_from([0, 1, 1, 2]))
    shift = draw(st.sampled_from([-1, -7, -9, -12, 0, 2]))
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": m * in_c, "k_h": 3, "k_w": 3,
           "stride_h": 1, "stride_w": 1, "pad_h": pad_h, "pad_w": pad_w, "dil_h": 1,
           "dil_w": 1, "groups": in_c, "shift": shift, "rounding": draw(st.integers(0, 1)),
           "act": act}
    cfg["out_h"] = conv_out(in_h, 3, 1, pad_h, 1)
    cfg["out_w"] = conv_out(in_w, 3, 1, pad_w, 1)
    return cfg


@needs_m4
@settings(max_examples=4, deadline=None)
@given(cfgs=st.lists(column_layers(), min_size=6, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_m4_dw3_columns_equal_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    convs = []
    for cfg in cfgs:
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, random_bias(rng, cfg["out_c"])))
    elf = build_m4(m4_build, "dw3_columns", m4_test_program(lib, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
