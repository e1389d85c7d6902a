"""The C reference kernels (templates/kernels/eb_kernels.c) against the numpy integer
reference, bit for bit: random shapes for every kernel, plus hand-computed cases taken
from the numerics contract (eb_kernels.h, edgebuild/numerics.py) so the test is not only
"C equals Python". The kernels are compiled once with gcc into a shared library under
tmp and called through ctypes."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from kernel_abi import I8, I32, ConvParams, PoolParams, layout_probe

from edgebuild.core import numerics
from edgebuild.ops import add as add_op
from edgebuild.ops.conv import reference_conv
from edgebuild.ops.conv_transpose2d import reference_conv_transpose
from edgebuild.ops.operator import FusedPool
from edgebuild.ops.pool import reference_pool, windows

KERNELS = Path(__file__).resolve().parent.parent / "templates" / "kernels"
GCC = shutil.which("gcc")
CFLAGS = ["-std=c99", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
          "-DEB_STANDALONE"]  # the bare kernel library: plain names (eb_kernels.h)

pytestmark = pytest.mark.skipif(
    GCC is None, reason="gcc is not on PATH: the C kernel tests compile eb_kernels.c")

SEED = 20240607
CASES = 40  # random configurations per kernel kind
ROUNDING = {"half_up": 0, "floor": 1}
ACT = {"none": 0, "relu": 1, "abs": 2}
POOL_MODE = {"max": 0, "avg": 1}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
GUARD = 16  # sentinel elements after every output buffer: the kernel must not touch them
SENTINEL = 0x5A

P8, P32 = ctypes.POINTER(I8), ctypes.POINTER(I32)


STRUCTS = {"conv": ("eb_conv_params", ConvParams), "pool": ("eb_pool_params", PoolParams)}


def probe_source() -> str:
    """sizeof/offsetof of every mirrored field, and the header's static inline requantize."""
    lines = ["#include <stddef.h>", '#include "eb_kernels.h"', *layout_probe(STRUCTS, "eb")]
    lines.append("int eb_test_requantize(int32_t acc, int shift, int rounding, int act)\n"
                 "{ return eb_requantize(acc, shift, rounding, act); }")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_kernels")
    probe = build / "eb_probe.c"
    probe.write_text(probe_source())
    shared = build / "libeb_kernels.so"
    result = subprocess.run(
        [GCC, *CFLAGS, f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"), str(probe),
         "-o", str(shared)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    conv_args = [ctypes.POINTER(ConvParams), P8, P8, P32]
    so.eb_conv2d.argtypes = [*conv_args, P8]
    so.eb_conv2d_wide.argtypes = [*conv_args, P32]
    so.eb_conv_transpose2d.argtypes = [*conv_args, P8]
    so.eb_conv_transpose2d_wide.argtypes = [*conv_args, P32]
    so.eb_linear.argtypes = [ctypes.c_int, ctypes.c_int, P8, P8, P32, ctypes.c_int,
                             ctypes.c_int, ctypes.c_int, P8]
    so.eb_linear_wide.argtypes = [ctypes.c_int, ctypes.c_int, P8, P8, P32, P32]
    so.eb_pool2d.argtypes = [ctypes.POINTER(PoolParams), P8, P8]
    so.eb_add.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(P8), ctypes.c_int, P8]
    so.eb_copy.argtypes = [ctypes.c_int, P8, P8]
    for name in ("eb_conv2d", "eb_conv2d_wide", "eb_conv_transpose2d", "eb_conv_transpose2d_wide",
                 "eb_linear", "eb_linear_wide", "eb_pool2d",
                 "eb_add", "eb_copy"):
        getattr(so, name).restype = None
    so.eb_test_requantize.argtypes = [I32, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    so.eb_test_requantize.restype = ctypes.c_int
    return so


# ---- calling the kernels ---------------------------------------------------------------

def ptr(arr: np.ndarray | None, ctype):
    if arr is None:
        return None
    assert arr.flags.c_contiguous
    return arr.ctypes.data_as(ctypes.POINTER(ctype))


def as_c(arr, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(arr), dtype=dtype)


def out_buffer(count: int, dtype) -> np.ndarray:
    return np.full(count + GUARD, SENTINEL, dtype=dtype)


def checked(buf: np.ndarray, count: int) -> np.ndarray:
    assert (buf[count:] == SENTINEL).all(), "the kernel wrote past its output"
    return buf[:count].astype(np.int64)


def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def run_conv(lib, cfg: dict, x, w, bias, wide: bool) -> np.ndarray:
    """eb_conv2d(_wide) on cfg (eb_conv_params field names; rounding/act as strings)."""
    out_h = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    out_w = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    fields = {k: v for k, v in cfg.items() if k not in ("rounding", "act")}
    params = ConvParams(**fields, out_h=out_h, out_w=out_w, rounding=ROUNDING[cfg["rounding"]],
                        act=ACT[cfg["act"]])
    x, w = as_c(x, np.int8), as_c(w, np.int8)
    b = None if bias is None else as_c(bias, np.int32)
    count = cfg["out_c"] * out_h * out_w
    if wide:
        buf = out_buffer(count, np.int32)
        lib.eb_conv2d_wide(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(b, I32),
                           ptr(buf, I32))
    else:
        buf = out_buffer(count, np.int8)
        lib.eb_conv2d(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(b, I32), ptr(buf, I8))
    return checked(buf, count).reshape(cfg["out_c"], out_h, out_w)


def convt_out(size: int, k: int, stride: int, pad: int, output_pad: int, dil: int) -> int:
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1


def run_conv_transpose(lib, cfg: dict, x, w, bias, wide: bool) -> np.ndarray:
    """eb_conv_transpose2d(_wide) on cfg (eb_conv_params names + out_pad_h, out_pad_w)."""
    out_h = convt_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["out_pad_h"],
                      cfg["dil_h"])
    out_w = convt_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["out_pad_w"],
                      cfg["dil_w"])
    fields = {k: v for k, v in cfg.items() if k not in ("rounding", "act", "out_pad_h",
                                                         "out_pad_w")}
    params = ConvParams(**fields, out_h=out_h, out_w=out_w, rounding=ROUNDING[cfg["rounding"]],
                        act=ACT[cfg["act"]])
    x, w = as_c(x, np.int8), as_c(w, np.int8)
    b = None if bias is None else as_c(bias, np.int32)
    count = cfg["out_c"] * out_h * out_w
    if wide:
        buf = out_buffer(count, np.int32)
        lib.eb_conv_transpose2d_wide(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(b, I32),
                                     ptr(buf, I32))
    else:
        buf = out_buffer(count, np.int8)
        lib.eb_conv_transpose2d(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(b, I32),
                                ptr(buf, I8))
    return checked(buf, count).reshape(cfg["out_c"], out_h, out_w)


