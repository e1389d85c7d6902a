"""The C kernels of TFLite's int8 number format (templates/kernels/eb_tfl.c, the portable
ones, and eb_tfl_opt.c, the Cortex-M4 ones) against the numpy reference
(edgebuild/formats/tflite/reference.py, arith.py), bit for bit:

* host: both files in one shared library through ctypes, the optimized file built with
  -DEB_TFL_OPT_PORTABLE (the same algorithm with portable stand-ins for the DSP
  instructions): the struct mirrors against the C layout, the fixed-point primitives on
  edge values, then hypothesis-drawn layers of every op (convolutions of every geometry:
  strides 1-3, dilations 1-2, asymmetric padding, kernels 1..11 per axis, groups,
  depthwise multipliers 1-4 and larger, 1..64 input channels, any zero points, multipliers
  and shifts from large right shifts to left shifts, biases up to the int32 limits), with
  guards after the outputs and the scratch, weights and inputs at odd addresses;
* the scratch sizes of tflite/kernels.py against eb_tfl_conv_scratch / eb_tfl_linear_scratch;
* Cortex-M4 under QEMU: a firmware embedding random layers that reach every assembly path
  (pointwise, bands of 1, 2 and 4 output rows, stride 2, int8 weights, depthwise 3x3
  stride 1 and 2 with row tails, clamped and full activation ranges, channels that take the
  exact fallback) with the reference's outputs, running both kernels (built at -O2 and at
  -Os); and the instructions per MAC of the optimized kernels on two layers, bounded
  (benchmarks/tfl_kernels.py measures more).
"""

from __future__ import annotations

import ctypes
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_abi import I8, I16, I32, layout_probe
from test_kernels_opt import (
    ARM_GCC,
    CFLAGS,
    GCC,
    KERNELS,
    c_array,
    count_with_plugin,
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    run_qemu,
    symbol_addresses,
)

from edgebuild.formats.tflite import arith, kernels, reference
from edgebuild.formats.tflite.quant import TflQuant

P8, P16, P32 = (ctypes.POINTER(t) for t in (I8, I16, I32))
GUARD = 16
SENTINEL = 0x5A
M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
M4_LINK = ["-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs"]
SOURCES = ("eb_tfl.c", "eb_tfl_opt.c")


class ConvParams(ctypes.Structure):
    """Mirror of eb_tfl_conv_params."""

    _fields_ = [(name, I16) for name in (
        "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w",
        "pad_top", "pad_left", "dil_h", "dil_w", "groups", "in_zp", "out_zp", "act_min",
        "act_max")]


class FcParams(ctypes.Structure):
    """Mirror of eb_tfl_fc_params."""

    _fields_ = [(name, I16) for name in ("in_f", "out_f", "in_zp", "out_zp", "act_min",
                                         "act_max")]


class PoolParams(ctypes.Structure):
    """Mirror of eb_tfl_pool_params."""

    _fields_ = [*((name, I16) for name in ("c", "in_h", "in_w", "out_h", "out_w", "k_h", "k_w",
                                           "stride_h", "stride_w")),
                ("mode", I8), ("act_min", I16), ("act_max", I16), ("pad_top", I16),
                ("pad_left", I16)]


class AddParams(ctypes.Structure):
    """Mirror of eb_tfl_add_params."""

    _fields_ = [("n", I32), *((name, I16) for name in (
        "in1_zp", "in2_zp", "out_zp", "act_min", "act_max", "left_shift")),
        *((name, I32) for name in ("mult1", "shift1", "mult2", "shift2", "mult_out",
                                   "shift_out"))]


class SoftmaxParams(ctypes.Structure):
    """Mirror of eb_tfl_softmax_params."""

    _fields_ = [("channels", I16), ("positions", I32), ("multiplier", I32),
                ("left_shift", I32), ("diff_min", I32)]


STRUCTS = {"conv": ("eb_tfl_conv_params", ConvParams), "fc": ("eb_tfl_fc_params", FcParams),
           "pool": ("eb_tfl_pool_params", PoolParams), "add": ("eb_tfl_add_params", AddParams),
           "softmax": ("eb_tfl_softmax_params", SoftmaxParams)}

