"""The optimized kernels (templates/kernels/eb_kernels_opt.c) against the reference kernels
(eb_kernels.c), bit for bit. The reference is checked against numpy in test_kernels.py; here
C is compared with C:

* host: both files in one shared library (the portable emulation of SMLAD/SXTB16 runs the
  same algorithm), random conv and linear configurations through ctypes;
* Cortex-M4 under QEMU (when arm-none-eabi-gcc and qemu-system-arm are installed): a firmware
  embedding a few configurations' inputs and the reference outputs computed on the host runs
  the DSP-intrinsic build and exits non-zero on any mismatch;
* instructions per MAC under QEMU (TCG plugin templates/tools/insn_count.c) for a conv-heavy
  layer, reference vs optimized: the optimized kernel must reach <= 1.5 and be >= 2x better;
* depthwise convs (groups == in_c, eb_conv2d_opt's direct path): the same checks on a grid of
  shapes and on hypothesis-drawn layers, on the M4, and their instructions per MAC under
  QEMU against the generic grouped im2col path (built with -DEB_OPT_NO_DEPTHWISE).
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, I8, I16, I32, ConvParams

from edgebuild.core import numerics
from edgebuild.ops import column_rows, conv_path, dw_spec, im2col_band

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "templates" / "kernels"
PROJECT = ROOT / "templates" / "project"
PLUGIN_SRC = ROOT / "templates" / "tools" / "insn_count.c"
GCC = shutil.which("gcc")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_NM = shutil.which("arm-none-eabi-nm")
QEMU = shutil.which("qemu-system-arm")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
          "-DEB_STANDALONE"]  # the bare kernel library: plain names (eb_kernels.h)
M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
M4_LINK = ["-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs"]
LINK_VARS = {"flash_bytes": 4194304, "ram_bytes": 4194304, "stack_bytes": 8192,
             "heap_bytes": 4096}
QEMU_CMD = ["-M", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native"]

SEED = 20240611
CONV_CASES = 60
LINEAR_CASES = 30
M4_CASES = 10  # random conv and linear configurations in the QEMU firmware
M4_EDGE_CASES = (1, 3, 5, 8)  # and these EDGE_CONVS
GUARD = 16
SENTINEL = 0x5A
# The conv-heavy layer measured under QEMU, and the targets.
BENCH = {"in_c": 16, "in_hw": 8, "out_c": 32, "k": 3, "pad": 1}
TARGET_INSN_PER_MAC = 1.5
TARGET_SPEEDUP = 2.0

P8, P16, P32 = (ctypes.POINTER(t) for t in (I8, I16, I32))
PROBE = """#include <stddef.h>
#include "eb_kernels_opt.h"
int eb_test_conv_scratch(int ipg, int k_h, int k_w) { return EB_CONV_OPT_SCRATCH(ipg, k_h, k_w); }
int eb_test_linear_scratch(int in_f) { return EB_LINEAR_OPT_SCRATCH(in_f); }
int eb_test_dw_scratch(int in_w, int pad_w, int out_h) { return EB_DW_OPT_SCRATCH(in_w, pad_w, out_h); }
int eb_test_dw_tile_scratch(void) { return EB_DW_TILE_SCRATCH; }
int eb_test_sizeof_conv(void) { return (int)sizeof(eb_conv_params); }
""" + "".join(f"int eb_test_offsetof_{f}(void) {{ return (int)offsetof(eb_conv_params, {f}); }}\n"
              for f, _ in ConvParams._fields_)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_kernels_opt")
    (build / "probe.c").write_text(PROBE)
    shared = build / "libeb_opt.so"
    result = subprocess.run(
        [GCC, *CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_kernels_opt.c"),
         str(KERNELS / "eb_dw_opt.c"), str(build / "probe.c"), "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    conv = [ctypes.POINTER(ConvParams), P8, P8, P32]
    lin = [ctypes.c_int, ctypes.c_int, P8, P8, P32]
    q = [ctypes.c_int] * 3
    for name, args in {"eb_conv2d": [*conv, P8], "eb_conv2d_wide": [*conv, P32],
                       "eb_conv2d_opt": [*conv, P8, P16], "eb_conv2d_wide_opt": [*conv, P32, P16],
                       "eb_linear": [*lin, *q, P8], "eb_linear_wide": [*lin, P32],
                       "eb_linear_opt": [*lin, *q, P8, P16],
                       "eb_linear_wide_opt": [*lin, P32, P16]}.items():
        getattr(so, name).argtypes = args
        getattr(so, name).restype = None
    return so


# ---- random configurations -----------------------------------------------------------------

def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def int8_data(rng, shape) -> np.ndarray:
    """int8 from one of several distributions; -128 and 127 always occur."""
    flavour = rng.integers(4)
    if flavour == 0:
        x = rng.integers(-128, 128, size=shape)
    elif flavour == 1:
        x = rng.integers(-128, 16, size=shape)
    elif flavour == 2:
        x = rng.integers(-3, 4, size=shape)
    else:
        x = rng.choice([-128, 127], size=shape)
    flat = x.reshape(-1)
    flat[rng.integers(flat.size)] = -128
    flat[rng.integers(flat.size)] = 127
    return x.astype(np.int8)


def int_weights(rng, shape) -> tuple[np.ndarray, int]:
    """Weights of a random bit width; extremes present, sometimes all at the minimum (-128)."""
    bits = int(rng.choice(numerics.WEIGHT_BITS))
    low, high = numerics.weight_limits(bits)
    w = rng.choice([low, high], size=shape) if rng.random() < 0.15 else \
        rng.integers(low, high + 1, size=shape)
    flat = w.reshape(-1)
    flat[0] = low
    flat[-1] = high
    if rng.random() < 0.1:
        w = np.full(shape, low)
    return w.astype(np.int8), bits


def random_bias(rng, count: int) -> np.ndarray | None:
    if rng.random() < 0.3:
        return None
    magnitude = 1 << int(rng.choice([4, 10, 16, 22]))
    return rng.integers(-magnitude, magnitude, size=count).astype(np.int32)


def conv_config(rng, index: int) -> dict:
    while True:
        in_c = int(rng.integers(1, 21))
        layout = ["dense", "dense", "depthwise", "grouped"][index % 4]
        if layout == "dense":
            groups, out_c = 1, int(rng.integers(1, 12))
        elif layout == "depthwise":
            groups = in_c
            out_c = in_c * int(rng.choice([1, 1, 2]))
        else:
            groups = int(rng.choice([d for d in range(1, in_c + 1) if in_c % d == 0]))
            out_c = groups * int(rng.integers(1, 4))
        one_d = rng.random() < 0.15
        cfg = {
            "in_c": in_c, "in_h": 1 if one_d else int(rng.integers(1, 14)),
            "in_w": int(rng.integers(1, 14)), "out_c": out_c,
            "k_h": 1 if one_d else int(rng.integers(1, 6)), "k_w": int(rng.integers(1, 6)),
            "stride_h": 1 if one_d else int(rng.integers(1, 4)),
            "stride_w": int(rng.integers(1, 4)),
            "pad_h": 0 if one_d else int(rng.integers(0, 4)), "pad_w": int(rng.integers(0, 4)),
            "dil_h": 1 if one_d else int(rng.integers(1, 3)), "dil_w": int(rng.integers(1, 3)),
            "groups": groups, "shift": int(rng.integers(-15, 4)),
            "rounding": int(rng.integers(2)), "act": int(rng.integers(3))}
        cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"],
                                cfg["dil_h"])
        cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"],
                                cfg["dil_w"])
        if cfg["out_h"] >= 1 and cfg["out_w"] >= 1:
            return cfg


def conv_case(kind: str, index: int) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng([SEED, sum(map(ord, kind)), index])
    cfg = conv_config(rng, index)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    return cfg, x, w, random_bias(rng, cfg["out_c"])


def linear_case(kind: str, index: int):
    rng = np.random.default_rng([SEED, sum(map(ord, kind)), index])
    in_f = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 9])) if index < 8 else int(rng.integers(1, 400))
    out_f = int(rng.integers(1, 24))
    x = int8_data(rng, (in_f,))
    w, _ = int_weights(rng, (out_f, in_f))
    q = {"shift": int(rng.integers(-15, 4)), "rounding": int(rng.integers(2)),
         "act": int(rng.integers(3))}
    return in_f, out_f, x, w, random_bias(rng, out_f), q


# ---- calling the kernels -------------------------------------------------------------------

def ptr(arr, ctype):
    return None if arr is None else arr.ctypes.data_as(ctypes.POINTER(ctype))


def guarded(count: int, dtype) -> np.ndarray:
    return np.full(count + GUARD, SENTINEL, dtype=dtype)


def checked(buf: np.ndarray, count: int, what: str) -> np.ndarray:
    assert (buf[count:] == SENTINEL).all(), f"{what} wrote past its output"
    return buf[:count].copy()


def scratch_buffer(elements: int) -> np.ndarray:
    buf = np.full(elements + GUARD, 0x5A5A, dtype=np.int16)
    assert buf.ctypes.data % 4 == 0
    return buf


def check_scratch(buf: np.ndarray, elements: int, what: str) -> None:
    assert (buf[elements:] == 0x5A5A).all(), f"{what} wrote past EB_*_OPT_SCRATCH"


# A C firmware's scratch for the depthwise entry points: the largest padded copy.
SCRATCH = "static int16_t scratch[(EB_DW_PAD_BYTES + EB_DW_PAD_SLACK + 1) / 2] " \
    "__attribute__((aligned(4)));\n"


def padded_path_shape(cfg: dict) -> bool:
    """A depthwise layer of the shape the padded path takes (eb_kernels_opt.h,
    EB_DW_OPT_SCRATCH; whether it does also depends on the requantization)."""
    return cfg["groups"] == cfg["in_c"] and all(cfg[k] == 3 for k in ("k_h", "k_w")) and \
        all(cfg[k] == 1 for k in ("stride_h", "stride_w", "dil_h", "dil_w")) and \
        cfg["in_w"] >= 4 and cfg["pad_w"] <= 3 and min(cfg["out_h"], cfg["out_w"]) >= 2


def dw_scratch_bytes(lib, cfg: dict) -> int:
    """EB_DW_OPT_SCRATCH of a layer of the padded path's shape, else 0."""
    return lib.eb_test_dw_scratch(cfg["in_w"], cfg["pad_w"], cfg["out_h"]) \
        if padded_path_shape(cfg) else 0