def run_linear(lib, x, w, bias, shift, rounding, act, wide: bool) -> np.ndarray:
    out_f, in_f = w.shape
    x, w = as_c(x, np.int8), as_c(w, np.int8)
    b = None if bias is None else as_c(bias, np.int32)
    if wide:
        buf = out_buffer(out_f, np.int32)
        lib.eb_linear_wide(in_f, out_f, ptr(x, I8), ptr(w, I8), ptr(b, I32), ptr(buf, I32))
    else:
        buf = out_buffer(out_f, np.int8)
        lib.eb_linear(in_f, out_f, ptr(x, I8), ptr(w, I8), ptr(b, I32), shift,
                      ROUNDING[rounding], ACT[act], ptr(buf, I8))
    return checked(buf, out_f)


def run_pool(lib, x, size, stride, mode: str, rounding: str) -> np.ndarray:
    c, in_h, in_w = x.shape
    out_h, out_w = ((n - k) // s + 1 for n, k, s in zip((in_h, in_w), size, stride, strict=True))
    params = PoolParams(c=c, in_h=in_h, in_w=in_w, out_h=out_h, out_w=out_w, k_h=size[0],
                        k_w=size[1], stride_h=stride[0], stride_w=stride[1],
                        mode=POOL_MODE[mode], rounding=ROUNDING[rounding])
    x = as_c(x, np.int8)
    buf = out_buffer(c * out_h * out_w, np.int8)
    lib.eb_pool2d(ctypes.byref(params), ptr(x, I8), ptr(buf, I8))
    return checked(buf, c * out_h * out_w).reshape(c, out_h, out_w)


def run_add(lib, inputs, act: str) -> np.ndarray:
    arrays = [as_c(a, np.int8) for a in inputs]
    n = arrays[0].size
    table = (P8 * len(arrays))(*(ptr(a, I8) for a in arrays))
    buf = out_buffer(n, np.int8)
    lib.eb_add(n, len(arrays), table, ACT[act], ptr(buf, I8))
    return checked(buf, n).reshape(arrays[0].shape)


def requantize_c(lib, acc: int, shift: int, rounding: str, act: str) -> int:
    return lib.eb_test_requantize(acc, shift, ROUNDING[rounding], ACT[act])


def requantize_np(acc: int, shift: int, rounding: str, act: str) -> int:
    return int(numerics.np_requantize(np.array([acc], dtype=np.int64), shift, rounding, act)[0])


# ---- the numpy side --------------------------------------------------------------------

def expected_conv(cfg: dict, x, w, bias, one_d: bool = False):
    """(acc, int8 out) from edgebuild.ops.conv.reference_conv (conv1d uses its 1-D path)."""
    if one_d:
        acc = reference_conv(x[None, :, 0, :], w[:, :, 0, :], cfg["groups"], (cfg["k_w"],),
                             (cfg["stride_w"],), (cfg["pad_w"],), (cfg["dil_w"],))[0][:, None, :]
    else:
        acc = reference_conv(x[None], w, cfg["groups"], (cfg["k_h"], cfg["k_w"]),
                             (cfg["stride_h"], cfg["stride_w"]), (cfg["pad_h"], cfg["pad_w"]),
                             (cfg["dil_h"], cfg["dil_w"]))[0]
    if bias is not None:
        acc = acc + bias.astype(np.int64)[:, None, None]
    return acc, numerics.np_requantize(acc, cfg["shift"], cfg["rounding"], cfg["act"])


def expected_conv_transpose(cfg: dict, x, w, bias):
    """(acc, int8 out) from edgebuild.ops.conv_transpose2d.reference_conv_transpose."""
    acc = reference_conv_transpose(x[None], w, cfg["groups"], (cfg["stride_h"], cfg["stride_w"]),
                                   (cfg["pad_h"], cfg["pad_w"]),
                                   (cfg["out_pad_h"], cfg["out_pad_w"]),
                                   (cfg["dil_h"], cfg["dil_w"]))[0]
    if bias is not None:
        acc = acc + bias.astype(np.int64)[:, None, None]
    return acc, numerics.np_requantize(acc, cfg["shift"], cfg["rounding"], cfg["act"])


def expected_pool(x, size, stride, mode: str, rounding: str):
    """edgebuild.ops.pool.reference_pool, cross-checked against an explicit window sum."""
    pool = FusedPool(mode=mode, size=tuple(size), stride=tuple(stride))
    ref = reference_pool(x[None].astype(np.int64), pool, 2, rounding)[0]
    view = windows(x[None].astype(np.int64), tuple(size), tuple(stride))[0]
    direct = view.max(axis=(-2, -1)) if mode == "max" else \
        numerics.np_divide_round(view.sum(axis=(-2, -1)), size[0] * size[1], rounding)
    np.testing.assert_array_equal(ref, direct)
    return ref


def expected_add(inputs, act: str):
    layer = add_op.Add(op="add", name="s", inputs=tuple(f"t{i}" for i in range(len(inputs))),
                       act=act)
    ref = add_op.reference(layer, None, [a.astype(np.int64) for a in inputs], "half_up")
    total = np.sum([a.astype(np.int64) for a in inputs], axis=0)
    np.testing.assert_array_equal(ref, numerics.np_saturate(numerics.np_activate(total, act)))
    return ref


# ---- random data -----------------------------------------------------------------------

def rng_for(kind: str, index: int) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, kind)), index])


