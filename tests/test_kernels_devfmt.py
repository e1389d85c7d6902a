"""The MAX7800x number format through the optimized kernels: a `max78000`/`max78002` target's
C runs on the Arm Cortex-M4F beside the accelerator with eb_kernels_opt.c, bit-identical to
the reference kernels and to numpy's integer reference.

The device format lives in the values the kernels get, not in their loops: the bias is an
8-bit integer stored x 2^bias_scale_log2 (x 128) as int32 accumulator units, the weights
have one of the profile's widths, the output shift `s - (b - 1)` follows from the total
shift range (left shifts included), rounding is the profile's (half up; both modes a profile
may name are drawn). The layers are the shapes a profile allows (conv2d 1x1/3x3, pad 0-2,
stride 1, dilation and depthwise where the device has them, the first layer's single input
channel; conv1d k 1-9 in both 1-D layouts; linear), drawn by hypothesis on the host and from
a fixed seed for the Cortex-M4 firmware under QEMU. Fused input pooling runs the reference
eb_pool2d on every target (no optimized variant): test_kernels.py checks its truncating
average.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import test_kernels_opt
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS
from test_kernels_opt import (
    M4_MAIN,
    build_m4,
    c_array,
    conv_out,
    int8_data,
    needs_m4,
    run_conv_pair,
    run_linear_pair,
    run_qemu,
)

from edgebuild.core import numerics
from edgebuild.ops.conv import reference_conv
from edgebuild.targets.max7800x import profile as devices

DEVICES = devices.DEVICE_NAMES
ROUNDING = {"half_up": 0, "floor": 1}  # EB_ROUND_* (eb_kernels.h)
ACTS = {"none": 0, "relu": 1, "abs": 2}  # EB_ACT_*
SEED = 20250120
M4_LAYERS = 24

# The kernel library and the M4 build directory: test_kernels_opt's fixtures.
lib = test_kernels_opt.lib
m4_build = test_kernels_opt.m4_build

Pick = Callable[[Sequence[Any]], Any]  # one choice among options (hypothesis or numpy)


def test_profiles_round_as_the_kernels_do():
    """Every profile's requantization rounding is one the kernels implement."""
    for device in DEVICES:
        assert devices.profile(device).numbers.rounding in ROUNDING


def test_accelerator_targets_run_the_optimized_kernels():
    from edgebuild.codegen.project import OPTIMIZED_CPUS, kernel_files
    from edgebuild.targets.cpu import cpu

    for device in DEVICES:
        assert cpu(device) in OPTIMIZED_CPUS
        assert "eb_kernels_opt.c" in kernel_files(cpu(device), tiled=False)[0]
    assert (cpu("host"), cpu("cortex-m4")) == ("host", "cortex-m4")
    assert "eb_kernels_opt.c" not in kernel_files(cpu("host"), tiled=False)[0]


# ---- device-format layers ------------------------------------------------------------------

def device_quant(pick: Pick, device: str) -> dict:
    """Weight width, shift, rounding and activation as the device's format allows them."""
    numbers = devices.profile(device).numbers
    bits = pick(numbers.weight_bits)
    low, high = numerics.shift_limits(bits, numbers.total_shift)
    scale_exp = pick(range(low, high + 1))
    return {"bits": bits, "shift": numerics.output_shift(scale_exp, bits),
            "rounding": ROUNDING[pick([numbers.rounding, *ROUNDING])], "act": pick(range(3))}


def conv2d_window(pick: Pick, device: str) -> dict:
    rules = devices.profile(device).conv2d
    k_h, k_w = pick(rules.kernels)
    dil = pick(range(rules.dilation[0], min(rules.dilation[1], 3) + 1)) if k_h > 1 else 1
    in_c = pick([1, 1, 2, 3, 4, 5, 8, 9, 16])
    groups = in_c if rules.depthwise and in_c > 1 and pick([False, True]) else 1
    return {"in_c": in_c, "in_h": pick(range(1, 13)), "in_w": pick(range(1, 13)),
            "out_c": (in_c if groups > 1 else pick(range(1, 13))), "k_h": k_h, "k_w": k_w,
            "stride_h": pick(rules.stride), "stride_w": pick(rules.stride),
            "pad_h": pick(rules.pad), "pad_w": pick(rules.pad), "dil_h": dil, "dil_w": dil,
            "groups": groups}