def plane_of(cfg: dict):
    """The edgebuild.core.geometry.Plane of a test layer's config (its conv fields)."""
    from edgebuild.core.geometry import Plane

    return Plane(**{f: cfg[f] for f in Plane.__dataclass_fields__})


def tile_kernel_shape(cfg: dict) -> bool:
    """A depthwise layer the tile kernel may take (edgebuild.ops.conv_path.dw_tile: the plan claims
    EB_DW_TILE_SCRATCH for it)."""
    from edgebuild.ops.conv_path import dw_tile

    return dw_tile(plane_of(cfg))


def conv_scratch_elements(lib, cfg: dict) -> int:
    """int16 scratch of eb_conv2d(_wide)_opt for cfg: EB_CONV_OPT_SCRATCH, or for a depthwise
    layer the padded path may take, EB_DW_OPT_SCRATCH if larger, or the tile kernel's
    EB_DW_TILE_SCRATCH, or the im2col path's padded band or the column kernels' rows two at
    a time (the plan's twins, ops.im2col_band.elements and ops.column_rows.elements: the
    guard after it checks the twins)."""
    conv = plane_of(cfg)
    return max(lib.eb_test_conv_scratch(cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"]),
               (dw_scratch_bytes(lib, cfg) + 1) // 2,
               lib.eb_test_dw_tile_scratch() if tile_kernel_shape(cfg) else 0,
               im2col_band.elements(conv),
               column_rows.elements(conv), conv_path.copy_claim(conv, False)[1])


def params_of(cfg: dict) -> ConvParams:
    return ConvParams(**{k: cfg[k] for k in (*CONV_FIELDS, "shift", "rounding", "act")})


def run_conv_pair(lib, cfg, x, w, bias, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """(reference, optimized) outputs of eb_conv2d(_wide) and eb_conv2d(_wide)_opt."""
    params = params_of(cfg)
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    elements = conv_scratch_elements(lib, cfg)
    scratch = scratch_buffer(elements)
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    ref, opt = guarded(count, dtype), guarded(count, dtype)
    name = "eb_conv2d_wide" if wide else "eb_conv2d"
    getattr(lib, name)(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(bias, I32),
                       ptr(ref, ctype))
    getattr(lib, name + "_opt")(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(bias, I32),
                                ptr(opt, ctype), ptr(scratch, I16))
    check_scratch(scratch, elements, name + "_opt")
    return checked(ref, count, name), checked(opt, count, name + "_opt")


def run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide: bool):
    elements = lib.eb_test_linear_scratch(in_f)
    scratch = scratch_buffer(elements)
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    ref, opt = guarded(out_f, dtype), guarded(out_f, dtype)
    args = [in_f, out_f, ptr(x, I8), ptr(w, I8), ptr(bias, I32)]
    if wide:
        lib.eb_linear_wide(*args, ptr(ref, I32))
        lib.eb_linear_wide_opt(*args, ptr(opt, I32), ptr(scratch, I16))
    else:
        qa = [q["shift"], q["rounding"], q["act"]]
        lib.eb_linear(*args, *qa, ptr(ref, I8))
        lib.eb_linear_opt(*args, *qa, ptr(opt, I8), ptr(scratch, I16))
    check_scratch(scratch, elements, "eb_linear_opt")
    return checked(ref, out_f, "eb_linear"), checked(opt, out_f, "eb_linear_opt")


# ---- host: optimized == reference -----------------------------------------------------------

def test_struct_layout_matches_header(lib):
    assert ctypes.sizeof(ConvParams) == lib.eb_test_sizeof_conv()
    for field, _ in ConvParams._fields_:
        assert getattr(ConvParams, field).offset == getattr(lib, f"eb_test_offsetof_{field}")()


def test_scratch_macros(lib):
    """Documented sizes: conv 4 columns of round4(K) int16, linear one column."""
    for ipg, kh, kw in [(1, 1, 1), (1, 3, 3), (16, 3, 3), (3, 5, 1), (7, 1, 1)]:
        kp = (ipg * kh * kw + 3) // 4 * 4
        assert lib.eb_test_conv_scratch(ipg, kh, kw) == 4 * kp
    for in_f in (1, 4, 5, 255, 256):
        assert lib.eb_test_linear_scratch(in_f) == (in_f + 3) // 4 * 4


@pytest.mark.parametrize("index", range(CONV_CASES))
def test_conv_opt_equals_reference(lib, index):
    cfg, x, w, bias = conv_case("conv", index)
    context = f"{cfg} bias={'yes' if bias is not None else 'NULL'}"
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide=True)
    assert np.abs(ref.astype(np.int64)).max() < (1 << 30), context
    np.testing.assert_array_equal(opt, ref, err_msg="wide " + context)
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide=False)
    np.testing.assert_array_equal(opt, ref, err_msg=context)


@pytest.mark.parametrize("index", range(LINEAR_CASES))
def test_linear_opt_equals_reference(lib, index):
    in_f, out_f, x, w, bias, q = linear_case("linear", index)
    context = f"in_f={in_f} out_f={out_f} {q} bias={'yes' if bias is not None else 'NULL'}"
    for wide in (True, False):
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {context}")