def int8_data(rng, shape) -> np.ndarray:
    """int8 values from one of several distributions; -128 and 127 always occur (size >= 2)."""
    flavour = rng.integers(4)
    if flavour == 0:
        x = rng.integers(-128, 128, size=shape)
    elif flavour == 1:  # mostly negative: negative sums, floor vs truncation
        x = rng.integers(-128, 16, size=shape)
    elif flavour == 2:  # small: rounding ties
        x = rng.integers(-3, 4, size=shape)
    else:  # the extremes only: saturation
        x = rng.choice([-128, 127], size=shape)
    flat = x.reshape(-1)
    flat[rng.integers(flat.size)] = -128
    flat[rng.integers(flat.size)] = 127
    return x.astype(np.int8)


def int_weights(rng, shape) -> tuple[np.ndarray, int]:
    bits = int(rng.choice(numerics.WEIGHT_BITS))
    low, high = numerics.weight_limits(bits)
    w = rng.integers(low, high + 1, size=shape)
    w.reshape(-1)[0] = low
    return w.astype(np.int8), bits


def random_bias(rng, count: int) -> np.ndarray | None:
    """None, or int32 biases small enough that acc * 2^3 stays inside int32 (|acc| < 2^28)."""
    if rng.random() < 0.3:
        return None
    magnitude = 1 << int(rng.choice([4, 10, 16, 24]))
    return rng.integers(-magnitude, magnitude, size=count).astype(np.int32)


def conv_config(rng, one_d: bool) -> dict:
    while True:
        in_c = int(rng.integers(1, 10))
        layout = rng.choice(["dense", "depthwise", "grouped"])
        if layout == "dense":
            groups, out_c = 1, int(rng.integers(1, 9))
        elif layout == "depthwise":
            groups = out_c = in_c
        else:
            groups = int(rng.choice([d for d in range(1, in_c + 1) if in_c % d == 0]))
            out_c = groups * int(rng.integers(1, 4))
        cfg = {
            "in_c": in_c, "in_h": 1 if one_d else int(rng.integers(1, 12)),
            "in_w": int(rng.integers(1, 12)), "out_c": out_c,
            "k_h": 1 if one_d else int(rng.integers(1, 6)), "k_w": int(rng.integers(1, 6)),
            "stride_h": int(rng.integers(1, 4)), "stride_w": int(rng.integers(1, 4)),
            "pad_h": 0 if one_d else int(rng.integers(0, 3)), "pad_w": int(rng.integers(0, 3)),
            "dil_h": 1 if one_d else int(rng.integers(1, 3)), "dil_w": int(rng.integers(1, 3)),
            "groups": groups, "shift": int(rng.integers(-14, 4)),
            "rounding": str(rng.choice(list(ROUNDING))), "act": str(rng.choice(list(ACT)))}
        if one_d:
            cfg["stride_h"] = 1
        if conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"]) >= 1 \
                and conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"],
                             cfg["dil_w"]) >= 1:
            return cfg