def conv1d_window(pick: Pick, device: str) -> dict:
    """conv1d as the code generator lays it out: [C][1][L], or [C][L][1] (tiled layers)."""
    rules = devices.profile(device).conv1d
    k = pick(range(rules.kernel[0], rules.kernel[1] + 1))
    dilation = rules.dilation_short_kernel if k <= 3 else rules.dilation_long_kernel
    dil = pick(range(dilation[0], min(dilation[1], 4) + 1))
    length, in_c = pick(range(1, 41)), pick([1, 2, 3, 6, 12, 16])
    groups = in_c if rules.depthwise and in_c > 1 and pick([False, True]) else 1
    row = {"in_h": 1, "in_w": length, "k_h": 1, "k_w": k, "stride_h": 1,
           "stride_w": pick(rules.stride), "pad_h": 0, "pad_w": pick(rules.pad), "dil_h": 1,
           "dil_w": dil}
    if pick([False, True]):  # vertical: swap the axes
        row = {"in_h": length, "in_w": 1, "k_h": k, "k_w": 1, "stride_h": row["stride_w"],
               "stride_w": 1, "pad_h": row["pad_w"], "pad_w": 0, "dil_h": dil, "dil_w": 1}
    return {"in_c": in_c, "out_c": in_c if groups > 1 else pick(range(1, 17)),
            "groups": groups, **row}


def device_conv(pick: Pick, device: str) -> dict | None:
    """A conv2d or conv1d layer in the device's format, or None if its output is empty."""
    window = (conv2d_window if pick(["2d", "1d"]) == "2d" else conv1d_window)(pick, device)
    cfg = {**window, **device_quant(pick, device)}
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    return cfg if cfg["out_h"] >= 1 and cfg["out_w"] >= 1 else None


def device_weights(rng: np.random.Generator, shape: tuple[int, ...], bits: int) -> np.ndarray:
    low, high = numerics.weight_limits(bits)
    w = rng.integers(low, high + 1, size=shape)
    flat = w.reshape(-1)
    flat[0], flat[-1] = low, high
    return w.astype(np.int8)


def device_bias(rng: np.random.Generator, count: int, device: str) -> np.ndarray | None:
    """None, or the device's bias: a `bias_bits` integer times 2^bias_scale_log2 (int32)."""
    if rng.random() < 0.25:
        return None
    numbers = devices.profile(device).numbers
    limit = 1 << (numbers.bias_bits - 1)
    stored = rng.integers(-limit, limit, size=count)
    stored[0] = rng.choice([-limit, limit - 1])
    return (stored << numbers.bias_scale_log2).astype(np.int32)


def conv_data(cfg: dict, rng: np.random.Generator, device: str):
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w = device_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]), cfg["bits"])
    return x, w, device_bias(rng, cfg["out_c"], device)


def expected(cfg: dict, x, w, bias) -> tuple[np.ndarray, np.ndarray]:
    """(accumulator, int8 output) of numpy's integer reference (edgebuild.core.numerics)."""
    acc = reference_conv(x[None], w, cfg["groups"], (cfg["k_h"], cfg["k_w"]),
                         (cfg["stride_h"], cfg["stride_w"]), (cfg["pad_h"], cfg["pad_w"]),
                         (cfg["dil_h"], cfg["dil_w"]))[0]
    if bias is not None:
        acc = acc + bias.astype(np.int64)[:, None, None]
    rounding = next(name for name, code in ROUNDING.items() if code == cfg["rounding"])
    act = next(name for name, code in ACTS.items() if code == cfg["act"])
    return acc, numerics.np_requantize(acc, cfg["shift"], rounding, act)


def check_conv(lib, cfg: dict, x, w, bias) -> None:
    acc, out = expected(cfg, x, w, bias)
    for wide, want in ((True, acc), (False, out)):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(ref, want.reshape(-1), err_msg=f"reference {cfg}")
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


def drawn(draw) -> Pick:
    return lambda options: draw(st.sampled_from(list(options)))


def seeded(rng: np.random.Generator) -> Pick:
    return lambda options: list(options)[int(rng.integers(len(options)))]


# ---- host -----------------------------------------------------------------------------------