# The primitives (static inline in eb_tfl.h) behind callable wrappers.
PROBE = "\n".join([
    "#include <stddef.h>", '#include "eb_tfl.h"',
    "int32_t t_srdhm(int32_t a, int32_t b) { return eb_tfl_srdhm(a, b); }",
    "int32_t t_rdbpot(int32_t x, int e) { return eb_tfl_rdbpot(x, e); }",
    "int32_t t_mbqm(int32_t x, int32_t m, int s) { return eb_tfl_mbqm(x, m, s); }",
    "int32_t t_mbqm_single(int32_t x, int32_t m, int s) { return eb_tfl_mbqm_single(x, m, s); }",
    *layout_probe(STRUCTS, "t"), ""])


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tool("gcc")
    build = tmp_path_factory.mktemp("eb_tfl")
    (build / "probe.c").write_text(PROBE)
    so = build / "libeb_tfl.so"
    result = subprocess.run(
        [GCC, *CFLAGS, "-DEB_TFL_OPT_PORTABLE", "-shared", "-fPIC", f"-I{KERNELS}",
         *(str(KERNELS / name) for name in SOURCES), str(build / "probe.c"), "-o", str(so)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    handle = ctypes.CDLL(str(so))
    conv = [ctypes.POINTER(ConvParams), P8, P8, P32, P32, P32, P8, P16]
    fc = [ctypes.POINTER(FcParams), P8, P8, P32, P32, P32, P8, P16]
    for name, args in {"eb_tfl_conv2d": conv, "eb_tfl_conv2d_opt": conv, "eb_tfl_linear": fc,
                       "eb_tfl_linear_opt": fc,
                       "eb_tfl_pool2d": [ctypes.POINTER(PoolParams), P8, P8],
                       "eb_tfl_pool2d_opt": [ctypes.POINTER(PoolParams), P8, P8],
                       "eb_tfl_add": [ctypes.POINTER(AddParams), P8, P8, P8],
                       "eb_tfl_add_opt": [ctypes.POINTER(AddParams), P8, P8, P8, P16],
                       "eb_tfl_softmax": [ctypes.POINTER(SoftmaxParams), P8, P8]}.items():
        getattr(handle, name).argtypes = args
        getattr(handle, name).restype = None
    handle.eb_tfl_conv_scratch.argtypes = [ctypes.POINTER(ConvParams)]
    handle.eb_tfl_linear_scratch.argtypes = [ctypes.POINTER(FcParams)]
    handle.eb_tfl_add_scratch.argtypes = [ctypes.POINTER(AddParams)]
    handle.eb_tfl_conv_scratch.restype = handle.eb_tfl_linear_scratch.restype = I32
    handle.eb_tfl_add_scratch.restype = I32
    for name in ("t_srdhm", "t_rdbpot", "t_mbqm", "t_mbqm_single"):
        getattr(handle, name).restype = I32
    return handle


# ---- random layers ----------------------------------------------------------------------------

def int8(rng, shape) -> np.ndarray:
    """int8 values, random or from the rails; -128 and 127 present."""
    x = rng.choice([-128, 127], size=shape) if rng.random() < 0.15 else \
        rng.integers(-128, 128, size=shape)
    flat = x.reshape(-1)
    flat[rng.integers(flat.size)] = -128
    flat[rng.integers(flat.size)] = 127
    return x.astype(np.int64)


def requant(rng, n: int, extreme: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel multipliers in [2^30, 2^31) (some 0) and shifts: the usual right shifts,
    or (extreme) anything from -31 to 30, left shifts included."""
    mult = rng.integers(1 << 30, 1 << 31, size=n)
    mult[rng.random(n) < 0.08] = 0
    mult[rng.random(n) < 0.05] = (1 << 31) - 1
    mult[rng.random(n) < 0.05] = 1 << 30
    if extreme:
        shift = rng.integers(-31, 31, size=n)
        shift[rng.random(n) < 0.3] = rng.integers(0, 6)
    else:
        shift = rng.integers(-13, -3, size=n)
    return mult, shift


def bias_of(rng, n: int) -> np.ndarray | None:
    """None, small biases, or biases anywhere in int32 (the exact fallback's)."""
    kind = rng.integers(5)
    if kind == 0:
        return None
    magnitude = [1 << 8, 1 << 16, 1 << 22, 1 << 31][kind - 1]
    return rng.integers(-magnitude, magnitude, size=n)


def act_range(rng, zp: int) -> tuple[int, int]:
    kind = rng.integers(3)
    if kind == 0:
        return -128, 127
    if kind == 1:  # relu: from the zero point up
        return zp, 127
    lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
    return lo, hi


GEOMETRIES = ("dense", "pointwise", "grouped", "depthwise", "depthwise3", "multiplier")


def conv_geometry(rng, kind: str) -> dict:
    """Channels and groups of a layer of `kind` ("wide": a pointwise layer whose weights
    exceed WEXP_MAX, expanded tile by tile)."""
    if kind == "wide":
        return {"groups": 1, "ipg": int(rng.integers(65, 161)), "opg": int(rng.integers(40, 101))}
    if kind == "pointwise":
        return {"groups": 1, "ipg": int(rng.integers(1, 65)), "opg": int(rng.integers(1, 40))}
    if kind == "dense":
        ipg = int(rng.integers(1, 17)) if rng.random() < 0.7 else int(rng.integers(17, 65))
        return {"groups": 1, "ipg": ipg, "opg": int(rng.integers(1, 33))}
    if kind == "grouped":
        return {"groups": int(rng.integers(2, 5)), "ipg": int(rng.integers(2, 6)),
                "opg": int(rng.integers(1, 7))}
    if kind == "multiplier":  # one input channel per group, large multipliers: GEMM
        return {"groups": int(rng.integers(1, 4)), "ipg": 1, "opg": int(rng.integers(5, 40))}
    return {"groups": int(rng.integers(1, 13)), "ipg": 1, "opg": int(rng.integers(1, 5))}


def axis(rng, kind: str) -> tuple[int, int, int, int, int, int]:
    """(size, kernel, stride, dilation, pad before, pad after) of one axis, output >= 1."""
    kind = "pointwise" if kind == "wide" else kind
    while True:
        if kind == "pointwise":
            k, s, d = 1, 1, 1
        elif kind == "depthwise3":
            k, s, d = 3, int(rng.choice([1, 1, 2])), 1
        else:
            k = int(rng.choice([1, 2, 3, 3, 3, 5, 7, 11] if rng.random() < 0.8 else range(1, 12)))
            s, d = int(rng.choice([1, 1, 2, 3])), int(rng.choice([1, 1, 2]))
        size = int(rng.integers(1, 24))
        span = d * (k - 1) + 1
        before, after = (int(v) for v in rng.integers(0, max(span, 1), 2))
        if kind == "pointwise" and rng.random() < 0.7:
            before = after = 0
        if size + before + after >= span:
            return size, k, s, d, before, after


def conv_case(rng, kind: str) -> dict:
    """A convolution layer with its data and quantization, the reference's output included."""
    g = conv_geometry(rng, kind)
    while True:
        (h, kh, sh, dh, pt, pb), (w, kw, sw, dw, pl, pr) = axis(rng, kind), axis(rng, kind)
        if g["groups"] * g["ipg"] * h * w <= 6000:
            break
    in_c, out_c = g["groups"] * g["ipg"], g["groups"] * g["opg"]
    in_zp, out_zp = (int(v) for v in rng.integers(-128, 128, 2))
    lo, hi = act_range(rng, out_zp)
    mult, shift = requant(rng, out_c, rng.random() < 0.3)
    case = {"x": int8(rng, (in_c, h, w)), "w": int8(rng, (out_c, g["ipg"], kh, kw)),
            "bias": bias_of(rng, out_c), "mult": mult, "shift": shift,
            "params": dict(in_c=in_c, in_h=h, in_w=w, out_c=out_c,
                           out_h=(h + pt + pb - dh * (kh - 1) - 1) // sh + 1,
                           out_w=(w + pl + pr - dw * (kw - 1) - 1) // sw + 1, k_h=kh, k_w=kw,
                           stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, dil_h=dh, dil_w=dw,
                           groups=g["groups"], in_zp=in_zp, out_zp=out_zp, act_min=lo,
                           act_max=hi)}
    if rng.random() < 0.3:
        prune(rng, case)
    layer = SimpleNamespace(kernel=(kh, kw), stride=(sh, sw), pad=(pt, pl), pad_end=(pb, pr),
                            dilation=(dh, dw), groups=g["groups"])
    q = TflQuant((in_zp,), out_zp, lo, hi, 1.0, mult, shift, weight=case["w"], bias=case["bias"])
    case["ref"] = reference.conv2d(layer, q, [case["x"][None]])[0].reshape(-1)
    return case


def prune(rng, case: dict) -> None:
    """Some output channels with all-zero weights and a bias anywhere in int32, as a
    converted model's pruned channels (VWW's have biases near 2^30): a constant output."""
    out_c = len(case["w"])
    rows = rng.choice(out_c, size=max(1, out_c // 3), replace=False)
    case["w"][rows] = 0
    bias = case["bias"] if case["bias"] is not None else np.zeros(out_c, dtype=np.int64)
    bias = np.asarray(bias, dtype=np.int64).copy()
    bias[rows] = rng.integers(-(1 << 31), 1 << 31, len(rows))
    case["bias"] = bias


def linear_case(rng, in_f: int | None = None, out_f: int | None = None) -> dict:
    if in_f is None:
        in_f = int(rng.integers(1, 9)) if rng.random() < 0.3 else int(rng.integers(1, 700))
    if out_f is None:  # one or two: the narrow path (no expanded input)
        out_f = int(rng.integers(1, 3)) if rng.random() < 0.3 else int(rng.integers(1, 24))
    in_zp, out_zp = (int(v) for v in rng.integers(-128, 128, 2))
    lo, hi = act_range(rng, out_zp)
    mult, shift = requant(rng, out_f, rng.random() < 0.3)
    case = {"x": int8(rng, (in_f,)), "w": int8(rng, (out_f, in_f)), "bias": bias_of(rng, out_f),
            "mult": mult, "shift": shift,
            "params": dict(in_f=in_f, out_f=out_f, in_zp=in_zp, out_zp=out_zp, act_min=lo,
                           act_max=hi)}
    q = TflQuant((in_zp,), out_zp, lo, hi, 1.0, mult, shift, weight=case["w"], bias=case["bias"])
    case["ref"] = reference.linear(None, q, [case["x"][None]])[0]
    return case


# ---- calling the C kernels ---------------------------------------------------------------------

def ptr(a, ctype):
    return None if a is None else a.ctypes.data_as(ctypes.POINTER(ctype))


def placed(values: np.ndarray, dtype, offset: int) -> np.ndarray:
    """values (flattened) `offset` bytes into a fresh buffer: inputs and weights at any
    address, as generated arrays are only byte-aligned."""
    raw = np.asarray(values, dtype=dtype).reshape(-1)
    buf = np.zeros(raw.nbytes + offset + 8, np.uint8)
    view = buf[offset:offset + raw.nbytes].view(dtype)
    view[:] = raw
    return view


def run_layer(lib, name: str, params, case: dict, scratch_n: int, offset: int = 0):
    """(outputs, scratch intact past scratch_n, outputs intact past the end)."""
    n = case["ref"].size
    out = np.full(n + GUARD, SENTINEL, np.int8)
    scratch = np.full(scratch_n + GUARD, 0x5A5A, np.int16)
    assert scratch.ctypes.data % 4 == 0
    bias = None if case["bias"] is None else placed(case["bias"], np.int32, 0)
    getattr(lib, name)(ctypes.byref(params), ptr(placed(case["x"], np.int8, offset), I8),
                       ptr(placed(case["w"], np.int8, (offset + 1) % 4), I8), ptr(bias, I32),
                       ptr(placed(case["mult"], np.int32, 0), I32),
                       ptr(placed(case["shift"], np.int32, 0), I32), ptr(out, I8),
                       ptr(scratch, I16))
    return out[:n], bool((scratch[scratch_n:] == 0x5A5A).all()), bool((out[n:] == SENTINEL).all())


def check_both(lib, kind: str, case: dict, offset: int) -> None:
    params = (ConvParams if kind == "conv" else FcParams)(**case["params"])
    scratch_n = (lib.eb_tfl_conv_scratch if kind == "conv" else lib.eb_tfl_linear_scratch)(
        ctypes.byref(params))
    name = "eb_tfl_conv2d" if kind == "conv" else "eb_tfl_linear"
    context = {k: v for k, v in case["params"].items()}
    for kernel, scratch in ((name, 0), (name + "_opt", scratch_n)):
        out, scratch_ok, out_ok = run_layer(lib, kernel, params, case, scratch, offset)
        np.testing.assert_array_equal(out, case["ref"], err_msg=f"{kernel} {context}")
        assert scratch_ok, f"{kernel} wrote past its scratch: {context}"
        assert out_ok, f"{kernel} wrote past its output: {context}"


# ---- host --------------------------------------------------------------------------------------

def test_struct_mirrors_match_the_header(lib):
    for key, (_, struct) in STRUCTS.items():
        assert ctypes.sizeof(struct) == getattr(lib, f"t_sizeof_{key}")(), key
        for field, _ in struct._fields_:
            assert getattr(struct, field).offset == getattr(lib, f"t_offsetof_{key}_{field}")(), \
                (key, field)


EDGES = [0, 1, -1, 2, -2, 3, 127, -128, 255, -255, 1 << 30, -(1 << 30), (1 << 31) - 1, -(1 << 31),
         (1 << 30) + 1, -(1 << 30) - 1, 12345678, -12345678, (1 << 29) - 3, 1 << 15]


def test_fixed_point_primitives_match_arith(lib):
    rng = np.random.default_rng(7)
    values = np.array(EDGES + list(rng.integers(-(1 << 31), 1 << 31, 300)), dtype=np.int64)
    mults = np.array([0, 1 << 30, (1 << 31) - 1, -(1 << 31), 1518500250, -5, 3], dtype=np.int64)
    for a in values:
        for b in mults:
            assert lib.t_srdhm(int(a), int(b)) == arith.srdhm(a, b), (a, b)
        for e in (0, 1, 2, 5, 12, 30, 31):
            assert lib.t_rdbpot(int(a), e) == arith.rdbpot(a, e), (a, e)
        for m, s in ((1518500250, -31), (1 << 30, -1), ((1 << 31) - 1, 0), (1234567890, 3),
                     (1 << 30, 30), (2000000000, -9), (0, -7)):
            assert lib.t_mbqm(int(a), m, s) == arith.mbqm(a, m, s), (a, m, s)
            assert lib.t_mbqm_single(int(a), m, s) == arith.mbqm_single(a, m, s), (a, m, s)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(GEOMETRIES), seed=st.integers(0, 2**32 - 1),
       offset=st.integers(0, 3))
def test_conv2d_both_kernels_equal_the_reference(lib, kind, seed, offset):
    check_both(lib, "conv", conv_case(np.random.default_rng(seed), kind), offset)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), offset=st.integers(0, 3))
def test_wide_pointwise_tiles_equal_the_reference(lib, seed, offset):
    """1x1 layers whose weights exceed WEXP_MAX: records tile by tile (4 blocks of pixels or
    more) or int8 weights in the loop."""
    check_both(lib, "conv", conv_case(np.random.default_rng(seed), "wide"), offset)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), offset=st.integers(0, 3))
def test_linear_both_kernels_equal_the_reference(lib, seed, offset):
    check_both(lib, "linear", linear_case(np.random.default_rng(seed)), offset)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_pool2d_equals_the_reference(lib, seed):
    rng = np.random.default_rng(seed)
    c, h, w = (int(v) for v in rng.integers(1, [5, 20, 20]))
    kh, kw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
    if rng.random() < 0.3:  # a global pool (one run of the whole plane)
        kh, kw = h, w
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    # padding (SAME's, or any less than the window) in half the cases
    (pt, pb), (pl, pr) = ((int(v) for v in rng.integers(0, k, 2)) if rng.random() < 0.5
                          else (0, 0) for k in (kh, kw))
    mode = str(rng.choice(["max", "avg"]))
    lo, hi = act_range(rng, int(rng.integers(-128, 128)))
    x = int8(rng, (c, h, w))
    layer = SimpleNamespace(size=(kh, kw), stride=(sh, sw), mode=mode, pad=(pt, pl),
                            pad_end=(pb, pr))
    ref = reference.pool2d(layer, TflQuant((0,), 0, lo, hi, 1.0), [x[None]])[0].reshape(-1)
    params = PoolParams(c, h, w, (h + pt + pb - kh) // sh + 1, (w + pl + pr - kw) // sw + 1,
                        kh, kw, sh, sw, 0 if mode == "max" else 1, lo, hi, pt, pl)
    for kernel, offset in (("eb_tfl_pool2d", 1), ("eb_tfl_pool2d_opt", 1), ("eb_tfl_pool2d_opt", 2)):
        out = np.full(ref.size + GUARD, SENTINEL, np.int8)
        getattr(lib, kernel)(ctypes.byref(params), ptr(placed(x, np.int8, offset), I8),
                             ptr(out, I8))
        np.testing.assert_array_equal(out[:ref.size], ref, err_msg=kernel)
        assert (out[ref.size:] == SENTINEL).all()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_add_equals_the_reference(lib, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300)) if rng.random() < 0.4 else int(rng.integers(256, 1500))
    zps = [int(v) for v in rng.integers(-128, 128, 3)]
    lo, hi = act_range(rng, zps[2])
    left = 20 if rng.random() < 0.7 else int(rng.integers(0, 32))
    mult, shift = requant(rng, 3, rng.random() < 0.5)
    if rng.random() < 0.7:  # TFLite's: the inputs' shifts well below the headroom
        shift = np.array([int(rng.integers(-25, -1)), int(rng.integers(-25, -1)),
                          int(rng.integers(-25, 1))])
    a, b = int8(rng, (n,)), int8(rng, (n,))
    q = TflQuant((zps[0], zps[1]), zps[2], lo, hi, 1.0, mult, shift, left_shift=left)
    ref = reference.add(None, q, [a, b])
    params = AddParams(n, zps[0], zps[1], zps[2], lo, hi, left, *(int(v) for pair in zip(
        mult, shift, strict=True) for v in pair))
    out = np.full(n + GUARD, SENTINEL, np.int8)
    lib.eb_tfl_add(ctypes.byref(params), ptr(placed(a, np.int8, 1), I8),
                   ptr(placed(b, np.int8, 3), I8), ptr(out, I8))
    np.testing.assert_array_equal(out[:n], ref)
    assert (out[n:] == SENTINEL).all()
    need = lib.eb_tfl_add_scratch(ctypes.byref(params))
    assert need == kernels.add_scratch(n)
    scratch = np.full(need + GUARD, 0x5A5A, np.int16)
    out = np.full(n + GUARD, SENTINEL, np.int8)
    lib.eb_tfl_add_opt(ctypes.byref(params), ptr(placed(a, np.int8, 2), I8),
                       ptr(placed(b, np.int8, 1), I8), ptr(out, I8),
                       ptr(scratch, I16) if need else None)
    np.testing.assert_array_equal(out[:n], ref, err_msg="eb_tfl_add_opt")
    assert (out[n:] == SENTINEL).all() and (scratch[need:] == 0x5A5A).all()