def check_conv_case(lib, kind: str, index: int, one_d: bool) -> None:
    rng = rng_for(kind, index)
    cfg = conv_config(rng, one_d)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, bits = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                cfg["k_w"]))
    bias = random_bias(rng, cfg["out_c"])
    acc, out = expected_conv(cfg, x, w, bias, one_d)
    assert np.abs(acc).max() < (1 << 27)  # the generator keeps acc * 2^3 in int32
    context = f"{cfg} weight_bits={bits} bias={'yes' if bias is not None else 'NULL'}"
    np.testing.assert_array_equal(run_conv(lib, cfg, x, w, bias, wide=False), out,
                                  err_msg=context)
    np.testing.assert_array_equal(run_conv(lib, cfg, x, w, bias, wide=True), acc,
                                  err_msg=context)


def conv_transpose_config(rng) -> dict:
    while True:
        cfg = conv_config(rng, one_d=False)
        cfg.update(out_pad_h=int(rng.integers(0, 3)), out_pad_w=int(rng.integers(0, 3)),
                   pad_h=int(rng.integers(0, 3)), pad_w=int(rng.integers(0, 3)))
        if rng.random() < 0.4:  # the MAX7800x upsampler: 3x3, stride 2, pad 1, output_pad 1
            cfg.update(k_h=3, k_w=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1, out_pad_h=1,
                       out_pad_w=1, dil_h=1, dil_w=1)
        axes = [(cfg[f"in_{a}"], cfg[f"k_{a}"], cfg[f"stride_{a}"], cfg[f"pad_{a}"],
                 cfg[f"out_pad_{a}"], cfg[f"dil_{a}"]) for a in "hw"]
        if all(op < max(s, d) and convt_out(n, k, s, p, op, d) >= 1
               for n, k, s, p, op, d in axes):
            return cfg


def check_conv_transpose_case(lib, index: int) -> None:
    rng = rng_for("conv_transpose2d", index)
    cfg = conv_transpose_config(rng)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, bits = int_weights(rng, (cfg["in_c"], cfg["out_c"] // cfg["groups"], cfg["k_h"],
                                cfg["k_w"]))
    bias = random_bias(rng, cfg["out_c"])
    acc, out = expected_conv_transpose(cfg, x, w, bias)
    assert np.abs(acc).max() < (1 << 27)
    context = f"{cfg} weight_bits={bits} bias={'yes' if bias is not None else 'NULL'}"
    np.testing.assert_array_equal(run_conv_transpose(lib, cfg, x, w, bias, wide=False), out,
                                  err_msg=context)
    np.testing.assert_array_equal(run_conv_transpose(lib, cfg, x, w, bias, wide=True), acc,
                                  err_msg=context)


# ---- the struct layout -----------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(STRUCTS))
def test_struct_layout_matches_header(lib, key):
    _, struct = STRUCTS[key]
    assert ctypes.sizeof(struct) == getattr(lib, f"eb_sizeof_{key}")()
    for field, _ in struct._fields_:
        assert getattr(struct, field).offset == getattr(lib, f"eb_offsetof_{key}_{field}")(), field


# ---- requantize (the header's static inline eb_requantize) -----------------------------