# Hand-picked shapes for the kernel's special paths: rows narrower than a word, padding
# wider than a word (taps entirely outside), whole output rows in the padding, K % 4 = 1..3,
# 4-pixel groups that wrap to the next output row, stride 2, 1x1, k wider than the input.
EDGE_CONVS = [
    dict(in_c=2, in_h=3, in_w=1, out_c=3, k_h=3, k_w=1, pad_h=1, pad_w=0),
    dict(in_c=3, in_h=4, in_w=2, out_c=2, k_h=2, k_w=3, pad_h=1, pad_w=2),
    dict(in_c=1, in_h=5, in_w=3, out_c=5, k_h=3, k_w=3, pad_h=1, pad_w=1),
    dict(in_c=4, in_h=6, in_w=9, out_c=9, k_h=3, k_w=3, pad_h=5, pad_w=6),
    dict(in_c=5, in_h=7, in_w=7, out_c=11, k_h=3, k_w=3, pad_h=1, pad_w=1),
    dict(in_c=3, in_h=9, in_w=13, out_c=4, k_h=5, k_w=5, pad_h=4, pad_w=4, dil_h=2, dil_w=2),
    dict(in_c=6, in_h=8, in_w=10, out_c=6, k_h=3, k_w=3, pad_h=1, pad_w=1, stride_w=2),
    dict(in_c=7, in_h=5, in_w=6, out_c=13, k_h=1, k_w=1),
    dict(in_c=2, in_h=4, in_w=4, out_c=3, k_h=3, k_w=7, pad_h=1, pad_w=4),
    dict(in_c=8, in_h=6, in_w=6, out_c=8, k_h=3, k_w=3, pad_h=1, pad_w=1, groups=8),
    dict(in_c=1, in_h=1, in_w=17, out_c=7, k_h=1, k_w=5, pad_w=2),
    dict(in_c=33, in_h=5, in_w=8, out_c=3, k_h=1, k_w=1, stride_h=2),
]


def edge_case(index: int):
    rng = np.random.default_rng([SEED, 99, index])
    cfg = {"stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
           "groups": 1, "shift": -7, "rounding": index % 2, "act": index % 3, **EDGE_CONVS[index]}
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    assert cfg["out_h"] >= 1 and cfg["out_w"] >= 1
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    return cfg, x, w, random_bias(rng, cfg["out_c"])


@pytest.mark.parametrize("index", range(len(EDGE_CONVS)))
def test_conv_opt_edge_shapes(lib, index):
    cfg, x, w, bias = edge_case(index)
    for wide in (True, False):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


def test_unaligned_weights_and_inputs(lib):
    """Weights and inputs at odd addresses (generated arrays are only byte-aligned)."""
    rng = np.random.default_rng([SEED, 7])
    cfg = {"in_c": 5, "in_h": 7, "in_w": 6, "out_c": 7, "k_h": 3, "k_w": 3, "stride_h": 1,
           "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1, "dil_w": 1, "groups": 1,
           "shift": -9, "rounding": 0, "act": 2, "out_h": 7, "out_w": 6}
    for offset in (1, 2, 3):
        xb = np.zeros(5 * 7 * 6 + offset, dtype=np.int8)
        wb = np.zeros(7 * 5 * 9 + offset, dtype=np.int8)
        x, w = xb[offset:], wb[offset:]
        x[:] = int8_data(rng, x.shape)
        w[:] = int_weights(rng, w.shape)[0]
        for wide in (True, False):
            ref, opt = run_conv_pair(lib, cfg, x.reshape(5, 7, 6), w.reshape(7, 5, 3, 3),
                                     None, wide)
            np.testing.assert_array_equal(opt, ref)
        q = {"shift": -8, "rounding": 1, "act": 1}
        for wide in (True, False):
            ref, opt = run_linear_pair(lib, 37, 5, x[:37], w[:185], None, q, wide)
            np.testing.assert_array_equal(opt, ref)


# ---- depthwise (groups == in_c): eb_conv2d(_wide)_opt's direct path -----------------------

def dw_config(in_c, in_h, in_w, k, m=1, stride=1, pad=0, dil=1, **quant) -> dict:
    """A depthwise layer, out_c = m * in_c; k, stride, pad and dil are one int for both axes
    or an (h, w) pair."""
    def hw(v):
        return (v, v) if isinstance(v, int) else v
    (k_h, k_w), (s_h, s_w), (p_h, p_w), (d_h, d_w) = map(hw, (k, stride, pad, dil))
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": m * in_c, "k_h": k_h,
           "k_w": k_w, "stride_h": s_h, "stride_w": s_w, "pad_h": p_h, "pad_w": p_w,
           "dil_h": d_h, "dil_w": d_w, "groups": in_c, "shift": -7, "rounding": 0, "act": 0,
           **quant}
    cfg["out_h"] = conv_out(in_h, k_h, s_h, p_h, d_h)
    cfg["out_w"] = conv_out(in_w, k_w, s_w, p_w, d_w)
    assert cfg["out_h"] >= 1 and cfg["out_w"] >= 1, cfg
    return cfg


def dw_1d(in_c, length, k, m=1, stride=1, pad=0, dil=1, vertical=False, **quant) -> dict:
    """A 1-D depthwise layer as the code generator lays it out: [C][1][L], or [C][L][1]
    (vertical, as tiled layers are)."""
    if vertical:
        return dw_config(in_c, length, 1, (k, 1), m, (stride, 1), (pad, 0), (dil, 1), **quant)
    return dw_config(in_c, 1, length, (1, k), m, (1, stride), (0, pad), (1, dil), **quant)


