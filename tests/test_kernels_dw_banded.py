"""The banded depthwise pass (eb_dw_conv_banded_opt, eb_dw_pool_conv_banded_opt in
eb_dw_opt.c: the depthwise kernel's padded channel copy is the L1 buffer the tiler plans,
memory.tiling's banded layout) against the reference eb_conv2d (after eb_pool2d), on
hypothesis-drawn shapes: depthwise and one-input-channel first layers (channel multipliers
up to 32), odd sizes, pads 0..3, bands from 1 row to the whole plane, every activation and
rounding, right and left shifts, biases or none; nothing written past the L1 bytes the plan
counts (memory.tiling.banded_l1 = eb_dw_band_l1_bytes) nor past the output; on the host
(portable C) and on the Cortex-M4 under QEMU (the inline-asm band loop)."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, POOL_FIELDS, ConvParams, PoolParams
from test_kernels_opt import (
    I8,
    I32,
    P8,
    P32,
    build_m4,
    c_array,
    conv_out,
    dw_data,
    guarded,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    params_of,
    ptr,
    random_bias,
    run_qemu,
)

from edgebuild.core import packing
from edgebuild.core.geometry import Window
from edgebuild.memory import tiling

SENTINEL = 0x5A


@st.composite
def banded_layers(draw, widest: int = 40, pool: bool = False) -> dict:
    """A depthwise 3x3 stride-1 conv (in_c = 1 with up to 32 outputs: a first layer), a band
    of `rows` output rows, and with `pool` the 2x2 stride-2 max pool before it."""
    first = draw(st.booleans())
    in_c = 1 if first else draw(st.integers(1, 5))
    m = draw(st.integers(1, 32)) if first else draw(st.integers(1, 3))
    h, w = draw(st.integers(2, 30)), draw(st.integers(4, widest))
    pad_h, pad_w = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    conv = {"in_c": in_c, "in_h": h, "in_w": w, "out_c": m * in_c, "k_h": 3, "k_w": 3,
            "stride_h": 1, "stride_w": 1, "pad_h": pad_h, "pad_w": pad_w, "dil_h": 1,
            "dil_w": 1, "groups": in_c, "shift": draw(st.sampled_from([-1, -6, -9, -12, 0, 2])),
            "rounding": draw(st.integers(0, 1)), "act": draw(st.sampled_from([0, 1, 1, 2]))}
    conv["out_h"], conv["out_w"] = conv_out(h, 3, 1, pad_h, 1), conv_out(w, 3, 1, pad_w, 1)
    if conv["out_h"] < 1 or conv["out_w"] < 1:
        conv.update(pad_h=2, pad_w=2, out_h=h + 2, out_w=w + 2)
    case = {"conv": conv, "rows": draw(st.integers(1, conv["out_h"] + 2))}
    if pool:
        case["pool"] = {"c": in_c, "in_h": 2 * h + draw(st.integers(0, 1)),
                        "in_w": 2 * w + draw(st.integers(0, 1)), "out_h": h, "out_w": w,
                        "k_h": 2, "k_w": 2, "stride_h": 2, "stride_w": 2, "mode": 0,
                        "rounding": 0}
    return case


def window(c: dict) -> Window:
    return Window(**{k: c[k] for k in CONV_FIELDS}, bias=True, banded=True)


def prepare(lib) -> None:  # noqa: F811
    conv = [ctypes.POINTER(ConvParams), ctypes.c_int]
    for name, args, res in (
            ("eb_dw_band_l1_bytes", conv, ctypes.c_int32),
            ("eb_pool2d", [ctypes.POINTER(PoolParams), P8, P8], None),
            ("eb_dw_conv_banded_opt", [*conv, P8, P8, P32, P8, P8], None),
            ("eb_dw_pool_conv_banded_opt",
             [ctypes.POINTER(PoolParams), *conv, P8, P8, P8, P32, P8, P8], None)):
        getattr(lib, name).argtypes, getattr(lib, name).restype = args, res


def case_data(case: dict, rng):
    c, q = case["conv"], case.get("pool")
    x, w = dw_data(c if q is None else {**c, "in_h": q["in_h"], "in_w": q["in_w"]}, rng)
    return x, w, random_bias(rng, c["out_c"])


def run_banded(lib, case: dict, x, w, bias) -> tuple[np.ndarray, np.ndarray]:  # noqa: F811
    """(reference, banded) outputs; checks the L1 bytes against the plan's and the guards."""
    prepare(lib)
    c, q, rows = case["conv"], case.get("pool"), case["rows"]
    p = params_of(c)
    p.wbits = c.get("wbits", 0)  # packed weights (test_banded_packed_weights_equal_reference)
    l1_bytes = lib.eb_dw_band_l1_bytes(ctypes.byref(p), rows)
    assert l1_bytes == tiling.banded_l1(window(c), rows), "C and plan disagree on L1"
    n_in, count = c["in_c"] * c["in_h"] * c["in_w"], c["out_c"] * c["out_h"] * c["out_w"]
    ref, out, l1 = guarded(count, np.int8), guarded(count, np.int8), guarded(l1_bytes, np.int8)
    pooled = guarded(n_in, np.int8)
    source = x
    if q is not None:
        qp = PoolParams(**q)
        lib.eb_pool2d(ctypes.byref(qp), ptr(x, I8), ptr(pooled, I8))
        source = pooled
    lib.eb_conv2d(ctypes.byref(p), ptr(source, I8), ptr(w, I8), ptr(bias, I32), ptr(ref, I8))
    if q is None:
        lib.eb_dw_conv_banded_opt(ctypes.byref(p), rows, ptr(x, I8), ptr(w, I8), ptr(bias, I32),
                                  ptr(out, I8), ptr(l1, I8))
    else:
        scratch = guarded(n_in, np.int8)
        lib.eb_dw_pool_conv_banded_opt(ctypes.byref(qp), ctypes.byref(p), rows, ptr(x, I8),
                                       ptr(scratch, I8), ptr(w, I8), ptr(bias, I32),
                                       ptr(out, I8), ptr(l1, I8))
        assert (scratch[n_in:] == SENTINEL).all(), "wrote past the pooled tensor"
    assert (out[count:] == SENTINEL).all(), "wrote past the output"
    assert (l1[l1_bytes:] == SENTINEL).all(), "wrote past the planned L1 bytes"
    return ref[:count], out[:count]