REQUANTIZE_BY_HAND = [
    # acc, shift, rounding, act, out    (out = saturate(act(round(acc * 2^shift))))
    (-3, -1, "half_up", "none", -1),    # -1.5 -> floor(-1.0)
    (-3, -1, "floor", "none", -2),      # floor(-1.5)
    (3, -1, "half_up", "none", 2),      # 1.5 -> 2
    (3, -1, "floor", "none", 1),
    (-3, -1, "half_up", "abs", 1),      # rounds before abs: -1 -> 1 (abs first would give 2)
    (-3, -1, "floor", "abs", 2),
    (-1, -1, "half_up", "none", 0),     # -0.5 -> 0
    (-1, -1, "floor", "none", -1),
    (-1, -1, "floor", "relu", 0),
    (-5, -2, "half_up", "none", -1),    # -1.25
    (-5, -2, "floor", "none", -2),
    (-6, -2, "half_up", "none", -1),    # -1.5
    (-7, -2, "half_up", "none", -2),    # -1.75
    (-7, -2, "floor", "none", -2),
    (5, -2, "half_up", "relu", 1),      # 1.25
    (6, -2, "half_up", "relu", 2),      # 1.5
    (255, -1, "half_up", "none", 127),  # 127.5 -> 128, saturated last
    (255, -1, "floor", "none", 127),
    (-257, -1, "half_up", "none", -128),  # -128.5 -> -128
    (-257, -1, "floor", "none", -128),    # -129 saturates
    (-258, -1, "half_up", "none", -128),  # -129 saturates
    (-256, -1, "half_up", "abs", 127),    # abs(-128) = 128 saturates after the activation
    (-128, 0, "floor", "abs", 127),
    (-128, 0, "floor", "none", -128),
    (-300, 0, "half_up", "relu", 0),
    (-300, 0, "half_up", "none", -128),
    (300, 0, "floor", "none", 127),
    (15, 3, "half_up", "none", 120),    # left shifts are exact, rounding does not apply
    (-15, 3, "floor", "none", -120),
    (16, 3, "floor", "none", 127),
    (-16, 3, "half_up", "none", -128),
    (-16, 3, "half_up", "abs", 127),
    (12345, -14, "half_up", "none", 1),   # 0.753
    (-12345, -14, "half_up", "none", -1),  # -0.753 -> floor(-0.253)
    (-12345, -14, "floor", "none", -1),
    (-8192, -14, "half_up", "none", 0),   # -0.5 -> 0
    (-8193, -14, "half_up", "none", -1),
    (INT32_MAX, -1, "half_up", "none", 127),   # the rounding add must not overflow
    (INT32_MAX, -22, "half_up", "none", 127),  # 511.99... -> 512
    (INT32_MIN, -22, "half_up", "none", -128),  # -512
    (INT32_MIN, -22, "floor", "abs", 127),
    (INT32_MIN, -31, "half_up", "none", -1),
    (INT32_MIN, -31, "floor", "relu", 0),
    # Shifts up to numerics.SHIFT_RANGE[1] - 0 = 15 (1-bit weights) are legal: a left shift
    # of a large accumulator is exact, so it saturates rather than wrapping around.
    (1 << 28, 3, "half_up", "none", 127),
    (-(1 << 28), 3, "half_up", "none", -128),
    ((1 << 28) + 1, 3, "floor", "abs", 127),
    (1 << 17, 15, "floor", "none", 127),
    (3 << 16, 15, "floor", "none", 127),
    (-(1 << 17), 15, "half_up", "relu", 0),
    (-(1 << 17), 15, "half_up", "abs", 127),
    (INT32_MIN, 0, "floor", "abs", 127),  # abs of the most negative int32
    (INT32_MIN, 0, "floor", "none", -128),
    (INT32_MAX, 15, "floor", "none", 127),
    (INT32_MIN, 15, "half_up", "relu", 0),
]


@pytest.mark.parametrize(("acc", "shift", "rounding", "act", "out"), REQUANTIZE_BY_HAND)
def test_requantize_by_hand(lib, acc, shift, rounding, act, out):
    assert requantize_np(acc, shift, rounding, act) == out
    assert requantize_c(lib, acc, shift, rounding, act) == out


def test_requantize_random(lib):
    rng = np.random.default_rng([SEED, 1])
    accs = np.concatenate([rng.integers(-1 << 12, 1 << 12, 400),
                           rng.integers(INT32_MIN, INT32_MAX, 100, endpoint=True)])
    for shift in range(-22, 16):
        for rounding in ROUNDING:
            for act in ACT:
                expected = numerics.np_requantize(accs, shift, rounding, act)
                got = [requantize_c(lib, int(a), shift, rounding, act) for a in accs[::7]]
                np.testing.assert_array_equal(got, expected[::7],
                                              err_msg=f"shift={shift} {rounding} {act}")


# ---- conv2d / conv2d_wide --------------------------------------------------------------

X3 = np.array([[[1, 2, 3], [4, 5, 6], [7, 8, 9]]])
W_DIAG = np.array([[[[1, 0], [0, -1]]]])  # out[y][x] = x[y-1][x-1] - x[y][x] with pad 1


@pytest.mark.parametrize(("rounding", "expected"), [
    ("half_up", [[0, 0, -1, 1], [-1, -1, -1, 2], [-3, -1, -1, 4], [1, 4, 5, 5]]),
    ("floor", [[0, -1, -1, 0], [-2, -2, -2, 2], [-3, -2, -2, 3], [0, 4, 4, 5]]),
])
def test_conv2d_by_hand_padded(lib, rounding, expected):
    cfg = {"in_c": 1, "in_h": 3, "in_w": 3, "out_c": 1, "k_h": 2, "k_w": 2, "stride_h": 1,
           "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1, "dil_w": 1, "groups": 1,
           "shift": -1, "rounding": rounding, "act": "none"}
    bias = np.array([1])
    acc = [[0, -1, -2, 1], [-3, -3, -3, 4], [-6, -3, -3, 7], [1, 8, 9, 10]]  # with bias 1
    assert run_conv(lib, cfg, X3, W_DIAG, bias, wide=True).tolist() == [acc]
    assert run_conv(lib, cfg, X3, W_DIAG, bias, wide=False).tolist() == [expected]
    ref_acc, ref_out = expected_conv(cfg, X3, W_DIAG, bias)
    assert ref_acc.tolist() == [acc] and ref_out.tolist() == [expected]