def softmax_case(rng) -> tuple[np.ndarray, int, int, int]:
    """(x [C, positions], multiplier, left shift, diff_min): TFLite's parameters for a beta
    and input scale, or anything (diff_min above 0: nothing inside; left shifts to 31)."""
    channels = int(rng.integers(1, 40)) if rng.random() < 0.9 else int(rng.integers(4000, 4300))
    positions = int(rng.integers(1, 6)) if channels < 100 else 1
    x = int8(rng, (channels, positions)) if rng.random() < 0.7 else \
        rng.integers(-4, 4, (channels, positions))
    if rng.random() < 0.75:
        beta = float(rng.choice([1.0, 0.5, 2.0, rng.uniform(0.01, 50.0)]))
        multiplier, left, diff_min = arith.softmax_params(beta, float(rng.uniform(1e-3, 0.5)))
    else:
        multiplier = int(rng.integers(1 << 30, 1 << 31))
        left, diff_min = int(rng.integers(0, 32)), int(rng.integers(-400, 4))
    return x, multiplier, left, diff_min


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_softmax_equals_the_reference(lib, seed):
    x, multiplier, left, diff_min = softmax_case(np.random.default_rng(seed))
    channels, positions = x.shape
    q = TflQuant((0,), -128, -128, 127, 1 / 256, np.array([multiplier]), left_shift=left,
                 diff_min=diff_min)
    ref = reference.softmax(None, q, [x[None]])[0].reshape(-1)
    params = SoftmaxParams(channels, positions, multiplier, left, diff_min)
    out = np.full(x.size + GUARD, SENTINEL, np.int8)
    lib.eb_tfl_softmax(ctypes.byref(params), ptr(placed(x, np.int8, 2), I8), ptr(out, I8))
    np.testing.assert_array_equal(out[:x.size], ref, err_msg=f"{params.channels} channels, "
                                  f"m {multiplier} left {left} diff_min {diff_min}")
    assert (out[x.size:] == SENTINEL).all()


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from((*GEOMETRIES, "wide")), seed=st.integers(0, 2**32 - 1))
def test_python_scratch_sizes_equal_the_c_ones(lib, kind, seed):
    rng = np.random.default_rng(seed)
    g = conv_geometry(rng, kind)
    (h, kh, sh, dh, pt, pb), (w, kw, sw, dw, pl, pr) = axis(rng, kind), axis(rng, kind)
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    in_c, out_c = g["groups"] * g["ipg"], g["groups"] * g["opg"]
    params = ConvParams(in_c, h, w, out_c, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, g["groups"],
                        0, 0, -128, 127)
    assert kernels.conv_scratch(in_c, h, w, out_c, oh, ow, kh, kw, sh, sw, dh, dw,
                                g["groups"]) == lib.eb_tfl_conv_scratch(ctypes.byref(params))
    in_f = int(rng.integers(1, 5000))
    assert kernels.linear_scratch(in_f) == lib.eb_tfl_linear_scratch(
        ctypes.byref(FcParams(in_f, 1, 0, 0, -128, 127)))