@settings(max_examples=150, deadline=None)
@given(case=banded_layers(), seed=st.integers(0, 2**32 - 1))
def test_banded_equals_reference(lib, case, seed):  # noqa: F811
    ref, out = run_banded(lib, case, *case_data(case, np.random.default_rng(seed)))
    np.testing.assert_array_equal(out, ref, err_msg=str(case))


@settings(max_examples=60, deadline=None)
@given(case=banded_layers(pool=True), seed=st.integers(0, 2**32 - 1))
def test_banded_pool_equals_reference(lib, case, seed):  # noqa: F811
    ref, out = run_banded(lib, case, *case_data(case, np.random.default_rng(seed)))
    np.testing.assert_array_equal(out, ref, err_msg=str(case))


def test_plan_band_rows():
    """The tiler's bands are the kernel's: even, the whole plane when it fits, the odd
    last two rows a band of their own; a whole plane is copied once per input channel."""
    w = window({"in_c": 32, "in_h": 12, "in_w": 25, "out_c": 32, "out_h": 12, "out_w": 25,
                "k_h": 3, "k_w": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1,
                "dil_h": 1, "dil_w": 1, "groups": 32})
    assert tiling.band_starts(w, 5) == [(0, 4), (4, 4), (8, 4)]
    assert tiling.band_starts(w, 12) == [(0, 12)]
    odd = Window(**{**vars(w), "out_h": 11, "in_h": 11})
    assert tiling.band_starts(odd, 4) == [(0, 4), (4, 4), (8, 2), (9, 2)]
    fills, moved, out = tiling.banded_traffic(w, 12)
    assert (fills, moved, out) == (32, 32 * 12 * 25 + 32 * 9 + 4 * 32, 32 * 12 * 25)
    assert moved + out >= tiling.lower_bound(w)
    tile = tiling.choose("dw", w, 4096, True, split=True)
    assert tile is not None and tile.rows == 12 and tile.l1_bytes == tiling.banded_l1(w, 12)
    band = tiling.choose("dw", w, 200, True, split=True)  # 6 rows would need 8 x 26 + 5
    assert band is not None and (band.rows, band.l1_bytes, band.tiles) == (4, 164, 3 * 32)
    assert tiling.choose("dw", w, 100, True, split=True) is None  # 2 rows: 4 x 26 + 5
    assert tiling.minimum_l1(w, True, split=True) == 112