def test_conv2d_by_hand_groups(lib):
    # 4 channels (1x1 images 1, 2, 3, 4), 2 groups: out0 sees channels 0-1, out1 channels 2-3
    cfg = {"in_c": 4, "in_h": 1, "in_w": 1, "out_c": 2, "k_h": 1, "k_w": 1, "stride_h": 1,
           "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 2,
           "shift": 0, "rounding": "floor", "act": "abs"}
    x = np.array([1, 2, 3, 4]).reshape(4, 1, 1)
    w = np.array([[1, 10], [5, -7]]).reshape(2, 2, 1, 1)
    assert run_conv(lib, cfg, x, w, None, wide=True).reshape(-1).tolist() == [21, -13]
    assert run_conv(lib, cfg, x, w, None, wide=False).reshape(-1).tolist() == [21, 13]
    assert expected_conv(cfg, x, w, None)[0].reshape(-1).tolist() == [21, -13]


def test_conv1d_by_hand_strided_dilated(lib):
    # out[t] = sum_k w0[k] x0[2t + 2k] + w1[k] x1[2t + 2k]; length (7 - 5) // 2 + 1 = 2
    cfg = {"in_c": 2, "in_h": 1, "in_w": 7, "out_c": 1, "k_h": 1, "k_w": 3, "stride_h": 1,
           "stride_w": 2, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 2, "groups": 1,
           "shift": 3, "rounding": "half_up", "act": "relu"}
    x = np.array([[1, 2, 3, 4, 5, 6, 7], [-1] * 7]).reshape(2, 1, 7)
    w = np.array([[1, 1, 1], [2, 0, -1]]).reshape(1, 2, 1, 3)
    bias = np.array([-20])
    # 1+3+5 - 2 + 1 - 20 = -12; 3+5+7 - 2 + 1 - 20 = -6; then * 8 and relu
    assert run_conv(lib, cfg, x, w, bias, wide=True).reshape(-1).tolist() == [-12, -6]
    assert run_conv(lib, cfg, x, w, bias, wide=False).reshape(-1).tolist() == [0, 0]
    cfg["act"] = "abs"
    assert run_conv(lib, cfg, x, w, bias, wide=False).reshape(-1).tolist() == [96, 48]
    acc, out = expected_conv(cfg, x, w, bias, one_d=True)
    assert acc.reshape(-1).tolist() == [-12, -6] and out.reshape(-1).tolist() == [96, 48]


@pytest.mark.parametrize("index", range(CASES))
def test_conv2d_random(lib, index):
    check_conv_case(lib, "conv2d", index, one_d=False)


@pytest.mark.parametrize("index", range(CASES))
def test_conv1d_as_conv2d_random(lib, index):
    check_conv_case(lib, "conv1d", index, one_d=True)


# ---- conv_transpose2d / conv_transpose2d_wide ------------------------------------------

# 3x3 "bilinear" kernel, stride 2, pad 1, output_pad 1: along one axis [a, b] becomes
# [2a, a + b, 2b, b] (full output a, 2a, a + b, 2b, b, 0 cropped by one on each side), so
# [[1, 2], [3, 4]] becomes the outer application of that rule on rows and columns.
CONVT_BY_HAND = [[4, 6, 8, 4], [8, 10, 12, 6], [12, 14, 16, 8], [6, 7, 8, 4]]


@pytest.mark.parametrize(("rounding", "expected"), [
    ("half_up", [[1, 2, 2, 1], [2, 3, 3, 2], [3, 4, 4, 2], [2, 2, 2, 1]]),
    ("floor", [[1, 1, 2, 1], [2, 2, 3, 1], [3, 3, 4, 2], [1, 1, 2, 1]]),
])
def test_conv_transpose2d_by_hand_upsampling(lib, rounding, expected):
    cfg = {"in_c": 1, "in_h": 2, "in_w": 2, "out_c": 1, "k_h": 3, "k_w": 3, "stride_h": 2,
           "stride_w": 2, "pad_h": 1, "pad_w": 1, "out_pad_h": 1, "out_pad_w": 1, "dil_h": 1,
           "dil_w": 1, "groups": 1, "shift": -2, "rounding": rounding, "act": "none"}
    x = np.array([[1, 2], [3, 4]]).reshape(1, 1, 2, 2)[0]
    w = np.outer([1, 2, 1], [1, 2, 1]).reshape(1, 1, 3, 3)
    assert run_conv_transpose(lib, cfg, x, w, None, wide=True).tolist() == [CONVT_BY_HAND]
    assert run_conv_transpose(lib, cfg, x, w, None, wide=False).tolist() == [expected]
    acc, out = expected_conv_transpose(cfg, x, w, None)
    assert acc.tolist() == [CONVT_BY_HAND] and out.tolist() == [expected]