def test_scratch_is_a_function_of_the_shape_not_the_padding():
    """The same shape with other paddings (and its output size) needs the same scratch:
    kernels.conv_scratch takes no padding."""
    base = kernels.conv_scratch(16, 32, 32, 16, 32, 32, 3, 3, 1, 1, 1, 1, 1)
    assert base > 0 and kernels.linear_scratch(640) == 640
    assert kernels.conv_scratch(64, 25, 5, 64, 25, 5, 1, 1, 1, 1, 1, 1, 1) > 0
    assert kernels.is_depthwise(64, 64, 64) and not kernels.is_depthwise(1, 64, 1)


# ---- Cortex-M4 under QEMU -----------------------------------------------------------------------

# (kind, seed-independent constraints) of the firmware's layers: each assembly path, clamped
# and full ranges, stores of partial blocks, exact-fallback channels among fast ones.
M4_LAYERS = (
    dict(kind="pointwise", in_c=24, h=5, w=5, out_c=20),
    dict(kind="pointwise", in_c=64, h=3, w=7, out_c=9, clamp=True),
    # records of tiles of output channels (a group's exceed WEXP_MAX), pair records
    dict(kind="pointwise", in_c=128, h=4, w=5, out_c=42),
    dict(kind="pointwise", in_c=256, h=3, w=6, out_c=34, clamp=True),
    dict(kind="pointwise", in_c=128, h=5, w=4, out_c=40),
    # pruned channels (all-zero weight rows) skipped by the pair GEMM: an odd number left
    # over tiles on a 3x3 map (its last block overlapping), small biases, 4 pixels, every
    # channel pruned, and a map under 4 pixels (no skipping)
    dict(kind="pointwise", in_c=256, h=3, w=3, out_c=40, pruned=(0, 1, 2, 5, 9, 10, 11, 20, 33)),
    dict(kind="pointwise", in_c=32, h=2, w=2, out_c=12, pruned=(3, 4, 11), small_bias=True),
    dict(kind="pointwise", in_c=16, h=3, w=5, out_c=6, pruned=(0, 1, 2, 3, 4, 5), clamp=True),
    dict(kind="pointwise", in_c=16, h=1, w=3, out_c=8, pruned=(1, 2)),
    dict(kind="dense", in_c=5, h=9, w=8, out_c=7, k=3, pad=1),
    dict(kind="dense", in_c=3, h=13, w=13, out_c=8, k=3, stride=2, pad=(0, 1)),
    dict(kind="dense", in_c=2, h=11, w=10, out_c=6, k=(5, 3), stride=2, pad=(2, 1), clamp=True),
    dict(kind="dense", in_c=1, h=15, w=10, out_c=24, k=(6, 4), stride=2, pad=(2, 1)),
    dict(kind="dense", in_c=8, h=6, w=6, out_c=64, k=3, pad=1),
    dict(kind="dense", in_c=8, h=5, w=7, out_c=66, k=3, pad=1, clamp=True),
    dict(kind="dense", in_c=6, h=7, w=9, out_c=8, k=3, dil=2, pad=2, groups=2),
    dict(kind="dense", in_c=4, h=10, w=11, out_c=5, k=(1, 5), stride=(1, 3), pad=(0, 2)),
    dict(kind="depthwise", in_c=6, h=9, w=8, out_c=6, k=3, pad=1),
    # rows under 4 values (VWW's 3x3 maps): the word ending at the row's end, but the first
    dict(kind="depthwise", in_c=7, h=3, w=3, out_c=7, k=3, pad=1),
    dict(kind="depthwise", in_c=3, h=4, w=2, out_c=6, k=3, pad=1, clamp=True),
    dict(kind="depthwise", in_c=5, h=7, w=5, out_c=10, k=3, pad=1, clamp=True),
    dict(kind="depthwise", in_c=4, h=6, w=6, out_c=4, k=3, pad=1),
    dict(kind="depthwise", in_c=3, h=5, w=7, out_c=3, k=3, pad=(0, 1)),
    dict(kind="depthwise", in_c=4, h=12, w=16, out_c=4, k=3, stride=2, pad=(0, 1)),
    dict(kind="depthwise", in_c=3, h=11, w=13, out_c=9, k=3, stride=2, pad=1, clamp=True),
    dict(kind="depthwise", in_c=3, h=9, w=9, out_c=3, k=5, pad=2),
    dict(kind="depthwise", in_c=2, h=8, w=12, out_c=4, k=(3, 4), stride=(2, 1), dil=2, pad=2),
)


