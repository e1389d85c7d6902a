"""The depthwise 3x3 loop specialised at generation time (eb_dw_opt.h, EB_DW3_SPEC: the
layer's row pitch, output width and shift as immediates; edgebuild.ops.dw_spec decides which
layers get one). Hypothesis-drawn layers, plain and after the fused 2x2 max pool, with odd
sizes and odd out_h, pads 0..3, several channels and biases near the int32 limits on some
(channels the spec does not take between ones it does), run on the Cortex-M4 under QEMU with
their spec, a spec made for another shape (ignored) and none: bit-identical to the
reference every time. On the host a spec has no loop (run is NULL) and the generic path
runs."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, POOL_FIELDS
from test_kernels_dw_m4 import column_layers
from test_kernels_dw_pool import fused_layers, run_fused
from test_kernels_dw_refill import mixed_bias, several_channels
from test_kernels_opt import (
    SCRATCH,
    build_m4,
    c_array,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    run_conv_pair,
    run_qemu,
)

from edgebuild.ops import dw_spec


def spec_of(conv: dict) -> tuple[int, int, int, str] | None:
    """EB_DW3_SPEC's arguments for conv as the generator makes them (dw_spec.spec_args)."""
    pitch = conv["in_w"] + conv["pad_w"]
    if conv["out_w"] % 2 or conv["out_h"] < 2 or conv["out_w"] < 2 or \
            (conv["out_h"] + 2) * pitch + conv["pad_w"] > dw_spec.DW_PAD_BYTES or \
            not -31 <= conv["shift"] <= -1 or conv["act"] not in (0, 1):
        return None
    return pitch, conv["out_w"], -conv["shift"], ("NONE", "RELU")[conv["act"]]


def with_spec(conv: dict, draw) -> dict:
    """conv made one the spec takes: a right shift, act none or relu."""
    return {**conv, "shift": draw(st.sampled_from([-1, -6, -9, -12, -31])),
            "act": draw(st.sampled_from([0, 1]))}


@st.composite
def plain_cases(draw) -> dict:
    cfg = with_spec(draw(column_layers()), draw)
    channels = draw(st.integers(1, 5))
    m = cfg["out_c"] // cfg["in_c"]
    return {**cfg, "in_c": channels, "groups": channels, "out_c": m * channels}


@st.composite
def fused_cases(draw) -> dict:
    case = several_channels(draw(fused_layers(widest=60)), draw(st.integers(1, 5)))
    return {"pool": case["pool"], "conv": with_spec(case["conv"], draw)}


def spec_line(name: str, args: tuple[int, int, int, str] | None, mode: int) -> str:
    """mode 0: the layer's own spec; 1: one for a wider pitch (not the layer's); 2: none."""
    if args is None or mode == 2:
        return f"#define {name} NULL\n"
    pitch, out_w, s, act = args
    return f"EB_DW3_SPEC({name}_s, {pitch + mode}, {out_w}, {s}, {act})\n" \
           f"#define {name} (&{name}_s)\n"


def program(lib, plain, fused, rng) -> str:  # noqa: F811
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_kernels.h"\n'
             '#include "eb_dw_opt.h"\n#include "eb_kernels_opt.h"\n']
    calls, most = [], 16
    for i, (cfg, mode) in enumerate(plain):
        x, w = dw_data(cfg, rng)
        bias = mixed_bias(rng, cfg["out_c"])
        ref, _ = run_conv_pair(lib, cfg, x, w, bias, False)
        most = max(most, ref.size)
        p = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"
        parts += [f"static const eb_conv_params p{i} = {{{p}}};\n",
                  spec_line(f"k{i}", spec_of(cfg), mode),
                  c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e{i}", ref), c_array("int32_t", f"b{i}", bias)]
        calls.append(f"eb_dw_conv_spec_opt(&p{i}, k{i}, x{i}, w{i}, b{i}, out, scratch);\n"
                     f"bad += memcmp(out, e{i}, {ref.size}) != 0;\n")
    for j, (case, mode) in enumerate(fused):
        i, conv = j + len(plain), case["conv"]
        x, w = dw_data({**conv, "in_h": case["pool"]["in_h"], "in_w": case["pool"]["in_w"]}, rng)
        bias = mixed_bias(rng, conv["out_c"])
        ref, _ = run_fused(lib, case, x, w, bias)
        most = max(most, conv["in_c"] * conv["in_h"] * conv["in_w"], ref.size)
        q = ", ".join(str(case["pool"][k]) for k in (*POOL_FIELDS, "mode", "rounding"))
        p = ", ".join(str(conv[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"
        parts += [f"static const eb_pool_params q{i} = {{{q}}};\n",
                  f"static const eb_conv_params p{i} = {{{p}}};\n",
                  spec_line(f"k{i}", spec_of(conv), mode),
                  c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e{i}", ref), c_array("int32_t", f"b{i}", bias)]
        calls.append(f"eb_dw_pool_conv_spec_opt(&q{i}, &p{i}, k{i}, x{i}, pooled, w{i}, b{i}, "
                     f"out, scratch);\nbad += memcmp(out, e{i}, {ref.size}) != 0;\n")
    parts.append(f"static int8_t pooled[{most}], out[{most}];\n{SCRATCH}")
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "    ".join(calls) +
                 '    printf("%d mismatching calls\\n", bad);\n    return bad != 0;\n}\n')
    return "".join(parts)


@needs_m4
@settings(max_examples=4, deadline=None)
@given(plain=st.lists(st.tuples(plain_cases(), st.sampled_from([0, 0, 0, 1, 2])), min_size=6,
                      max_size=10),
       fused=st.lists(st.tuples(fused_cases(), st.sampled_from([0, 0, 0, 1, 2])), min_size=6,
                      max_size=10),
       seed=st.integers(0, 2**32 - 1))
def test_m4_spec_equals_reference(lib, m4_build, plain, fused, seed):  # noqa: F811
    taken = [spec_of(cfg) for cfg, mode in plain if mode == 0] + \
        [spec_of(case["conv"]) for case, mode in fused if mode == 0]
    assume(any(args is not None for args in taken))
    rng = np.random.default_rng(seed)
    elf = build_m4(m4_build, "dw_spec", program(lib, plain, fused, rng))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


def test_the_generator_and_the_test_agree_on_the_specs():
    conv = {"in_h": 6, "in_w": 12, "out_h": 6, "out_w": 12, "pad_w": 1, "shift": -6, "act": 1}
    assert spec_of(conv) == (13, 12, 6, "RELU")
    assert spec_of({**conv, "out_w": 11}) is None  # pixel pairs along even rows only
    assert spec_of({**conv, "shift": 0}) is None  # USAT's shift is 1..31
    assert spec_of({**conv, "in_h": 160, "out_h": 160}) is None  # the plane not whole in 2 KiB