def test_conv_transpose2d_by_hand_groups_use_the_in_out_layout(lib):
    # 2 groups, 1x1 kernel, stride 1: out[g*2 + j] = sum over the group's inputs c of
    # w[c][j] * x[c]; weights are [in][out / groups] (not [out][in / groups])
    cfg = {"in_c": 2, "in_h": 1, "in_w": 1, "out_c": 4, "k_h": 1, "k_w": 1, "stride_h": 1,
           "stride_w": 1, "pad_h": 0, "pad_w": 0, "out_pad_h": 0, "out_pad_w": 0, "dil_h": 1,
           "dil_w": 1, "groups": 2, "shift": 0, "rounding": "floor", "act": "none"}
    x = np.array([3, -5]).reshape(2, 1, 1)
    w = np.array([[1, 2], [10, -1]]).reshape(2, 2, 1, 1)
    bias = np.array([0, 1, 2, 3])
    assert run_conv_transpose(lib, cfg, x, w, bias, wide=True).reshape(-1).tolist() == \
        [3, 7, -48, 8]
    assert expected_conv_transpose(cfg, x, w, bias)[0].reshape(-1).tolist() == [3, 7, -48, 8]


@pytest.mark.parametrize("index", range(CASES))
def test_conv_transpose2d_random(lib, index):
    check_conv_transpose_case(lib, index)


# ---- linear / linear_wide --------------------------------------------------------------

@pytest.mark.parametrize(("rounding", "act", "expected"), [
    ("half_up", "none", [2, 127, -128, -1]),  # 1.5, 190.5, -192, -0.75
    ("floor", "none", [1, 127, -128, -1]),
    ("half_up", "abs", [2, 127, 127, 1]),
    ("floor", "relu", [1, 127, 0, 0]),
])
def test_linear_by_hand(lib, rounding, act, expected):
    x = np.array([1, 2, 3])
    w = np.array([[1, -1, 2], [127, 127, 127], [-128, -128, -128], [0, -1, 0]])
    bias = np.array([1, 0, 0, -1])
    acc = [6, 762, -768, -3]
    assert run_linear(lib, x, w, bias, 0, rounding, act, wide=True).tolist() == acc
    assert run_linear(lib, x, w, bias, -2, rounding, act, wide=False).tolist() == expected
    ref = numerics.np_requantize(np.array(acc), -2, rounding, act)
    assert ref.tolist() == expected
    assert run_linear(lib, x, w, None, 0, rounding, act, wide=True).tolist() == [5, 762, -768, -2]


@pytest.mark.parametrize("index", range(CASES))
def test_linear_random(lib, index):
    rng = rng_for("linear", index)
    in_f, out_f = int(rng.integers(1, 301)), int(rng.integers(1, 41))
    x = int8_data(rng, (in_f,))
    w, bits = int_weights(rng, (out_f, in_f))
    bias = random_bias(rng, out_f)
    shift = int(rng.integers(-14, 4))
    rounding, act = str(rng.choice(list(ROUNDING))), str(rng.choice(list(ACT)))
    acc = w.astype(np.int64) @ x.astype(np.int64)  # == x @ W.T
    if bias is not None:
        acc = acc + bias
    out = numerics.np_requantize(acc, shift, rounding, act)
    context = f"in_f={in_f} out_f={out_f} bits={bits} shift={shift} {rounding} {act}"
    np.testing.assert_array_equal(run_linear(lib, x, w, bias, shift, rounding, act, False),
                                  out, err_msg=context)
    np.testing.assert_array_equal(run_linear(lib, x, w, bias, shift, rounding, act, True),
                                  acc, err_msg=context)


# ---- pool2d ----------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "rounding", "expected"), [
    ("max", "half_up", [-1, 6]),
    ("avg", "half_up", [-1, 2]),  # sums -5 / 4 = -1.25 and 7 / 4 = 1.75
    ("avg", "floor", [-2, 1]),    # C's truncating division would give -1 here
])
def test_pool2d_by_hand_square(lib, mode, rounding, expected):
    x = np.array([[[-1, -1, -1, -3], [-1, -2, 5, 6]]])
    assert run_pool(lib, x, (2, 2), (2, 2), mode, rounding).reshape(-1).tolist() == expected
    assert expected_pool(x, (2, 2), (2, 2), mode, rounding).reshape(-1).tolist() == expected