@st.composite
def device_convs(draw) -> tuple[str, dict]:
    device = draw(st.sampled_from(DEVICES))
    cfg = device_conv(drawn(draw), device)
    assume(cfg is not None)
    return device, cfg


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(layer=device_convs(), seed=st.integers(0, 2**32 - 1))
def test_device_format_conv_opt_equals_reference(lib, layer, seed):
    device, cfg = layer
    x, w, bias = conv_data(cfg, np.random.default_rng(seed), device)
    check_conv(lib, cfg, x, w, bias)


@settings(max_examples=200, deadline=None)
@given(device=st.sampled_from(DEVICES), in_f=st.integers(1, 300), out_f=st.integers(1, 20),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_device_format_linear_opt_equals_reference(lib, device, in_f, out_f, data, seed):
    rng = np.random.default_rng(seed)
    q = device_quant(drawn(data.draw), device)
    x, w = int8_data(rng, (in_f,)), device_weights(rng, (out_f, in_f), q["bits"])
    bias = device_bias(rng, out_f, device)
    acc = w.astype(np.int64) @ x.astype(np.int64) + (0 if bias is None else bias)
    for wide in (True, False):
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide)
        if wide:
            np.testing.assert_array_equal(ref, acc)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {in_f}->{out_f} {q}")