DW_SHAPES = [
    # DS-CNN blocks (3x3, pad 1) on keyword-spotting maps; channel multipliers 2 and 3
    dw_config(4, 25, 5, 3, pad=1),
    dw_config(3, 49, 10, 3, pad=1),
    dw_config(3, 12, 25, 3, pad=1),
    dw_config(3, 7, 9, 3, m=2, pad=1),
    dw_config(2, 6, 7, 3, m=3, pad=1),
    dw_config(5, 8, 8, 3, pad=0),
    dw_config(4, 9, 11, 3, pad=2),
    # 3x3 by whole columns: words overhanging the row ends by 1..3 bytes, 4 or 5 rows (the
    # fewest; an odd count), 2 output columns; and beside it: 3 rows, stride_h 2, k_h 1
    dw_config(3, 8, 9, 3, pad=(1, 2)),
    dw_config(2, 6, 8, 3, pad=(0, 3)),
    dw_config(2, 4, 6, 3, pad=(1, 0)),
    dw_config(2, 5, 4, 3),
    dw_config(2, 3, 7, 3, pad=1),
    dw_config(2, 7, 9, 3, stride=(2, 1), pad=1),
    dw_config(2, 4, 9, (1, 3), pad=(0, 1)),
    # stride 2 and 3, dilation 2 and 3 (alone, per axis, together)
    dw_config(3, 25, 10, 3, stride=2, pad=1),
    dw_config(3, 9, 8, 3, m=2, stride=2),
    dw_config(3, 10, 11, 3, stride=(1, 2), pad=(1, 2)),
    dw_config(3, 9, 12, 3, stride=3, pad=1),
    dw_config(3, 12, 13, 3, dil=2, pad=2),
    dw_config(2, 11, 12, 3, m=2, dil=(1, 2), pad=(1, 2)),
    dw_config(2, 10, 9, 3, dil=(2, 1), pad=(2, 0)),
    dw_config(2, 13, 14, 3, dil=3, pad=3),
    dw_config(2, 14, 15, 3, stride=2, dil=2, pad=1),
    # other kernels: 1x1, 2x2, 4x4 and 8 taps (no spare fourth tap), 5x5, 7x7, non-square
    dw_config(4, 5, 6, 1),
    dw_config(3, 6, 7, 2, pad=1),
    dw_config(3, 9, 10, 4, pad=(1, 2)),
    dw_config(2, 10, 12, 5, pad=2),
    dw_config(2, 9, 13, 7, pad=3),
    dw_config(2, 5, 20, (1, 8), pad=(0, 3)),
    dw_config(2, 8, 9, (3, 5), pad=(1, 2)),
    dw_config(2, 9, 8, (5, 2), pad=(2, 0)),
    dw_config(2, 7, 17, (2, 9), pad=(0, 4), dil=(1, 2)),
    # rows narrower than a word, padding wider than a word, kernels wider than the row
    dw_config(3, 7, 1, 3, pad=1),
    dw_config(3, 6, 2, 3, pad=1),
    dw_config(3, 5, 3, 3, pad=1),
    dw_config(2, 5, 2, (3, 5), pad=(1, 3)),
    dw_config(2, 4, 4, 3, pad=1),
    dw_config(2, 6, 6, 3, pad=5),
    dw_config(2, 4, 3, (3, 7), pad=(1, 4)),
    dw_config(2, 3, 5, 5, pad=4, dil=2),
    dw_config(2, 1, 1, 3, pad=1),
    # 1-D, both orientations
    dw_1d(4, 49, 3, pad=1),
    dw_1d(4, 49, 3, pad=1, vertical=True),
    dw_1d(3, 40, 5, pad=2, stride=2),
    dw_1d(3, 40, 5, pad=2, stride=2, vertical=True),
    dw_1d(3, 33, 3, m=2, pad=2, dil=2),
    dw_1d(3, 33, 3, m=2, pad=2, dil=2, vertical=True),
    dw_1d(2, 30, 8),
    dw_1d(2, 30, 9, pad=4, vertical=True),
    dw_1d(3, 25, 1),
    dw_1d(3, 3, 3, pad=1),
    dw_1d(2, 2, 3, pad=2, vertical=True),
    dw_1d(2, 17, 4, pad=3, dil=3, vertical=True),
    dw_1d(2, 100, 7, pad=3, stride=3),
    # the tile kernel on layers of several tiles (its patch: 512 int16): long 1-D rows cut
    # into column tiles, a column kernel transposed (14 x 1 over 14 rows, multiplier 2),
    # blocks down the columns (narrow outputs, a last short tile taken again), big maps with
    # strides, dilations and padding rows wholly skipped
    dw_1d(2, 583, 15, pad=7),
    dw_1d(2, 430, 11, m=2, pad=10, dil=2, vertical=True),
    dw_config(2, 14, 100, (14, 1), m=2),
    dw_config(3, 46, 11, (5, 1), pad=(2, 0)),
    dw_config(2, 70, 3, (7, 3), m=3, pad=(3, 1)),
    dw_config(2, 40, 70, 5, m=2, stride=2, pad=2),
    dw_config(2, 3, 98, 7, stride=2, pad=3),
    dw_config(2, 30, 30, 7, pad=6, dil=2),
    dw_config(1, 26, 16, (12, 1), m=4, pad=(5, 0)),
    # a 1x1 kernel (a per-channel scale, four inputs a word, an odd tail)
    dw_1d(2, 583, 1, m=2),
    # a 15x15 kernel at stride 2 on a map smaller than it (120 tap pairs, the tile kernel's
    # most: EB_DW_TILE_TAPS), most taps in the padding
    dw_config(2, 14, 18, 15, m=2, stride=2, pad=7),
]
# (rounding, act, shift) per variant: every rounding x activation, right shifts of several
# sizes, no shift and a left shift.
DW_QUANT = [(0, 0, -7), (0, 1, -1), (0, 2, -12), (1, 0, 0), (1, 1, 2), (1, 2, -20)]


def dw_data(cfg: dict, rng) -> tuple[np.ndarray, np.ndarray]:
    """Input and weights of a conv (depthwise or any grouping: in_c / groups per output)."""
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    return x, w


@pytest.mark.parametrize("index", range(len(DW_SHAPES)))
def test_depthwise_opt_equals_reference(lib, index):
    """Each shape with every rounding and activation, several shifts, bias or none; narrow
    and wide outputs."""
    rng = np.random.default_rng([SEED, 55, index])
    for variant, (rounding, act, shift) in enumerate(DW_QUANT):
        cfg = {**DW_SHAPES[index], "rounding": rounding, "act": act, "shift": shift}
        x, w = dw_data(cfg, rng)
        bias = None if variant == 3 else \
            rng.integers(-(1 << 16), 1 << 16, size=cfg["out_c"]).astype(np.int32)
        for wide in (True, False):
            ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
            np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


def test_depthwise_extreme_bias(lib):
    """Biases so close to the int32 limits that rounding cannot be folded into the start
    value (the general requantization runs instead), with sums reaching the limits exactly
    (every x and w -128): still equal."""
    cfg = dw_config(4, 9, 10, 3, pad=1, shift=-20, rounding=0)
    rng = np.random.default_rng([SEED, 56])
    room = 9 * 128 * 128
    bias = np.array([2**31 - 1 - room, -2**31 + room, 2**31 - 1 - room - (1 << 19), 5],
                    dtype=np.int32)
    check_extremes(lib, cfg, dw_data(cfg, rng), bias)


@pytest.mark.parametrize("shift", [0, -1, -7, -8, -12, -16, -17])
def test_depthwise_scale_limits(lib, shift):
    """A per-channel scale (1x1 depthwise) whose biases sit at the edge of the packed loop's
    range (eb_dw_scale16_takes: right shifts s of 0..16, the init scaled by 2^(16 - s)
    within (2^30 - 2^24) >> (16 - s)), one either side of it, where a sum would overflow
    past it, and far outside: each channel equal, inputs and weights at their extremes
    too. A shift of 17 is past the loop's range."""
    s = -shift
    lim = ((1 << 30) - (1 << 24)) >> max(16 - s, 0)
    cfg = dw_1d(11, 13, 1, shift=shift, rounding=1)
    half = 1 << (s - 1) if s else 0
    bias = np.array([lim - half, lim - half + 1, -lim - half, -lim - half - 1, 2 * lim,
                     -2 * lim - 1, 3 * lim, 2**31 - 1 - 16384, -2**31 + 16384, 0, -1])
    bias = np.clip(bias, -2**31, 2**31 - 1).astype(np.int32)
    rng = np.random.default_rng([SEED, 58, s])
    check_extremes(lib, {**cfg, "shift": shift}, dw_data(cfg, rng), bias, shifts=(shift,))


def check_extremes(lib, cfg: dict, data, bias, shifts=(-20, -31, -1, 0, 3)) -> None:
    """cfg on data (x, w) and on every x at -128 with every w at -128 or 127 (the largest
    sums), each activation and several shifts, narrow and wide: equal to the reference."""
    random_x, random_w = data
    extreme_x = np.full_like(random_x, -128)
    for x, w in ((random_x, random_w), (extreme_x, np.full_like(random_w, -128)),
                 (extreme_x, np.full_like(random_w, 127))):
        for act in range(3):
            for shift in shifts:
                c = {**cfg, "act": act, "shift": shift}
                for wide in (True, False):
                    ref, opt = run_conv_pair(lib, c, x, w, bias, wide)
                    np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {c}")


def assert_drawn_equal(lib, cfg: dict, seed: int, wide: bool) -> None:
    """A drawn depthwise layer (dw_data, random_bias from seed) on the optimized kernels and
    the reference: equal."""
    rng = np.random.default_rng(seed)
    x, w = dw_data(cfg, rng)
    ref, opt = run_conv_pair(lib, cfg, x, w, random_bias(rng, cfg["out_c"]), wide)
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def m4_drawn_exact(lib, build: Path, name: str, cfgs, seed: int) -> None:
    """Drawn depthwise layers (dw_data, random_bias from seed) as one M4 firmware: exact."""
    rng = np.random.default_rng(seed)
    m4_convs_exact(lib, build, name,
                   [(cfg, *dw_data(cfg, rng), random_bias(rng, cfg["out_c"])) for cfg in cfgs])