def m4_case(spec: dict, index: int, pruned: bool = True) -> dict:
    """The layer `spec` with random data and quantization (some channels on the exact
    fallback: a huge bias, a left shift, a shift past 22; with `pruned`, every fourth layer
    has all-zero weight rows)."""
    rng = np.random.default_rng([31, index])
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    (kh, kw), (sh, sw), (dh, dw) = (pair(spec.get(key, 1)) for key in ("k", "stride", "dil"))
    pt, pl = pair(spec.get("pad", 0))
    in_c, out_c, h, w = spec["in_c"], spec["out_c"], spec["h"], spec["w"]
    groups = in_c if spec["kind"] == "depthwise" else spec.get("groups", 1)
    oh, ow = (h + 2 * pt - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pl - dw * (kw - 1) - 1) // sw + 1
    in_zp, out_zp = (int(v) for v in rng.integers(-128, 128, 2))
    lo, hi = (int(out_zp), max(int(out_zp), 127 - int(rng.integers(0, 20)))) \
        if spec.get("clamp") else (-128, 127)  # act_min <= act_max, as eb_tfl.h requires
    mult, shift = requant(rng, out_c, False)
    bias = rng.integers(-(1 << 16), 1 << 16, out_c)
    if index % 3 == 0:
        bias[out_c // 2] = (1 << 31) - 5
        shift[-1] = 2
        shift[0] = -25
    weights = int8(rng, (out_c, in_c // groups, kh, kw))
    if "pruned" in spec or (pruned and index % 4 == 1):
        # pruned channels: all-zero weights, a bias near 2^30 (VWW's) or a small one
        rows = np.array(spec.get("pruned", np.arange(0, out_c, 3)))
        weights[rows] = 0
        bias[rows] = rng.integers(-(1 << 12), 1 << 12, len(rows)) if spec.get("small_bias") \
            else (1 << 30) + rng.integers(-(1 << 20), 1 << 20, len(rows))
    case = {"x": int8(rng, (in_c, h, w)), "w": weights,
            "bias": bias, "mult": mult, "shift": shift,
            "params": dict(in_c=in_c, in_h=h, in_w=w, out_c=out_c, out_h=oh, out_w=ow, k_h=kh,
                           k_w=kw, stride_h=sh, stride_w=sw, pad_top=pt, pad_left=pl, dil_h=dh,
                           dil_w=dw, groups=groups, in_zp=in_zp, out_zp=out_zp, act_min=lo,
                           act_max=hi)}
    layer = SimpleNamespace(kernel=(kh, kw), stride=(sh, sw), pad=(pt, pl), pad_end=(pt, pl),
                            dilation=(dh, dw), groups=groups)
    q = TflQuant((in_zp,), out_zp, lo, hi, 1.0, mult, shift, weight=case["w"], bias=bias)
    case["ref"] = reference.conv2d(layer, q, [case["x"][None]])[0].reshape(-1)
    return case


M4_MAIN = """
static int16_t scratch[SCRATCH + 16] __attribute__((aligned(4)));
static int8_t out[OUT + 16];
static int8_t in_buf[IN + 8], w_buf[W + 8];
static int8_t w_al[W + 8] __attribute__((aligned(4)));

/* the layer's input and weights copied to odd addresses, then both kernels */
static int run(int id, int conv, const void *p, const int8_t *x, int nx, const int8_t *w,
               int nw, const int32_t *b, const int32_t *m, const int32_t *s, const int8_t *want,
               int n)
{
    int i, k, bad = 0;
    memcpy(in_buf + 1, x, (size_t)nx);
    memcpy(w_buf + 3, w, (size_t)nw);
    memcpy(w_al, w, (size_t)nw);
    for (k = 0; k < (conv ? 2 : 3); ++k) { /* linear: odd and word-aligned weights */
        for (i = 0; i < n + 16; ++i) out[i] = 0x5A;
        for (i = 0; i < SCRATCH + 16; ++i) scratch[i] = 0x5A5A;
        if (conv && k) eb_tfl_conv2d_opt(p, in_buf + 1, w_buf + 3, b, m, s, out, scratch);
        else if (conv) eb_tfl_conv2d(p, in_buf + 1, w_buf + 3, b, m, s, out, NULL);
        else if (k) eb_tfl_linear_opt(p, in_buf + 1, k == 2 ? w_al : w_buf + 3, b, m, s, out,
                                      scratch);
        else eb_tfl_linear(p, in_buf + 1, w_buf + 3, b, m, s, out, NULL);
        for (i = 0; i < n; ++i) bad |= out[i] != want[i];
        for (i = n; i < n + 16; ++i) bad |= out[i] != 0x5A;
        for (i = conv ? eb_tfl_conv_scratch(p) : eb_tfl_linear_scratch(p); i < SCRATCH + 16; ++i)
            bad |= scratch[i] != 0x5A5A;
        if (bad) { printf("case %d (%s): MISMATCH\\n", id, k ? "opt" : "portable"); return 1; }
    }
    return 0;
}
"""


def m4_source(cases: list[tuple[str, dict]]) -> str:
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_tfl.h"\n']
    calls, sizes = [], {"SCRATCH": 16, "OUT": 16, "IN": 16, "W": 16}
    for i, (kind, case) in enumerate(cases):
        p = case["params"]
        struct = "eb_tfl_conv_params" if kind == "conv" else "eb_tfl_fc_params"
        parts.append(f"static const {struct} p{i} = {{{', '.join(str(v) for v in p.values())}}};\n")
        parts += [c_array("int8_t", f"x{i}", case["x"]), c_array("int8_t", f"w{i}", case["w"]),
                  c_array("int32_t", f"m{i}", case["mult"]),
                  c_array("int32_t", f"s{i}", case["shift"]),
                  c_array("int8_t", f"e{i}", case["ref"]),
                  c_array("int32_t", f"b{i}", case["bias"]) if case["bias"] is not None
                  else f"static const int32_t *const b{i} = NULL;\n"]
        scratch = kernels.linear_scratch(p["in_f"]) if kind == "linear" else kernels.conv_scratch(
            p["in_c"], p["in_h"], p["in_w"], p["out_c"], p["out_h"], p["out_w"], p["k_h"], p["k_w"],
            p["stride_h"], p["stride_w"], p["dil_h"], p["dil_w"], p["groups"])
        for key, value in (("SCRATCH", scratch), ("OUT", case["ref"].size), ("IN", case["x"].size),
                           ("W", case["w"].size)):
            sizes[key] = max(sizes[key], value)
        calls.append(f"    bad += run({i}, {int(kind == 'conv')}, &p{i}, x{i}, {case['x'].size}, "
                     f"w{i}, {case['w'].size}, b{i}, m{i}, s{i}, e{i}, {case['ref'].size});\n")
    head = "".join(f"#define {key} {value}\n" for key, value in sizes.items())
    return (head + "".join(parts) + M4_MAIN + "int main(void)\n{\n    int bad = 0;\n"
            + "".join(calls) + '    printf("eb_tfl on M4: %d mismatching layers\\n", bad);\n'
            "    return bad != 0;\n}\n")


def build_tfl(build, name: str, source: str, level: str = "-O2"):
    (build / f"{name}.c").write_text(source)
    elf = build / f"{name}.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, level, f"-I{KERNELS}", *M4_LINK,
         "-Wl,-T," + str(build / "link.ld"),
         "-o", str(elf), str(build / "startup_m4.c"), str(build / f"{name}.c"),
         *(str(KERNELS / f) for f in SOURCES)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


@needs_m4
@pytest.mark.parametrize("level", ["-O2", "-Os"])
def test_both_kernels_equal_the_reference_on_the_cortex_m4(m4_build, level):  # noqa: F811
    """The assembly paths at -O2 and -Os (a project's size build): the same results."""
    cases = [("conv", m4_case(spec, i)) for i, spec in enumerate(M4_LAYERS)]
    rng = np.random.default_rng(77 if level == "-O2" else 78)
    cases += [("conv", conv_case(rng, GEOMETRIES[i % len(GEOMETRIES)])) for i in range(24)]
    cases += [("linear", linear_case(rng)) for _ in range(8)]
    # word-aligned rows of a multiple of 8: row triples in batches of 15, a last pair, a last
    # single row
    cases += [("linear", linear_case(rng, in_f, out_f))
              for in_f, out_f in ((8, 2), (16, 37), (128, 18), (640, 33), (24, 1), (64, 17),
                                  (40, 5), (256, 2), (3, 2), (7, 1), (101, 2))]
    elf = build_tfl(m4_build, f"tfl_kat{level}", m4_source(cases), level)
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "eb_tfl on M4: 0 mismatching layers" in result.stdout



def add_case(rng, n: int, fast: bool) -> dict:
    """An add of n values with TFLite's parameters (left shift 20, inputs' right shifts; the
    tables' fast form) or with a left shift at the output (the exact fallback)."""
    zps = [int(v) for v in rng.integers(-128, 128, 3)]
    lo, hi = act_range(rng, zps[2])
    mult, shift = requant(rng, 3, False)
    shift = np.array([int(rng.integers(-12, -1)), int(rng.integers(-12, -1)),
                      int(rng.integers(-22, -16)) if fast else 3])
    a, b = int8(rng, (n,)), int8(rng, (n,))
    q = TflQuant((zps[0], zps[1]), zps[2], lo, hi, 1.0, mult, shift, left_shift=20)
    fields = [n, zps[0], zps[1], zps[2], lo, hi, 20,
              *(int(v) for pair in zip(mult, shift, strict=True) for v in pair)]
    return {"a": a, "b": b, "fields": fields, "ref": reference.add(None, q, [a, b])}


def pool_case(rng, c: int, h: int, w: int, k: tuple[int, int], stride: int, mode: str,
              pad: tuple[int, int, int, int] = (0, 0, 0, 0)) -> dict:
    """A pool layer; pad: (top, left, bottom, right)."""
    lo, hi = act_range(rng, int(rng.integers(-128, 128)))
    x = int8(rng, (c, h, w))
    pt, pl, pb, pr = pad
    layer = SimpleNamespace(size=k, stride=(stride, stride), mode=mode, pad=(pt, pl),
                            pad_end=(pb, pr))
    ref = reference.pool2d(layer, TflQuant((0,), 0, lo, hi, 1.0), [x[None]])[0].reshape(-1)
    fields = [c, h, w, (h + pt + pb - k[0]) // stride + 1, (w + pl + pr - k[1]) // stride + 1,
              k[0], k[1], stride, stride, 0 if mode == "max" else 1, lo, hi, pt, pl]
    return {"x": x, "fields": fields, "ref": ref}


ELEMENTWISE_MAIN = """
static int16_t scratch[1024 + 16] __attribute__((aligned(4)));
static int8_t out[OUT + 16], a_buf[OUT + 8], b_buf[OUT + 8];

static int check(int id, const int8_t *want, int n)
{
    int i, bad = 0;
    for (i = 0; i < n; ++i) bad |= out[i] != want[i];
    for (i = n; i < n + 16; ++i) bad |= out[i] != 0x5A;
    for (i = 1024; i < 1024 + 16; ++i) bad |= scratch[i] != 0x5A5A;
    if (bad) printf("case %d: MISMATCH\\n", id);
    return bad;
}

static int add(int id, const eb_tfl_add_params *p, const int8_t *a, const int8_t *b,
               const int8_t *want)
{
    memcpy(a_buf + 1, a, (size_t)p->n);
    memcpy(b_buf + 2, b, (size_t)p->n);
    memset(out, 0x5A, sizeof out);
    for (int i = 0; i < 1024 + 16; ++i) scratch[i] = 0x5A5A;
    eb_tfl_add_opt(p, a_buf + 1, b_buf + 2, out, eb_tfl_add_scratch(p) ? scratch : NULL);
    return check(id, want, p->n);
}

static int pool(int id, const eb_tfl_pool_params *p, const int8_t *x, int nx, const int8_t *want)
{
    memcpy(a_buf + 3, x, (size_t)nx);
    memset(out, 0x5A, sizeof out);
    eb_tfl_pool2d_opt(p, a_buf + 3, out);
    return check(id, want, p->c * p->out_h * p->out_w);
}
"""


@needs_m4
def test_add_and_pool_equal_the_reference_on_the_cortex_m4(m4_build):  # noqa: F811
    """eb_tfl_add_opt (tables: the fast output form and the exact fallback; the portable loop
    below EB_TFL_ADD_TABLE_MIN) and eb_tfl_pool2d_opt (global averages short and long, windows,
    maxima) with their DSP instructions, inputs at odd addresses."""
    rng = np.random.default_rng(2031)
    adds = [add_case(rng, n, fast) for n, fast in ((1000, True), (4099, True), (700, False),
                                                   (255, True), (16384, True))]
    pools = [pool_case(rng, *spec) for spec in (
        (256, 3, 3, (3, 3), 1, "avg"), (9, 25, 5, (25, 5), 1, "avg"), (5, 8, 8, (8, 8), 1, "avg"),
        (3, 11, 13, (2, 7), 2, "avg"), (4, 9, 20, (3, 18), 1, "avg"), (4, 17, 17, (17, 17), 1,
                                                                        "max"),
        (3, 12, 9, (2, 2), 2, "max"), (2, 6, 30, (5, 21), 3, "max"),
        # SAME padding (odd sizes: more after than before), and padding before only
        (3, 7, 9, (2, 2), 2, "max", (0, 0, 1, 1)), (4, 7, 9, (3, 3), 2, "avg", (1, 1, 1, 1)),
        (2, 10, 11, (4, 5), 1, "avg", (1, 2, 2, 2)), (3, 5, 20, (3, 18), 1, "avg",
                                                       (1, 0, 1, 0)))]
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_tfl.h"\n',
             f"#define OUT {max(max(c['ref'].size for c in adds + pools), 9 * 256)}\n"]
    calls = []
    for i, case in enumerate(adds):
        parts += [f"static const eb_tfl_add_params q{i} = {{{', '.join(map(str, case['fields']))}}};\n",
                  c_array("int8_t", f"a{i}", case["a"]), c_array("int8_t", f"b{i}", case["b"]),
                  c_array("int8_t", f"r{i}", case["ref"])]
        calls.append(f"    bad += add({i}, &q{i}, a{i}, b{i}, r{i});\n")
    for j, case in enumerate(pools, start=len(adds)):
        parts += [f"static const eb_tfl_pool_params q{j} = {{{', '.join(map(str, case['fields']))}}};\n",
                  c_array("int8_t", f"x{j}", case["x"]), c_array("int8_t", f"r{j}", case["ref"])]
        calls.append(f"    bad += pool({j}, &q{j}, x{j}, {case['x'].size}, r{j});\n")
    source = ("".join(parts) + ELEMENTWISE_MAIN + "int main(void)\n{\n    int bad = 0;\n"
              + "".join(calls) + '    printf("eb_tfl add/pool on M4: %d mismatching\\n", bad);\n'
              "    return bad != 0;\n}\n")
    result = run_qemu(build_tfl(m4_build, "tfl_elementwise", source))
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "eb_tfl add/pool on M4: 0 mismatching" in result.stdout

def test_the_m4_build_has_the_assembly_and_compiles_cleanly(tmp_path):
    """-Wall -Wextra -Werror with arm-none-eabi-gcc at -O2 (the assembly paths) and -O0
    (none: portable C with the DSP intrinsics)."""
    tool("arm-none-eabi-gcc")
    for level in ("-O2", "-O0"):
        for name in SOURCES:
            obj = tmp_path / f"{name}{level}.o"
            result = subprocess.run([ARM_GCC, *M4_FLAGS, *CFLAGS, level, "-c", f"-I{KERNELS}",
                                     "-o", str(obj), str(KERNELS / name)],
                                    capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, result.stderr
    dump = subprocess.run([ARM_GCC.replace("gcc", "objdump"), "-d",
                           str(tmp_path / "eb_tfl_opt.c-O2.o")],
                          capture_output=True, text=True, timeout=60).stdout
    for instruction in ("smlad", "smladx", "smmlar", "sxtab16", "ssub8", "ldmia"):
        assert instruction in dump, instruction


# Instructions per MAC of the optimized kernels on two layers under QEMU: bounds with room
# above what was measured when written (arm-none-eabi-gcc 12.2 -O2: 0.93 and 2.04;
# benchmarks/tfl_kernels.py prints the whole table, CMSIS-NN beside it).
# label: (layer, bound on the instructions per MAC, bound on the estimated cycles per MAC)
M4_BENCH = {
    "pointwise 64->64 on 25x5": (dict(in_c=64, h=25, w=5, out_c=64), 1.2, 1.45),
    "depthwise 3x3, 16 ch on 24x24": (dict(in_c=16, h=24, w=24, out_c=16, k=3, pad=1,
                                           kind="depthwise"), 2.3, 3.3),
    "pointwise 128->128 on 6x6 (tiles of channels)": (dict(in_c=128, h=6, w=6, out_c=128),
                                                      1.25, 1.5),
}

BENCH_MAIN = """
volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_begin(void) { eb_bench_marker = 1; }
__attribute__((noinline)) void eb_bench_end(void) { eb_bench_marker = 2; }
static int16_t scratch[SCRATCH] __attribute__((aligned(4)));
static int8_t out[OUT];
int main(void)
{
    eb_bench_begin();
    eb_tfl_conv2d_opt(&p0, x0, w0, b0, m0, s0, out, scratch);
    eb_bench_end();
    return memcmp(out, e0, OUT) != 0;
}
"""


@needs_m4
@pytest.mark.parametrize("label", list(M4_BENCH))
def test_m4_instructions_per_mac(m4_build, label):  # noqa: F811
    spec, bound, cycle_bound = M4_BENCH[label]
    case = m4_case({"kind": "pointwise", **spec}, 1, pruned=False)
    p = case["params"]
    source = m4_source([("conv", case)]).split("static int16_t scratch")[0] + BENCH_MAIN
    elf = build_tfl(m4_build, f"tfl_bench_{list(M4_BENCH).index(label)}", source)
    assert run_qemu(elf).returncode == 0, "the optimized kernel differs from the reference"
    sym = symbol_addresses(elf)
    count = count_with_plugin(m4_build, elf, sym["eb_bench_begin"], sym["eb_bench_end"])
    assert count is not None, "the insn_count plugin did not build or run"
    macs = p["out_c"] * p["out_h"] * p["out_w"] * (p["in_c"] // p["groups"]) * p["k_h"] * p["k_w"]
    start, stop = sym["eb_bench_begin"], sym["eb_bench_end"]
    cycles = int((m4_build / f"count_{start:x}_{stop:x}.txt").read_text().split()[1])
    print(f"\n{label}: {count / macs:.3f} instructions, {cycles / macs:.3f} cycles per MAC")
    assert count / macs <= bound, f"{label}: {count / macs:.3f} instructions per MAC"
    assert cycles / macs <= cycle_bound, f"{label}: {cycles / macs:.3f} cycles per MAC"