def m4_program(lib, cases, rng) -> str:  # noqa: F811
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_kernels.h"\n'
             '#include "eb_dw_opt.h"\n']
    calls, most, l1_most = [], 16, 16
    for i, case in enumerate(cases):
        x, w, bias = case_data(case, rng)
        ref, _ = run_banded(lib, case, x, w, bias)
        c, q = case["conv"], case.get("pool")
        most = max(most, c["in_c"] * c["in_h"] * c["in_w"], ref.size)
        l1_most = max(l1_most, tiling.banded_l1(window(c), case["rows"]))
        p = ", ".join(str(c[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act")) + ", 0"
        parts += [f"static const eb_conv_params p{i} = {{{p}}};\n",
                  c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e{i}", ref)]
        if bias is not None:
            parts.append(c_array("int32_t", f"b{i}", bias))
        b = f"b{i}" if bias is not None else "NULL"
        if q is None:
            call = f"eb_dw_conv_banded_opt(&p{i}, {case['rows']}, x{i}, w{i}, {b}, out, l1);"
        else:
            qs = ", ".join(str(q[k]) for k in (*POOL_FIELDS, "mode", "rounding"))
            parts.append(f"static const eb_pool_params q{i} = {{{qs}}};\n")
            call = (f"eb_dw_pool_conv_banded_opt(&q{i}, &p{i}, {case['rows']}, x{i}, pooled, "
                    f"w{i}, {b}, out, l1);")
        calls.append(f"{call}\nbad += memcmp(out, e{i}, {ref.size}) != 0;\n")
    parts.append(f"static int8_t pooled[{most}], out[{most}];\n"
                 f"static int8_t l1[{l1_most}] __attribute__((aligned(4)));\n")
    parts.append("int main(void)\n{\n    int bad = 0;\n    (void)pooled;\n" + "    ".join(calls) +
                 '    printf("%d mismatching calls\\n", bad);\n    return bad != 0;\n}\n')
    return "".join(parts)


@needs_m4
@settings(max_examples=2, deadline=None)
@given(cases=st.lists(st.one_of(banded_layers(), banded_layers(pool=True)), min_size=5,
                      max_size=8), seed=st.integers(0, 2**32 - 1))
def test_m4_banded_equals_reference(lib, m4_build, cases, seed):  # noqa: F811
    elf = build_m4(m4_build, "dw_banded", m4_program(lib, cases, np.random.default_rng(seed)))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


# Instructions of kws_dscnn's banded layers on the M4 with a 4 KiB L1 (kat.json of a build
# of manifests/kws_dscnn.yaml with `l1: 4KiB`, commit 0033e6c): what the tiler's banded cost
# constants were fitted on. (in_c, h, w, out_c, pooled) -> instructions.
KWS_BANDED_4K = {"conv1": ((1, 12, 25, 32, False), 154505),
                 "dw1": ((32, 12, 25, 32, False), 172121),
                 "dw2": ((32, 6, 12, 32, True), 61409),
                 "dw3": ((48, 6, 12, 48, False), 71848)}


def test_banded_cost_matches_measured_counts():
    """The banded cost estimate is within 8% of each measured layer."""
    for name, ((in_c, h, w, out_c, pooled), measured) in KWS_BANDED_4K.items():
        win = Window(in_c=in_c, in_h=h, in_w=w, out_c=out_c, out_h=h, out_w=w, k_h=3, k_w=3,
                     pad_h=1, pad_w=1, groups=in_c, bias=True, banded=True, pooled=pooled)
        fills, moved_in, out = tiling.banded_traffic(win, h)
        estimate = tiling.banded_cost(win, h, fills, moved_in + out)
        assert abs(estimate / measured - 1) < 0.08, (name, estimate, measured)


@settings(max_examples=40, deadline=None)
@given(case=banded_layers(), bits=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**32 - 1))
def test_banded_packed_weights_equal_reference(lib, case, bits, seed):  # noqa: F811
    """1-, 2-, 4-bit weights stored packed (core.packing): the banded pass unpacks each
    channel's taps as the untiled one does; the reference reads the packed rows."""
    rng = np.random.default_rng(seed)
    c = {**case["conv"], "wbits": bits}
    x, _ = dw_data(c, rng)
    low = -(1 << (bits - 1))
    w = rng.integers(low, -low, size=(c["out_c"], 1, 3, 3))
    stored = packing.pack(w, bits).view(np.int8)
    ref, out = run_banded(lib, {**case, "conv": c}, x, stored, random_bias(rng, c["out_c"]))
    np.testing.assert_array_equal(out, ref, err_msg=str(case))