# The examples' layers (digits_max78000, mnist_extrasmall) in the device format, every
# rounding mode and activation: first layers with one input channel, a pad-2 conv, 1x1.
EXAMPLE_LAYERS = [
    dict(in_c=1, in_h=8, in_w=8, out_c=16, pad=1),
    dict(in_c=16, in_h=4, in_w=4, out_c=32, pad=1),
    dict(in_c=32, in_h=2, in_w=2, out_c=32, pad=1),
    dict(in_c=1, in_h=28, in_w=28, out_c=8, pad=1),
    dict(in_c=8, in_h=14, in_w=14, out_c=8, pad=2),
    dict(in_c=8, in_h=4, in_w=4, out_c=8, pad=1),
    dict(in_c=12, in_h=5, in_w=7, out_c=5, pad=0, k=1),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index", range(len(EXAMPLE_LAYERS)))
def test_device_format_example_layers(lib, device, index):
    rng = np.random.default_rng([SEED, index])
    shape = EXAMPLE_LAYERS[index]
    k, pad = shape.get("k", 3), shape["pad"]
    for rounding in ROUNDING.values():
        for act in ACTS.values():
            bits = int(rng.choice(devices.profile(device).numbers.weight_bits))
            cfg = {"in_c": shape["in_c"], "in_h": shape["in_h"], "in_w": shape["in_w"],
                   "out_c": shape["out_c"], "k_h": k, "k_w": k, "stride_h": 1, "stride_w": 1,
                   "pad_h": pad, "pad_w": pad, "dil_h": 1, "dil_w": 1, "groups": 1,
                   "bits": bits, "shift": int(rng.integers(-22, 9)), "rounding": rounding,
                   "act": act, "out_h": shape["in_h"] + 2 * pad - k + 1,
                   "out_w": shape["in_w"] + 2 * pad - k + 1}
            check_conv(lib, cfg, *conv_data(cfg, rng, device))


# ---- Cortex-M4 under QEMU -------------------------------------------------------------------

def m4_layers(lib) -> list[tuple[str, dict, Any, Any, Any]]:
    """Device-format layers from a fixed seed: (kind, cfg, x, w, bias); the reference
    outputs are computed on the host when the firmware is written."""
    rng = np.random.default_rng([SEED, 4])
    layers: list[tuple[str, dict, Any, Any, Any]] = []
    while len(layers) < M4_LAYERS:
        device = DEVICES[len(layers) % len(DEVICES)]
        if len(layers) % 4 == 3:
            q = device_quant(seeded(rng), device)
            in_f, out_f = int(rng.integers(1, 200)), int(rng.integers(1, 16))
            cfg = {"in_f": in_f, "out_f": out_f, **q}
            layers.append(("linear", cfg, int8_data(rng, (in_f,)),
                           device_weights(rng, (out_f, in_f), q["bits"]),
                           device_bias(rng, out_f, device)))
            continue
        conv = device_conv(seeded(rng), device)
        if conv is not None:
            layers.append(("conv", conv, *conv_data(conv, rng, device)))
    return layers


def m4_conv_calls(lib, i: int, cfg: dict, x, w, bias) -> tuple[list[str], str, int, int]:
    ref8, _ = run_conv_pair(lib, cfg, x, w, bias, wide=False)
    ref32, _ = run_conv_pair(lib, cfg, x, w, bias, wide=True)
    n, sn = ref8.size, test_kernels_opt.conv_scratch_elements(lib, cfg)
    fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"  # wbits
    arrays = [f"static const eb_conv_params p{i} = {{{fields}}};\n", c_array("int8_t", f"x{i}", x),
              c_array("int8_t", f"w{i}", w), c_array("int8_t", f"e8_{i}", ref8),
              c_array("int32_t", f"e32_{i}", ref32)]
    b = "NULL" if bias is None else f"b{i}"
    if bias is not None:
        arrays.append(c_array("int32_t", b, bias))
    calls = (f"fill({n}); eb_conv2d_opt(&p{i}, x{i}, w{i}, {b}, out8, scratch);\n"
             f"bad += check({i}, \"conv\", {n}, {sn}, e8_{i}, NULL);\n"
             f"fill({n}); eb_conv2d_wide_opt(&p{i}, x{i}, w{i}, {b}, out32, scratch);\n"
             f"bad += check({i}, \"conv wide\", {n}, {sn}, NULL, e32_{i});\n")
    return arrays, calls, sn, n


def m4_linear_calls(lib, i: int, cfg: dict, x, w, bias) -> tuple[list[str], str, int, int]:
    in_f, out_f = cfg["in_f"], cfg["out_f"]
    ref8, _ = run_linear_pair(lib, in_f, out_f, x, w, bias, cfg, wide=False)
    ref32, _ = run_linear_pair(lib, in_f, out_f, x, w, bias, cfg, wide=True)
    sn = lib.eb_test_linear_scratch(in_f)
    arrays = [c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
              c_array("int8_t", f"e8_{i}", ref8), c_array("int32_t", f"e32_{i}", ref32)]
    b = "NULL" if bias is None else f"b{i}"
    if bias is not None:
        arrays.append(c_array("int32_t", b, bias))
    args = f"{in_f}, {out_f}, x{i}, w{i}, {b}"
    calls = (f"fill({out_f}); eb_linear_opt({args}, {cfg['shift']}, {cfg['rounding']}, "
             f"{cfg['act']}, out8, scratch);\n"
             f"bad += check({i}, \"linear\", {out_f}, {sn}, e8_{i}, NULL);\n"
             f"fill({out_f}); eb_linear_wide_opt({args}, out32, scratch);\n"
             f"bad += check({i}, \"linear wide\", {out_f}, {sn}, NULL, e32_{i});\n")
    return arrays, calls, sn, out_f


def m4_program(lib) -> str:
    parts = ['#include <stdio.h>\n#include "eb_kernels.h"\n#include "eb_kernels_opt.h"\n']
    calls, max_scratch, max_out = [], 16, 16
    for i, (kind, cfg, x, w, bias) in enumerate(m4_layers(lib)):
        emit = m4_conv_calls if kind == "conv" else m4_linear_calls
        arrays, call, scratch, out = emit(lib, i, cfg, x, w, bias)
        parts += arrays
        calls.append(call)
        max_scratch, max_out = max(max_scratch, scratch), max(max_out, out)
    parts.append(f"#define SCRATCH {max_scratch}\n#define OUT {max_out}\n" + M4_MAIN)
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("device format on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


@needs_m4
def test_m4_device_format_equals_reference_under_qemu(lib, m4_build):
    elf = build_m4(m4_build, "devfmt_kat", m4_program(lib))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


def test_drawn_bias_is_what_quantization_stores():
    """device_bias draws the values numerics.np_quantize_bias can store for the device:
    multiples of 2^bias_scale_log2 within the `bias_bits` range, its extremes included."""
    for device in DEVICES:
        numbers = devices.profile(device).numbers
        unit, limit = 1 << numbers.bias_scale_log2, 1 << (numbers.bias_bits - 1)
        stored = numerics.np_quantize_bias(np.array([-1e9, 1e9, 0.3]), 0, 8, numbers.bias_bits,
                                           numbers.bias_scale_log2)
        assert stored.min() == -limit * unit and stored.max() == (limit - 1) * unit
        rng = np.random.default_rng([SEED, 6])
        bias = next(b for b in (device_bias(rng, 64, device) for _ in range(20)) if b is not None)
        assert not (bias % unit).any()
        assert -limit * unit <= bias.min() and bias.max() <= (limit - 1) * unit