@pytest.mark.parametrize(("mode", "rounding", "expected"), [
    ("max", "floor", [-1, -128, 127, 1]),
    ("avg", "half_up", [-1, -128, 127, 1]),  # -1.5 -> -1; 126.5 -> 127; 0.5 -> 1
    ("avg", "floor", [-2, -128, 126, 0]),
])
def test_pool2d_by_hand_ties(lib, mode, rounding, expected):
    x = np.array([[[-1, -2, -128, -128, 127, 126, 0, 1]]])
    assert run_pool(lib, x, (1, 2), (1, 2), mode, rounding).reshape(-1).tolist() == expected
    assert expected_pool(x, (1, 2), (1, 2), mode, rounding).reshape(-1).tolist() == expected


@pytest.mark.parametrize("index", range(CASES))
def test_pool2d_random(lib, index):
    rng = rng_for("pool2d", index)
    while True:
        c, in_h, in_w = int(rng.integers(1, 7)), int(rng.integers(1, 12)), int(rng.integers(1, 12))
        size = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        if size[0] <= in_h and size[1] <= in_w:
            break
    x = int8_data(rng, (c, in_h, in_w))
    for mode in POOL_MODE:
        for rounding in ROUNDING:
            np.testing.assert_array_equal(
                run_pool(lib, x, size, stride, mode, rounding),
                expected_pool(x, size, stride, mode, rounding),
                err_msg=f"c={c} in={in_h}x{in_w} size={size} stride={stride} {mode} {rounding}")


# ---- add -------------------------------------------------------------------------------

@pytest.mark.parametrize(("act", "expected"), [
    ("none", [127, -128, -3, 0, -128]),
    ("relu", [127, 0, 0, 0, 0]),
    ("abs", [127, 127, 3, 0, 127]),
])
def test_add_by_hand(lib, act, expected):
    a = np.array([100, -100, -1, 5, -128])
    b = np.array([100, -100, -2, -5, 0])
    assert run_add(lib, [a, b], act).tolist() == expected
    assert expected_add([a, b], act).tolist() == expected
    c = np.array([-128, 127, 3, 0, -1])  # three inputs: 72, -73, 0, 0, -129
    three = {"none": [72, -73, 0, 0, -128], "relu": [72, 0, 0, 0, 0],
             "abs": [72, 73, 0, 0, 127]}[act]
    assert run_add(lib, [a, b, c], act).tolist() == three


@pytest.mark.parametrize("index", range(CASES))
def test_add_random(lib, index):
    rng = rng_for("add", index)
    count, n = int(rng.integers(2, 5)), int(rng.integers(2, 200))
    inputs = [int8_data(rng, (n,)) for _ in range(count)]
    if index % 4 == 0:  # saturation both ways
        inputs[0][: n // 2], inputs[1][: n // 2] = 127, 127
        inputs[0][n // 2:], inputs[1][n // 2:] = -128, -128
    for act in ACT:
        np.testing.assert_array_equal(run_add(lib, inputs, act), expected_add(inputs, act),
                                      err_msg=f"count={count} n={n} {act}")


# ---- copy ------------------------------------------------------------------------------

def test_copy_by_hand_overlapping(lib):
    buf = np.array([1, 2, 3, 4, 5], dtype=np.int8)
    lib.eb_copy(3, ptr(buf, I8), ptr(buf[2:], I8))  # forward overlap: a naive loop gives 1,2,1
    assert buf.tolist() == [1, 2, 1, 2, 3]
    buf = np.array([1, 2, 3, 4, 5], dtype=np.int8)
    lib.eb_copy(3, ptr(buf[2:], I8), ptr(buf, I8))
    assert buf.tolist() == [3, 4, 5, 4, 5]


@pytest.mark.parametrize("index", range(CASES))
def test_copy_random(lib, index):
    rng = rng_for("copy", index)
    size = int(rng.integers(1, 300))
    n = int(rng.integers(0, size + 1))
    src_at, dst_at = (int(v) for v in rng.integers(0, size - n + 1, 2))
    buf = int8_data(rng, (size,)) if size > 1 else np.array([7], dtype=np.int8)
    if index % 2 == 0:  # within one buffer: overlapping whenever |src - dst| < n
        expected = buf.copy()
        expected[dst_at:dst_at + n] = buf[src_at:src_at + n].copy()
        lib.eb_copy(n, ptr(buf[src_at:], I8), ptr(buf[dst_at:], I8))
        np.testing.assert_array_equal(buf, expected, err_msg=f"n={n} {src_at}->{dst_at}")
    else:  # separate buffers
        dst = np.full(size, SENTINEL, dtype=np.int8)
        expected = dst.copy()
        expected[dst_at:dst_at + n] = buf[src_at:src_at + n]
        before = buf.copy()
        lib.eb_copy(n, ptr(buf[src_at:], I8), ptr(dst[dst_at:], I8))
        np.testing.assert_array_equal(dst, expected, err_msg=f"n={n} {src_at}->{dst_at}")
        np.testing.assert_array_equal(buf, before)