def check_extremes_near_limits(lib, cfgs, seed: int) -> None:
    """check_extremes for each cfg with biases near the int32 limits a sum may reach
    (bias +- the largest k_h k_w 128 128 of a depthwise output, and small ones): the
    channels whose start leaves no room go to the generic stores."""
    rng = np.random.default_rng(seed)
    for cfg in cfgs:
        data = dw_data(cfg, rng)
        room = cfg["k_h"] * cfg["k_w"] * 128 * 128
        bias = np.resize(np.array([2**31 - 1 - room, -2**31 + room, 5, -5], dtype=np.int64),
                         cfg["out_c"]).astype(np.int32)
        check_extremes(lib, cfg, data, bias)


def test_depthwise_uses_exactly_its_counted_scratch(lib):
    """The depthwise path's scratch is the padded path's channel copy, EB_DW_OPT_SCRATCH bytes,
    or the tile kernel's patch, EB_DW_TILE_SCRATCH int16 (the plan counts either,
    tests/test_workspace.py): a 3x3 stride-1 layer writes its last padded row there and
    nothing past it (the whole plane, or a band of a plane too big for 2 KiB); other kernels
    (a 5x5, 1-D ones, a 9x1 column) write their patch -- its last row's zero padding at the
    end of the patch of its shape -- and nothing past the claim."""
    rng = np.random.default_rng([SEED, 58])
    tile = 2 * lib.eb_test_dw_tile_scratch()
    for cfg in (dw_config(4, 25, 5, 3, pad=1), dw_config(2, 60, 50, 3, pad=1),
                dw_config(2, 10, 12, 5, pad=2), dw_1d(4, 49, 3, pad=1, vertical=True),
                dw_1d(2, 100, 7, pad=3, stride=3), dw_config(2, 20, 6, (9, 1))):
        x, w = dw_data(cfg, rng)
        count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
        need = dw_scratch_bytes(lib, cfg)
        pitch = cfg["in_w"] + cfg["pad_w"]
        fit = (dw_spec.DW_PAD_BYTES - cfg["pad_w"]) // pitch - 2
        rows = cfg["out_h"] if cfg["out_h"] <= fit else fit & ~1
        k3 = cfg["k_h"] == 3 and cfg["k_w"] == 3
        assert need == (((rows + 2) * pitch + cfg["pad_w"] + 4) if k3 else 0), cfg
        three = k3 or (cfg["in_w"] == 1 and cfg["k_h"] == 3)  # a 1-D k = 3 (a column)
        assert tile_kernel_shape(cfg) == (not three), cfg
        claim = 2 * conv_scratch_elements(lib, cfg)
        assert claim == max(2 * lib.eb_test_conv_scratch(1, cfg["k_h"], cfg["k_w"]),
                            need + (need & 1), 0 if three else tile), cfg
        scratch = scratch_buffer(claim // 2)
        out = guarded(count, np.int8)
        lib.eb_conv2d_opt(ctypes.byref(params_of(cfg)), ptr(x, I8), ptr(w, I8), None,
                          ptr(out, I8), ptr(scratch, I16))
        written = scratch.view(np.uint8) != 0x5A
        assert not written[claim:].any(), cfg
        if need:  # the last padded row's right padding (zeros) is written
            last = (rows + 2) * pitch + cfg["pad_w"]
            assert written[last - 1] and not written[need:].any(), cfg
        elif not three:  # the patch: some of it, never past EB_DW_TILE_SCRATCH
            assert written[:tile].any() and not written[tile:].any(), cfg
        else:  # the 3-tap row kernels read the input in place
            assert not written.any(), cfg
        ref = guarded(count, np.int8)
        lib.eb_conv2d(ctypes.byref(params_of(cfg)), ptr(x, I8), ptr(w, I8), None, ptr(ref, I8))
        np.testing.assert_array_equal(out, ref)


def test_tile_patch_is_its_frames_tile(lib):
    """Where the patch cannot hold a layer's map at once, the tile kernel's first tile is the
    one its Python twin plans (conv_path.tile_shape: rows and columns of output in the room
    of EB_DW_TILE_SCRATCH for one input channel, of the first EB_DW_GROUP_PATCH for a dense
    conv's channels side by side): its patch, rows pw apart with their zero padding, ends in
    the last row the plan gives it -- a depthwise 5x5 on 60x50, a 1 -> 4 10x5 stride 2, a
    3 -> 1 15x1 dense conv turned."""
    from edgebuild.ops.conv_path import (
        DW_GROUP_PATCH,
        DW_TILE_ELEMENTS,
        _tile_pitch,
        tile_frame,
        tile_shape,
    )

    rng = np.random.default_rng([SEED, 59])
    dense = {**dw_config(3, 68, 9, (15, 1)), "out_c": 1, "groups": 1}
    for cfg in (dw_config(2, 60, 50, 5, pad=2), dw_config(1, 18, 126, (10, 5), 4, 2, (4, 2)),
                dense):
        f = tile_frame(plane_of(cfg))
        rows, cols = tile_shape(f)
        pitch = _tile_pitch(min(cols, f.out_w), f.s_w, f.k_w, f.d_w)
        size = ((rows - 1) * f.s_h + (f.k_h - 1) * f.d_h + 1) * pitch * f.chans
        assert rows < f.out_h and size <= (DW_TILE_ELEMENTS if f.chans == 1 else
                                           DW_GROUP_PATCH), (cfg, rows, size)
        x, w = dw_data(cfg, rng)
        scratch = scratch_buffer(conv_scratch_elements(lib, cfg))
        out = guarded(cfg["out_c"] * cfg["out_h"] * cfg["out_w"], np.int8)
        lib.eb_conv2d_opt(ctypes.byref(params_of(cfg)), ptr(x, I8), ptr(w, I8), None,
                          ptr(out, I8), ptr(scratch, I16))
        last = np.flatnonzero(scratch.view(np.uint8) != 0x5A)[-1] // 2
        assert size - pitch <= last < size, (cfg, last, size)  # in the tile's last row


def quant_ranges() -> st.SearchStrategy[dict]:
    """Any requantization: rounding, activation (none, relu, abs) and shift -16..2."""
    return st.fixed_dictionaries({"rounding": st.integers(0, 1), "act": st.integers(0, 2),
                                  "shift": st.integers(-16, 2)})


@st.composite
def dw_layers(draw, in_c=(2, 6), m=None, quant=None, hw=(16, 16), k2=6, pad2=4, length=60,
              k1=9, pad1=4) -> dict:
    """A depthwise layer: 2-D (h x w up to hw, kernels up to k2 a side, padding up to pad2) or
    1-D in both layouts (up to `length`, k1, pad1); strides and dilations 1-3; in_c in the
    range, multiplier m (default 1-3) and requantization quant (default quant_ranges) drawn
    from their strategies."""
    layout = draw(st.sampled_from(["2d", "1d", "1d-vertical"]))
    channels, mult = draw(st.integers(*in_c)), draw(m if m is not None else st.integers(1, 3))
    q = draw(quant if quant is not None else quant_ranges())
    if layout == "2d":
        pair = st.tuples
        h, w = draw(st.integers(1, hw[0])), draw(st.integers(1, hw[1]))
        k = draw(pair(st.integers(1, k2), st.integers(1, k2)))
        stride = draw(pair(st.integers(1, 3), st.integers(1, 3)))
        pad = draw(pair(st.integers(0, pad2), st.integers(0, pad2)))
        dil = draw(pair(st.integers(1, 3), st.integers(1, 3)))
        assume(conv_out(h, k[0], stride[0], pad[0], dil[0]) >= 1)
        assume(conv_out(w, k[1], stride[1], pad[1], dil[1]) >= 1)
        return dw_config(channels, h, w, k, mult, stride, pad, dil, **q)
    size, k = draw(st.integers(1, length)), draw(st.integers(1, k1))
    stride, pad, dil = (draw(st.integers(1, 3)), draw(st.integers(0, pad1)),
                        draw(st.integers(1, 3)))
    assume(conv_out(size, k, stride, pad, dil) >= 1)
    return dw_1d(channels, size, k, mult, stride, pad, dil, vertical=layout == "1d-vertical",
                 **q)


def assert_conv_opt_exact(lib, cfg: dict, seed: int, with_bias: bool) -> None:
    """The optimized conv of cfg on seeded data (with a bias or not) equals the reference,
    int8 and wide."""
    rng = np.random.default_rng(seed)
    x, w = dw_data(cfg, rng)
    bias = random_bias(rng, cfg["out_c"]) if with_bias else None
    for wide in (True, False):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


@settings(max_examples=300, deadline=None)
@given(cfg=dw_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_depthwise_opt_random_layers(lib, cfg, seed, with_bias):
    assert_conv_opt_exact(lib, cfg, seed, with_bias)


# ---- Cortex-M4 under QEMU ------------------------------------------------------------------

needs_m4 = pytest.mark.skipif(
    ARM_GCC is None or QEMU is None or ARM_NM is None,
    reason="arm-none-eabi-gcc / arm-none-eabi-nm / qemu-system-arm not installed "
           "(apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")


def c_array(ctype: str, name: str, values) -> str:
    flat = np.asarray(values).reshape(-1).astype(np.int64)
    body = ",".join(str(int(v)) for v in flat) if flat.size else "0"
    return f"static const {ctype} {name}[{max(flat.size, 1)}] = {{{body}}};\n"


@pytest.fixture(scope="module")
def m4_build(tmp_path_factory):
    """A directory with startup_m4.c and the rendered link.ld (both another helper's files)."""
    jinja2 = pytest.importorskip("jinja2")
    build = tmp_path_factory.mktemp("eb_opt_m4")
    startup, template = PROJECT / "startup_m4.c", PROJECT / "link.ld.j2"
    assert startup.is_file(), f"{startup} is missing"
    assert template.is_file(), f"{template} is missing"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    (build / "link.ld").write_text(env.from_string(template.read_text()).render(**LINK_VARS))
    shutil.copy(startup, build / "startup_m4.c")
    return build


KERNEL_SOURCES = ("eb_kernels.c", "eb_kernels_opt.c", "eb_dw_opt.c")


def kernel_objects(build: Path, defines: tuple[str, ...] = (),
                   sources: tuple[str, ...] = KERNEL_SOURCES) -> list[Path]:
    """The kernel files compiled for the M4 with `defines`, once per build directory: the
    ~2 s a firmware spent compiling them was most of a build, and the selection tests link
    the same kernels into dozens of programs. Each file's key holds the defines its text or
    a kernel header names (one neither mentions cannot change it) and that text; compiled
    apart and linked, as gcc does with every source on one command line."""
    headers = b"".join(h.name.encode() + h.read_bytes() for h in sorted(KERNELS.glob("eb_*.h")))
    objects = []
    for source in sources:
        text = (KERNELS / source).read_bytes()
        named = sorted(d for d in defines
                       if d.split("=")[0][2:].encode() in text + headers)  # -DNAME[=value]
        key = hashlib.sha256(repr((M4_FLAGS, CFLAGS, named)).encode() + headers + text)
        obj = build / f"kobj_{key.hexdigest()[:16]}_{Path(source).stem}.o"
        if not obj.is_file():
            part = obj.with_suffix(".part")
            result = subprocess.run(
                [ARM_GCC, *M4_FLAGS, *CFLAGS, *named, f"-I{KERNELS}", "-c",
                 str(KERNELS / source), "-o", str(part)],
                capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
            part.replace(obj)
        objects.append(obj)
    return objects


def build_m4(build: Path, name: str, source: str, defines: tuple[str, ...] = ()) -> Path:
    (build / f"{name}.c").write_text(source)
    elf = build / f"{name}.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, *defines, f"-I{KERNELS}", *M4_LINK,
         "-Wl,-T," + str(build / "link.ld"), "-o", str(elf), str(build / "startup_m4.c"),
         str(build / f"{name}.c"), *map(str, kernel_objects(build, defines))],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


def run_qemu(elf: Path, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "60", QEMU, *QEMU_CMD, *(extra or []), "-kernel", str(elf)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)


M4_MAIN = """
static int16_t scratch[SCRATCH + 16] __attribute__((aligned(4)));
static int8_t out8[OUT + 16];
static int32_t out32[OUT + 16];

static void fill(int n)
{
    int i;
    for (i = 0; i < SCRATCH + 16; ++i) scratch[i] = 0x5A5A;
    for (i = 0; i < n + 16; ++i) { out8[i] = 0x5A; out32[i] = 0x5A5A5A5A; }
}

static int check(int c, const char *what, int n, int scratch_n, const int8_t *e8, const int32_t *e32)
{
    int i, bad = 0;
    for (i = 0; i < n; ++i) bad |= e8 ? out8[i] != e8[i] : out32[i] != e32[i];
    for (i = n; i < n + 16; ++i) bad |= out8[i] != 0x5A || out32[i] != 0x5A5A5A5A;
    for (i = scratch_n; i < SCRATCH + 16; ++i) bad |= scratch[i] != 0x5A5A;
    if (bad) printf("case %d %s: MISMATCH\\n", c, what);
    return bad;
}
"""


def m4_test_program(lib, convs=None, linears: bool = True, linear_cases=None) -> str:
    """Reference outputs from the host library, embedded next to the inputs: conv cases
    `convs` (default: random and edge ones) and, with `linears`, one linear case per conv
    (or `linear_cases`: (in_f, out_f, x, w, bias, q) tuples as linear_case makes)."""
    parts = ['#include <stdio.h>\n#include "eb_kernels.h"\n#include "eb_kernels_opt.h"\n']
    calls, max_scratch, max_out = [], 16, 16
    if convs is None:
        convs = [conv_case("m4", i) for i in range(M4_CASES)] + \
            [edge_case(i) for i in M4_EDGE_CASES]
    for i, (cfg, x, w, bias) in enumerate(convs):
        ref8, _ = run_conv_pair(lib, cfg, x, w, bias, wide=False)
        ref32, _ = run_conv_pair(lib, cfg, x, w, bias, wide=True)
        n = ref8.size
        sn = conv_scratch_elements(lib, cfg)
        max_scratch, max_out = max(max_scratch, sn), max(max_out, n)
        fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act"))
        fields += ", 0"  # wbits: int8 weights
        parts.append(f"static const eb_conv_params p{i} = {{{fields}}};\n")
        parts += [c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e8_{i}", ref8), c_array("int32_t", f"e32_{i}", ref32)]
        b = "NULL"
        if bias is not None:
            parts.append(c_array("int32_t", f"b{i}", bias))
            b = f"b{i}"
        calls.append(f"fill({n}); eb_conv2d_opt(&p{i}, x{i}, w{i}, {b}, out8, scratch);\n"
                     f"bad += check({i}, \"conv\", {n}, {sn}, e8_{i}, NULL);\n"
                     f"fill({n}); eb_conv2d_wide_opt(&p{i}, x{i}, w{i}, {b}, out32, scratch);\n"
                     f"bad += check({i}, \"conv wide\", {n}, {sn}, NULL, e32_{i});\n")
    if linear_cases is None:
        linear_cases = [linear_case("m4", i) for i in range(len(convs))] if linears else []
    for i, case in enumerate(linear_cases):
        code, sn, out_f = _m4_linear(lib, i, *case)
        parts += code[:-1]
        calls.append(code[-1])
        max_scratch, max_out = max(max_scratch, sn), max(max_out, out_f)
    parts.append(f"#define SCRATCH {max_scratch}\n#define OUT {max_out}\n" + M4_MAIN)
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("eb_kernels_opt on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


def _m4_linear(lib, i, in_f, out_f, lx, lw, lb, q) -> tuple[list[str], int, int]:
    """One linear case of m4_test_program: its arrays, then its calls (the last string),
    the scratch it needs and its output count."""
    lref8, _ = run_linear_pair(lib, in_f, out_f, lx, lw, lb, q, wide=False)
    lref32, _ = run_linear_pair(lib, in_f, out_f, lx, lw, lb, q, wide=True)
    sn = lib.eb_test_linear_scratch(in_f)
    code = [c_array("int8_t", f"lx{i}", lx), c_array("int8_t", f"lw{i}", lw),
            c_array("int8_t", f"le8_{i}", lref8), c_array("int32_t", f"le32_{i}", lref32)]
    b = "NULL"
    if lb is not None:
        code.append(c_array("int32_t", f"lb{i}", lb))
        b = f"lb{i}"
    args = f"{in_f}, {out_f}, lx{i}, lw{i}, {b}"
    code.append(
        f"fill({out_f}); eb_linear_opt({args}, {q['shift']}, {q['rounding']}, {q['act']}, "
        f"out8, scratch);\nbad += check({i}, \"linear\", {out_f}, {sn}, le8_{i}, NULL);\n"
        f"fill({out_f}); eb_linear_wide_opt({args}, out32, scratch);\n"
        f"bad += check({i}, \"linear wide\", {out_f}, {sn}, NULL, le32_{i});\n")
    return code, sn, out_f


@needs_m4
def test_m4_opt_equals_reference_under_qemu(lib, m4_build):
    elf = build_m4(m4_build, "opt_kat", m4_test_program(lib))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


def assert_m4_exact(elf: Path, what: str = "") -> None:
    """A test firmware run under QEMU: exit status 0 and every call equal to its reference."""
    result = run_qemu(elf)
    assert result.returncode == 0, \
        f"{what}: exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout, f"{what}\n{result.stdout}"


def m4_convs_exact(lib, build: Path, name: str, convs, defines: tuple[str, ...] = ()) -> Path:
    """The conv cases as one M4 firmware (m4_test_program, no linear cases) with `defines`,
    run exact; its ELF."""
    elf = build_m4(build, name, m4_test_program(lib, convs, linears=False), defines)
    assert_m4_exact(elf, name)
    return elf


def m4_instructions(build: Path, elf: Path) -> int:
    """The instructions a test firmware runs from main to its printf (the insn_count plugin)."""
    sym = symbol_addresses(elf)
    count = count_with_plugin(build, elf, sym["main"], sym["printf"])
    assert count is not None, "the insn_count plugin did not build or run"
    return count


BENCH_MAIN = """
#include <stdio.h>
#include <string.h>
#include "eb_kernels.h"
#include "eb_kernels_opt.h"

#define IN_C {in_c}
#define IN_HW {in_hw}
#define OUT_C {out_c}
#define OUT_HW {out_hw}
#define K {k}
#define N_OUT (OUT_C * OUT_HW * OUT_HW)

static const eb_conv_params layer = {{IN_C, IN_HW, IN_HW, OUT_C, OUT_HW, OUT_HW, K, K, 1, 1, {pad},
                                     {pad}, 1, 1, 1, -9, EB_ROUND_HALF_UP, EB_ACT_RELU, 0}};
static int8_t input[IN_C * IN_HW * IN_HW];
static int8_t weight[OUT_C * IN_C * K * K];
static int32_t bias[OUT_C];
static int8_t out_ref[N_OUT], out_opt[N_OUT];
/* the plan's claim: the columns, and the padded band of the im2col path (ops.im2col_band) */
static int16_t scratch[EB_CONV_BAND_SCRATCH(IN_C, K, K, IN_HW, {pad})] __attribute__((aligned(4)));
"""

# What both bench firmwares run after their layer and arrays (plain text, not a format string):
# fill input, weights and bias deterministically, run the reference and the optimized
# kernel between markers, compare.
BENCH_RUN = """
/* Markers for the instruction counter: distinct bodies (no identical-code folding). */
volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_ref_begin(void) { eb_bench_marker = 1; }
__attribute__((noinline)) void eb_bench_ref_end(void) { eb_bench_marker = 2; }
__attribute__((noinline)) void eb_bench_opt_begin(void) { eb_bench_marker = 3; }
__attribute__((noinline)) void eb_bench_opt_end(void) { eb_bench_marker = 4; }

int main(void)
{
    uint32_t s = 12345u;
    int i;
    for (i = 0; i < (int)sizeof input; ++i) { s = s * 1103515245u + 12345u; input[i] = (int8_t)(s >> 16); }
    for (i = 0; i < (int)sizeof weight; ++i) { s = s * 1103515245u + 12345u; weight[i] = (int8_t)(s >> 16); }
    for (i = 0; i < (int)(sizeof bias / sizeof bias[0]); ++i) { s = s * 1103515245u + 12345u; bias[i] = (int32_t)(s >> 16) - 32768; }
    eb_bench_ref_begin();
    eb_conv2d(&layer, input, weight, bias, out_ref);
    eb_bench_ref_end();
    eb_bench_opt_begin();
    eb_conv2d_opt(&layer, input, weight, bias, out_opt, scratch);
    eb_bench_opt_end();
    i = memcmp(out_ref, out_opt, sizeof out_ref) != 0;
    printf("bench layer: optimized %s reference\\n", i ? "DIFFERS FROM" : "equals");
    return i;
}
"""


def symbol_addresses(elf: Path) -> dict[str, int]:
    out = subprocess.run([ARM_NM, str(elf)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3:
            table[fields[2]] = int(fields[0], 16) & ~1  # clear the Thumb bit
    return table


def count_with_plugin(build: Path, elf: Path, start: int, stop: int) -> int | None:
    """Instructions from start to stop via the TCG plugin; None if the plugin is unusable."""
    if not PLUGIN_SRC.is_file():
        return None
    plugin = build / "insn_count.so"
    if not plugin.exists():
        made = subprocess.run([GCC, "-shared", "-fPIC", "-O2", "-o", str(plugin),
                               str(PLUGIN_SRC)], capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            return None
    out = build / f"count_{start:x}_{stop:x}.txt"
    result = run_qemu(elf, ["-plugin", f"{plugin},start={start:#x},stop={stop:#x},out={out}"])
    if result.returncode != 0 or not out.is_file():
        return None
    return int(out.read_text().split()[0])


def count_with_exec_log(elf: Path, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Fallback: QEMU logs one "Trace" line per executed instruction with -singlestep -d
    exec,nochain; the log is streamed through a pipe (it is ~0.5 GB) and counted per kind."""
    cmd = ["timeout", "120", QEMU, *QEMU_CMD, "-singlestep", "-d", "exec,nochain", "-D",
           "/dev/stdout", "-kernel", str(elf)]
    trace = re.compile(r"Trace [^\[]*\[[0-9a-f]+/([0-9a-f]+)/")
    starts = {start: kind for kind, (start, _) in marks.items()}
    counts: dict[str, int] = {}
    active: str | None = None
    n = 0
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                          bufsize=1 << 20) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = trace.match(line)
            if m is None:
                continue
            pc = int(m.group(1), 16)
            if active is None:
                if pc in starts and starts[pc] not in counts:
                    active, n = starts[pc], 0
            elif pc == marks[active][1]:
                counts[active], active = n, None
            n += 1
    assert proc.returncode == 0, f"qemu exit {proc.returncode}"
    return counts


@needs_m4
def test_m4_insn_per_mac(m4_build):
    b = BENCH
    out_hw = conv_out(b["in_hw"], b["k"], 1, b["pad"], 1)
    elf = build_m4(m4_build, "bench", BENCH_MAIN.format(**b, out_hw=out_hw) + BENCH_RUN)
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    sym = symbol_addresses(elf)
    marks = {kind: (sym[f"eb_bench_{kind}_begin"], sym[f"eb_bench_{kind}_end"])
             for kind in ("ref", "opt")}
    counts = {kind: count_with_plugin(m4_build, elf, *marks[kind]) for kind in marks}
    how = "TCG plugin templates/tools/insn_count.c"
    if None in counts.values():
        how = "-d exec,nochain log: the insn_count plugin did not build or run"
        counts = count_with_exec_log(elf, marks)
    macs = b["out_c"] * out_hw * out_hw * b["in_c"] * b["k"] * b["k"]  # incl. padding taps
    ref, opt = counts["ref"] / macs, counts["opt"] / macs
    print(f"\nconv in {b['in_c']}x{b['in_hw']}x{b['in_hw']} -> out {b['out_c']}x{out_hw}x{out_hw},"
          f" {b['k']}x{b['k']} pad {b['pad']} stride 1, {macs} MACs ({how}):\n"
          f"  eb_conv2d     {counts['ref']:9d} instructions = {ref:.3f}/MAC\n"
          f"  eb_conv2d_opt {counts['opt']:9d} instructions = {opt:.3f}/MAC ({ref / opt:.1f}x)")
    assert opt <= TARGET_INSN_PER_MAC, f"{opt:.3f} instructions per MAC"
    assert ref / opt >= TARGET_SPEEDUP


# Depthwise cases run on the M4: (index into DW_SHAPES, index into DW_QUANT); each narrow
# and wide. They cover every kernel of the depthwise path and both fast requantizations.
M4_DW_CASES = ((0, 1), (0, 0), (1, 1), (2, 3), (3, 2), (5, 1), (7, 0), (8, 1), (9, 4),
               (10, 0), (12, 1), (13, 1), (14, 0), (15, 5), (19, 1), (21, 0), (26, 1), (29, 3),
               (31, 1), (35, 2), (38, 1), (41, 0), (42, 1), (44, 1), (46, 1), (48, 0), (49, 5),
               (50, 0), (52, 3), (53, 1), (54, 1), (55, 0), (56, 1), (57, 2), (58, 3),
               (59, 1), (60, 0), (61, 5), (62, 1), (23, 1), (63, 0), (63, 1), (64, 1))


@needs_m4
def test_m4_depthwise_equals_reference_under_qemu(lib, m4_build):
    convs = []
    for n, (index, quant) in enumerate(M4_DW_CASES):
        rng = np.random.default_rng([SEED, 57, n])
        rounding, act, shift = DW_QUANT[quant]
        cfg = {**DW_SHAPES[index], "rounding": rounding, "act": act, "shift": shift}
        x, w = dw_data(cfg, rng)
        convs.append((cfg, x, w, random_bias(rng, cfg["out_c"]) if n % 4 else None))
    elf = build_m4(m4_build, "dw_kat", m4_test_program(lib, convs, linears=False))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


# Depthwise layers measured under QEMU, each with the factor by which the depthwise path must
# beat the generic grouped path (the same kernel built with -DEB_OPT_NO_DEPTHWISE): a DS-CNN
# block's 3x3 on keyword-spotting maps and 1-D k = 3 layers in both layouts (the 3-tap
# kernels), then shapes of the table kernel. The factors leave room below what was measured
# (below); instruction counts under QEMU are exact and repeatable.
DW_BENCH = {
    "DS-CNN 3x3, 64 x 25x5": (dw_config(64, 25, 5, 3, pad=1, shift=-9, act=1), 6.0),
    "DS-CNN 3x3, 64 x 49x10": (dw_config(64, 49, 10, 3, pad=1, shift=-9, act=1), 6.0),
    "1-D k3, 64 x [1][49]": (dw_1d(64, 49, 3, pad=1, shift=-9, act=1), 6.0),
    "1-D k3, 64 x [49][1]": (dw_1d(64, 49, 3, pad=1, shift=-9, act=1, vertical=True), 6.0),
    "3x3 stride 2, 64 x 25x10": (dw_config(64, 25, 10, 3, stride=2, pad=1, shift=-9), 2.0),
    "5x5, 64 x 12x25": (dw_config(64, 12, 25, 5, pad=2, shift=-9, act=1), 1.5),
    "1-D k5, 64 x [1][49]": (dw_1d(64, 49, 5, pad=2, shift=-9, act=1), 2.0),
}
# Measured when written (insn/MAC, arm-none-eabi-gcc 12.2 -O2; reference / grouped im2col ->
# depthwise): DS-CNN 3x3 64 x 25x5 34.5 / 35.2 -> 2.91; 64 x 49x10 34.8 / 25.2 -> 2.16;
# 1-D k3 64 x [1][49] 63.5 / 50.5 -> 4.50, [49][1] 80.7 / 114.4 -> 4.50; 3x3 stride 2
# 64 x 25x10 35.0 / 44.7 -> 14.8; 5x5 64 x 12x25 22.4 / 12.2 -> 5.2; 1-D k5 64 x [1][49]
# 43.5 / 33.6 -> 11.6.

DW_BENCH_MAIN = """
#include <stdio.h>
#include <string.h>
#include "eb_kernels.h"
#include "eb_kernels_opt.h"

#define N_IN ({in_c} * {in_h} * {in_w})
#define N_W ({out_c} * {k_h} * {k_w})
#define N_OUT ({out_c} * {out_h} * {out_w})

static const eb_conv_params layer = {{{fields}}};
static int8_t input[N_IN];
static int8_t weight[N_W];
static int32_t bias[{out_c}];
static int8_t out_ref[N_OUT], out_opt[N_OUT];
static int16_t scratch[EB_CONV_OPT_SCRATCH(1, {k_h}, {k_w}) +
                      (EB_DW_OPT_SCRATCH({in_w}, {pad_w}, {out_h}) + 1) / 2 + EB_DW_TILE_SCRATCH]
    __attribute__((aligned(4)));
"""


def count_bench(build: Path, name: str, source: str, defines: tuple[str, ...] = ()):
    """(instructions of eb_conv2d, of eb_conv2d_opt, how counted) for a bench firmware."""
    elf = build_m4(build, name, source, defines)
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    sym = symbol_addresses(elf)
    marks = {kind: (sym[f"eb_bench_{kind}_begin"], sym[f"eb_bench_{kind}_end"])
             for kind in ("ref", "opt")}
    counts = {kind: count_with_plugin(build, elf, *marks[kind]) for kind in marks}
    how = "TCG plugin templates/tools/insn_count.c"
    if None in counts.values():
        how = "-d exec,nochain log: the insn_count plugin did not build or run"
        counts = count_with_exec_log(elf, marks)
    return counts["ref"], counts["opt"], how


@needs_m4
def test_m4_depthwise_insn_per_mac(m4_build):
    lines, speedups = [], {}
    for n, (label, (cfg, _)) in enumerate(DW_BENCH.items()):
        fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act"))
        fields += ", 0"  # wbits: int8 weights
        source = DW_BENCH_MAIN.format(**cfg, fields=fields) + BENCH_RUN
        ref, dw, how = count_bench(m4_build, f"dw_bench{n}", source)
        _, grouped, _ = count_bench(m4_build, f"dw_bench{n}_grouped", source,
                                    ("-DEB_OPT_NO_DEPTHWISE",))
        macs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"] * cfg["k_h"] * cfg["k_w"]
        speedups[label] = grouped / dw
        lines.append(f"  {label:26s} {macs:7d} MACs: reference {ref / macs:5.2f}, grouped "
                     f"im2col {grouped / macs:6.2f}, depthwise {dw / macs:5.2f} insn/MAC "
                     f"({grouped / dw:.1f}x)")
    print(f"\ndepthwise layers under QEMU ({how}), MACs incl. padding taps:\n" + "\n".join(lines))
    for label, speedup in speedups.items():
        assert speedup >= DW_BENCH[label][1], f"{label}: only {speedup:.2f}x"
