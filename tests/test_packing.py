"""Packed 1-, 2- and 4-bit weights (edgebuild/core/packing.py; the layout in eb_kernels.h):

* the Python packing round-trips and takes the bytes the flash budget counts;
* the C unpacking (eb_unpack_weights, eb_packed_weight) reads exactly what Python packs;
* every kernel given packed weights — reference, optimized (SMLAD, the depthwise path
  too), tiled (unpacked into L1) and transposed — is bit-identical to the reference kernel
  given the same weights one per byte, on hypothesis-drawn shapes (odd channel counts,
  strides, padding, dilation, groups), on the host and on the Cortex-M4 under QEMU.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
import test_kernels_opt as kopt
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, I8, I16, I32, ConvParams, Tile

from edgebuild.core import numerics, packing
from edgebuild.ops import im2col_band
from edgebuild.ops.conv_path import DW_TILE_ELEMENTS

KERNELS = kopt.KERNELS
BITS = packing.PACKED_BITS
P8, P16, P32 = (ctypes.POINTER(t) for t in (I8, I16, I32))
PROBE = """#include "eb_kernels_opt.h"
#include "eb_tiling.h"
static int16_t scratch[1 << 14] __attribute__((aligned(4)));
static void k_conv(const eb_conv_params *p, const int8_t *in, const int8_t *w, const int32_t *b,
                   void *out)
{
    eb_conv2d_opt(p, in, w, b, (int8_t *)out, scratch);
}
static void k_convt(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                    const int32_t *b, void *out)
{
    eb_conv_transpose2d(p, in, w, b, (int8_t *)out);
}
static void k_linear(int n, int m, const int8_t *in, const int8_t *w, const int32_t *b, void *out)
{
    eb_linear_opt(n, m, in, w, b, -7, EB_ROUND_HALF_UP, EB_ACT_NONE, (int8_t *)out, scratch);
}
int eb_test_row_bytes(int n, int b) { return EB_PACKED_ROW_BYTES(n, b); }
int32_t eb_test_conv_slot(const eb_conv_params *p, const eb_tile *t, int has_bias);
int32_t eb_test_convt_slot(const eb_conv_params *p, const eb_tile *t, int has_bias);
extern int32_t eb_conv_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                       int has_bias);
extern int32_t eb_conv_transpose_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t,
                                                 int wide, int has_bias);
extern int32_t eb_linear_tile_slot_bytes(int in_f, const eb_tile *t, int wide, int has_bias);
int32_t eb_test_conv_slot(const eb_conv_params *p, const eb_tile *t, int has_bias)
{
    return eb_conv_tile_slot_bytes(p, t, 0, has_bias);
}
int32_t eb_test_convt_slot(const eb_conv_params *p, const eb_tile *t, int has_bias)
{
    return eb_conv_transpose_tile_slot_bytes(p, t, 0, has_bias);
}
void eb_test_conv_tiled(const eb_conv_params *p, const eb_tile *t, const int8_t *in,
                        const int8_t *w, const int32_t *b, int8_t *out, int8_t *l1)
{
    eb_conv2d_tiled(p, t, k_conv, 0, in, w, b, out, l1);
}
void eb_test_convt_tiled(const eb_conv_params *p, const eb_tile *t, const int8_t *in,
                         const int8_t *w, const int32_t *b, int8_t *out, int8_t *l1)
{
    eb_conv_transpose2d_tiled(p, t, k_convt, 0, in, w, b, out, l1);
}
void eb_test_linear_tiled(int in_f, int out_f, int bits, const eb_tile *t, const int8_t *in,
                          const int8_t *w, const int32_t *b, int8_t *out, int8_t *l1)
{
    eb_linear_tiled_packed(in_f, out_f, bits, t, k_linear, 0, in, w, b, out, l1);
}
int32_t eb_test_linear_slot(int in_f, const eb_tile *t, int has_bias)
{
    return eb_linear_tile_slot_bytes(in_f, t, 0, has_bias);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_packed")
    (build / "probe.c").write_text(PROBE)
    shared = build / "libeb_packed.so"
    result = subprocess.run(
        [kopt.GCC, *kopt.CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}",
         *(str(KERNELS / name) for name in ("eb_kernels.c", "eb_kernels_opt.c", "eb_dw_opt.c",
                                            "eb_tiling.c")),
         str(build / "probe.c"), "-o", str(shared)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    conv = [ctypes.POINTER(ConvParams), P8, P8, P32]
    lin = [ctypes.c_int, ctypes.c_int]
    data = [P8, P8, P32]
    q = [ctypes.c_int] * 3
    tiled = [ctypes.POINTER(ConvParams), ctypes.POINTER(Tile), P8, P8, P32, P8, P8]
    for name, args in {
            "eb_conv2d": [*conv, P8], "eb_conv2d_wide": [*conv, P32],
            "eb_conv2d_opt": [*conv, P8, P16], "eb_conv2d_wide_opt": [*conv, P32, P16],
            "eb_conv_transpose2d": [*conv, P8], "eb_conv_transpose2d_wide": [*conv, P32],
            "eb_linear": [*lin, *data, *q, P8], "eb_linear_wide": [*lin, *data, P32],
            "eb_linear_packed": [*lin, ctypes.c_int, *data, *q, P8],
            "eb_linear_packed_wide": [*lin, ctypes.c_int, *data, P32],
            "eb_linear_packed_opt": [*lin, ctypes.c_int, *data, *q, P8, P16],
            "eb_linear_packed_wide_opt": [*lin, ctypes.c_int, *data, P32, P16],
            "eb_unpack_weights": [I32, I32, ctypes.c_int, P8, P8],
            "eb_test_conv_tiled": tiled, "eb_test_convt_tiled": tiled,
            "eb_test_linear_tiled": [*lin, ctypes.c_int, ctypes.POINTER(Tile), P8, P8, P32, P8,
                                     P8]}.items():
        getattr(so, name).argtypes = args
        getattr(so, name).restype = None
    for name in ("eb_test_conv_slot", "eb_test_convt_slot"):
        getattr(so, name).argtypes = [ctypes.POINTER(ConvParams), ctypes.POINTER(Tile),
                                      ctypes.c_int]
        getattr(so, name).restype = I32
    so.eb_test_linear_slot.argtypes = [ctypes.c_int, ctypes.POINTER(Tile), ctypes.c_int]
    so.eb_test_linear_slot.restype = I32
    return so


def weights(rng, shape, bits: int) -> np.ndarray:
    """b-bit weights with both rails present."""
    low, high = numerics.weight_limits(bits)
    w = rng.integers(low, high + 1, size=shape)
    flat = w.reshape(-1)
    flat[0], flat[-1] = low, high
    return w.astype(np.int8)


def packed_of(w: np.ndarray, bits: int) -> np.ndarray:
    return np.ascontiguousarray(packing.pack(w, bits).view(np.int8))


# ---- Python: the layout -------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(bits=st.sampled_from(BITS), rows=st.integers(1, 9), cols=st.integers(1, 70),
       seed=st.integers(0, 2**32 - 1))
def test_pack_unpack_round_trip(bits, rows, cols, seed):
    w = weights(np.random.default_rng(seed), (rows, cols), bits)
    data = packing.pack(w, bits)
    assert data.dtype == np.uint8
    assert data.size == packing.stored_bytes(w.shape, bits) == rows * 4 * -(-cols * bits // 32)
    np.testing.assert_array_equal(packing.unpack(data, w.shape, bits), w)
    # rows start on word boundaries, and the padding is zero
    row_bytes = packing.row_bytes(cols, bits)
    for r in range(rows):
        np.testing.assert_array_equal(
            packing.unpack(data[r * row_bytes:(r + 1) * row_bytes], (1, cols), bits), w[r:r + 1])
    padded = packing.unpack(data, (rows, row_bytes * 8 // bits), bits)
    assert not padded[:, cols:].any()


def test_layout_examples():
    """The documented layout, byte by byte: byte t of a word holds weights t, t + 4, ...
    from its low bits up, two's complement."""
    assert list(packing.pack(np.arange(-4, 4).reshape(1, 8), 4)) == [0x0C, 0x1D, 0x2E, 0x3F]
    two = np.array([[-2, -1, 0, 1, 1, 0, -1, -2, 0, 0, 0, 0, -2, -2, -2, -2]])
    assert list(packing.pack(two, 2)) == [0b10_00_01_10, 0b10_00_00_11, 0b10_00_11_00,
                                          0b10_00_10_01]
    one = np.zeros((1, 32), dtype=np.int64)
    one[0, [0, 5, 31]] = -1  # byte 0 bit 0; byte 1 bit 1; byte 3 bit 7
    assert list(packing.pack(one, 1)) == [0x01, 0x02, 0x00, 0x80]
    assert list(packing.pack(np.array([[7, -8, 3]]), 4)) == [0x07, 0x08, 0x03, 0x00]


def test_stored_bytes_scale_with_the_width():
    shape = (32, 16, 3, 3)  # rows of 144 weights: whole words at every width
    assert [packing.stored_bytes(shape, b) for b in (8, 4, 2, 1)] == \
        [32 * 144, 32 * 72, 32 * 36, 32 * 20]
    with pytest.raises(ValueError, match="outside the 2-bit range"):
        packing.pack(np.array([[2]]), 2)


# ---- C: the unpacking reads what Python packs ---------------------------------------------

@settings(max_examples=100, deadline=None)
@given(bits=st.sampled_from(BITS), rows=st.integers(1, 7), cols=st.integers(1, 90),
       seed=st.integers(0, 2**32 - 1))
def test_c_unpack_matches_python_packing(lib, bits, rows, cols, seed):
    w = weights(np.random.default_rng(seed), (rows, cols), bits)
    data = packed_of(w, bits)
    out = kopt.guarded(rows * cols, np.int8)
    lib.eb_unpack_weights(rows, cols, bits, kopt.ptr(data, I8), kopt.ptr(out, I8))
    np.testing.assert_array_equal(kopt.checked(out, rows * cols, "eb_unpack_weights"),
                                  w.reshape(-1))
    assert lib.eb_test_row_bytes(cols, bits) == packing.row_bytes(cols, bits)


# ---- kernels: packed weights == the same weights one per byte -----------------------------

@st.composite
def conv_layers(draw) -> dict:
    """Dense, depthwise (the optimized kernel's direct path) and grouped layers, 1-D and
    2-D, odd channel counts, strides, padding, dilation; a packed width."""
    in_c = draw(st.integers(1, 13))
    layout = draw(st.sampled_from(["dense", "depthwise", "grouped"]))
    if layout == "dense":
        groups, out_c = 1, draw(st.integers(1, 11))
    elif layout == "depthwise":
        groups, out_c = in_c, in_c * draw(st.sampled_from([1, 1, 2]))
    else:
        groups = draw(st.sampled_from([d for d in range(1, in_c + 1) if in_c % d == 0]))
        out_c = groups * draw(st.integers(1, 3))
    one_d = draw(st.booleans())
    axis = st.tuples(st.integers(1, 12), st.integers(1, 5), st.integers(1, 3),
                     st.integers(0, 3), st.integers(1, 2))
    (in_h, k_h, s_h, p_h, d_h) = (1, 1, 1, 0, 1) if one_d else draw(axis)
    (in_w, k_w, s_w, p_w, d_w) = draw(axis)
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c, "k_h": k_h, "k_w": k_w,
           "stride_h": s_h, "stride_w": s_w, "pad_h": p_h, "pad_w": p_w, "dil_h": d_h,
           "dil_w": d_w, "groups": groups, "shift": draw(st.integers(-14, 2)),
           "rounding": draw(st.integers(0, 1)), "act": draw(st.integers(0, 2)),
           "bits": draw(st.sampled_from(BITS))}
    cfg["out_h"] = kopt.conv_out(in_h, k_h, s_h, p_h, d_h)
    cfg["out_w"] = kopt.conv_out(in_w, k_w, s_w, p_w, d_w)
    assume(cfg["out_h"] >= 1 and cfg["out_w"] >= 1)
    return cfg


def params(cfg: dict, wbits: int) -> ConvParams:
    return ConvParams(**{k: cfg[k] for k in (*CONV_FIELDS, "shift", "rounding", "act")},
                      wbits=wbits)


def conv_data(cfg: dict, seed: int, with_bias: bool, rows_first: str = "out_c"):
    rng = np.random.default_rng(seed)
    x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    if rows_first == "out_c":
        shape = (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"])
    else:  # a transposed convolution: [in][out / groups][k_h][k_w]
        shape = (cfg["in_c"], cfg["out_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"])
    w = weights(rng, shape, cfg["bits"])
    bias = kopt.random_bias(rng, cfg["out_c"]) if with_bias else None
    return x, w, bias


def run_conv(lib, name: str, cfg: dict, wbits: int, x, w, bias, wide: bool,
             scratch: bool = False) -> np.ndarray:
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    out = kopt.guarded(count, dtype)
    args = [ctypes.byref(params(cfg, wbits)), kopt.ptr(x, I8), kopt.ptr(w, I8),
            kopt.ptr(bias, I32), kopt.ptr(out, ctype)]
    if scratch:
        elements = _scratch_elements(cfg)
        buf = kopt.scratch_buffer(elements)
        args.append(kopt.ptr(buf, I16))
    getattr(lib, name)(*args)
    if scratch:
        kopt.check_scratch(buf, elements, name)
    return kopt.checked(out, count, name)


@settings(max_examples=250, deadline=None)
@given(cfg=conv_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_conv_packed_equals_int8_reference(lib, cfg, seed, with_bias):
    x, w, bias = conv_data(cfg, seed, with_bias)
    data, bits = packed_of(w, cfg["bits"]), cfg["bits"]
    for wide, suffix in ((False, ""), (True, "_wide")):
        expected = run_conv(lib, f"eb_conv2d{suffix}", cfg, 0, x, w, bias, wide)
        reference = run_conv(lib, f"eb_conv2d{suffix}", cfg, bits, x, data, bias, wide)
        optimized = run_conv(lib, f"eb_conv2d{suffix}_opt", cfg, bits, x, data, bias, wide,
                             scratch=True)
        np.testing.assert_array_equal(reference, expected, err_msg=f"reference {cfg}")
        np.testing.assert_array_equal(optimized, expected, err_msg=f"optimized {cfg}")


def test_grouped_packed_conv_on_the_gemm_equals_reference(lib):
    """Groups of more input channels than the tile kernel takes (9 a group): the im2col path,
    whose blocks index the packed rows and the biases of every group from the layer's
    (each group's offset added once, not twice: the biases a group on), padded (its band) and
    not, every packed width, with and without biases."""
    for bits in BITS:
        for pad in (0, 1):
            cfg = {"in_c": 18, "in_h": 6, "in_w": 9, "out_c": 4, "k_h": 3, "k_w": 3,
                   "stride_h": 1, "stride_w": 1, "pad_h": pad, "pad_w": pad, "dil_h": 1,
                   "dil_w": 1, "groups": 2, "shift": -6, "rounding": 0, "act": 0, "bits": bits}
            cfg["out_h"], cfg["out_w"] = 6 + 2 * pad - 2, 9 + 2 * pad - 2
            for with_bias in (False, True):
                x, w, bias = conv_data(cfg, 7 + bits + pad, with_bias)
                expected = run_conv(lib, "eb_conv2d", cfg, 0, x, w, bias, False)
                optimized = run_conv(lib, "eb_conv2d_opt", cfg, bits, x,
                                     packed_of(w, bits), bias, False, scratch=True)
                np.testing.assert_array_equal(optimized, expected, err_msg=str(cfg))


@settings(max_examples=150, deadline=None)
@given(bits=st.sampled_from(BITS), in_f=st.integers(1, 300), out_f=st.integers(1, 19),
       seed=st.integers(0, 2**32 - 1), with_bias=st.booleans(),
       quant=st.tuples(st.integers(-14, 2), st.integers(0, 1), st.integers(0, 2)))
def test_linear_packed_equals_int8_reference(lib, bits, in_f, out_f, seed, with_bias, quant):
    rng = np.random.default_rng(seed)
    x = kopt.int8_data(rng, (in_f,))
    w = weights(rng, (out_f, in_f), bits)
    bias = kopt.random_bias(rng, out_f) if with_bias else None
    data = packed_of(w, bits)
    for wide in (False, True):
        dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
        outs = {}
        for name, arr, packed_args in (("eb_linear", w, []), ("eb_linear_packed", data, [bits]),
                                       ("eb_linear_packed_opt", data, [bits])):
            name = name.replace("_opt", "_wide_opt") if wide and name.endswith("_opt") else \
                name + ("_wide" if wide else "")
            out = kopt.guarded(out_f, dtype)
            args = [in_f, out_f, *packed_args, kopt.ptr(x, I8), kopt.ptr(arr, I8),
                    kopt.ptr(bias, I32), *([] if wide else list(quant)), kopt.ptr(out, ctype)]
            if name.endswith("_opt"):
                buf = kopt.scratch_buffer((in_f + 3) // 4 * 4)
                args.append(kopt.ptr(buf, I16))
            getattr(lib, name)(*args)
            outs[name] = kopt.checked(out, out_f, name)
        first, *others = outs.values()
        for name, got in zip(list(outs)[1:], others, strict=True):
            np.testing.assert_array_equal(got, first, err_msg=f"{name} in_f={in_f} bits={bits}")


@st.composite
def transposed_layers(draw) -> dict:
    in_c = draw(st.integers(1, 7))
    groups = draw(st.sampled_from([d for d in range(1, in_c + 1) if in_c % d == 0]))
    out_c = groups * draw(st.integers(1, 3))
    k_h, k_w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    s_h, s_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    in_h, in_w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    p_h, p_w = draw(st.integers(0, k_h - 1)), draw(st.integers(0, k_w - 1))
    cfg = {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c, "k_h": k_h, "k_w": k_w,
           "stride_h": s_h, "stride_w": s_w, "pad_h": p_h, "pad_w": p_w, "dil_h": 1,
           "dil_w": 1, "groups": groups, "shift": draw(st.integers(-12, 0)), "rounding": 0,
           "act": draw(st.integers(0, 2)), "bits": draw(st.sampled_from(BITS))}
    cfg["out_h"] = (in_h - 1) * s_h - 2 * p_h + k_h
    cfg["out_w"] = (in_w - 1) * s_w - 2 * p_w + k_w
    assume(cfg["out_h"] >= 1 and cfg["out_w"] >= 1)
    return cfg


@settings(max_examples=80, deadline=None)
@given(cfg=transposed_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_transposed_packed_equals_int8_reference(lib, cfg, seed, with_bias):
    """Rows of a transposed convolution's packed weights are its input channels."""
    x, w, bias = conv_data(cfg, seed, with_bias, rows_first="in_c")
    data = packed_of(w, cfg["bits"])
    for wide, name in ((False, "eb_conv_transpose2d"), (True, "eb_conv_transpose2d_wide")):
        np.testing.assert_array_equal(
            run_conv(lib, name, cfg, cfg["bits"], x, data, bias, wide),
            run_conv(lib, name, cfg, 0, x, w, bias, wide), err_msg=str(cfg))


# ---- tiled: packed weights unpacked into L1 -----------------------------------------------

def run_tiled(lib, name: str, slot: str, cfg: dict, wbits: int, x, w, bias, tile: Tile):
    p = params(cfg, wbits)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    l1 = np.zeros(getattr(lib, slot)(ctypes.byref(p), ctypes.byref(tile), bias is not None)
                  * (2 if tile.double_buffer else 1) + 8, dtype=np.int32).view(np.int8)
    out = kopt.guarded(count, np.int8)
    getattr(lib, name)(ctypes.byref(p), ctypes.byref(tile), kopt.ptr(x, I8), kopt.ptr(w, I8),
                       kopt.ptr(bias, I32), kopt.ptr(out, I8), kopt.ptr(l1, I8))
    return kopt.checked(out, count, name)


def tile_of(cfg: dict, rows: int, channels: int, double: bool) -> Tile:
    per_group = cfg["out_c"] // cfg["groups"]
    if cfg["groups"] > 1:  # a multiple of out_c / groups
        channels = per_group * max(1, channels // per_group)
    return Tile(rows=max(1, min(rows, cfg["out_h"])), channels=max(1, channels),
                double_buffer=1 if double else 0)


@settings(max_examples=80, deadline=None)
@given(cfg=conv_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans(),
       rows=st.integers(1, 4), channels=st.integers(1, 6), double=st.booleans())
def test_tiled_conv_unpacks_into_l1(lib, cfg, seed, with_bias, rows, channels, double):
    x, w, bias = conv_data(cfg, seed, with_bias)
    expected = run_conv(lib, "eb_conv2d", cfg, 0, x, w, bias, False)
    tile = tile_of(cfg, rows, channels, double)
    got = run_tiled(lib, "eb_test_conv_tiled", "eb_test_conv_slot", cfg, cfg["bits"], x,
                    packed_of(w, cfg["bits"]), bias, tile)
    np.testing.assert_array_equal(got, expected, err_msg=str(cfg))


@settings(max_examples=60, deadline=None)
@given(cfg=transposed_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans(),
       rows=st.integers(1, 4), channels=st.integers(1, 6), double=st.booleans())
def test_tiled_transposed_unpacks_into_l1(lib, cfg, seed, with_bias, rows, channels, double):
    """Channel tiles of a transposed convolution take part of each packed row."""
    x, w, bias = conv_data(cfg, seed, with_bias, rows_first="in_c")
    expected = run_conv(lib, "eb_conv_transpose2d", cfg, 0, x, w, bias, False)
    per_group = cfg["out_c"] // cfg["groups"]
    tile = tile_of(cfg, rows, channels, double)
    if cfg["groups"] > 1 and channels < per_group:  # or a divisor of out_c / groups
        tile.channels = max(d for d in range(1, channels + 1) if per_group % d == 0)
    got = run_tiled(lib, "eb_test_convt_tiled", "eb_test_convt_slot", cfg, cfg["bits"], x,
                    packed_of(w, cfg["bits"]), bias, tile)
    np.testing.assert_array_equal(got, expected, err_msg=str(cfg))


@settings(max_examples=60, deadline=None)
@given(bits=st.sampled_from(BITS), in_f=st.integers(1, 120), out_f=st.integers(1, 13),
       channels=st.integers(1, 5), double=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_tiled_linear_unpacks_into_l1(lib, bits, in_f, out_f, channels, double, seed):
    rng = np.random.default_rng(seed)
    x = kopt.int8_data(rng, (in_f,))
    w = weights(rng, (out_f, in_f), bits)
    bias = kopt.random_bias(rng, out_f)
    expected = kopt.guarded(out_f, np.int8)
    lib.eb_linear(in_f, out_f, kopt.ptr(x, I8), kopt.ptr(w, I8), kopt.ptr(bias, I32), -7,
                  0, 0, kopt.ptr(expected, I8))
    tile = Tile(rows=1, channels=channels, double_buffer=1 if double else 0)
    l1 = np.zeros(lib.eb_test_linear_slot(in_f, ctypes.byref(tile), bias is not None)
                  * (2 if double else 1) + 8, dtype=np.int32).view(np.int8)
    out = kopt.guarded(out_f, np.int8)
    lib.eb_test_linear_tiled(in_f, out_f, bits, ctypes.byref(tile), kopt.ptr(x, I8),
                             kopt.ptr(packed_of(w, bits), I8), kopt.ptr(bias, I32),
                             kopt.ptr(out, I8), kopt.ptr(l1, I8))
    np.testing.assert_array_equal(kopt.checked(out, out_f, "tiled"),
                                  kopt.checked(expected, out_f, "eb_linear"))


# ---- Cortex-M4 under QEMU -----------------------------------------------------------------

M4_CONVS = [  # (in_c, hw, out_c, k, stride, pad, dil, groups, bits)
    (1, 8, 16, 3, 1, 1, 1, 1, 4), (16, 8, 32, 3, 1, 1, 1, 1, 4), (7, 9, 5, 3, 2, 1, 1, 1, 2),
    (6, 7, 9, 5, 1, 2, 2, 1, 1), (8, 9, 8, 3, 1, 1, 1, 8, 4), (5, 10, 10, 5, 2, 2, 1, 5, 2),
    (6, 8, 6, 2, 1, 0, 1, 3, 1), (33, 3, 3, 1, 1, 0, 1, 1, 4), (3, 12, 4, 3, 1, 1, 2, 1, 2),
]
M4_LINEARS = [(128, 10, 4), (37, 5, 2), (3, 4, 1), (200, 9, 1), (96, 7, 4)]


def _dw_scratch(cfg: dict) -> int:
    """int16 scratch of the depthwise padded path's channel copy for cfg (0 for a layer that
    path does not take): ops.dw_spec.padded_bytes, EB_DW_OPT_SCRATCH's rule."""
    from types import SimpleNamespace

    from edgebuild.ops import dw_spec

    if not kopt.padded_path_shape(cfg):
        return 0
    plane = SimpleNamespace(in_w=cfg["in_w"], pad_w=cfg["pad_w"], out_h=cfg["out_h"])
    return (dw_spec.padded_bytes(plane) + 1) // 2  # type: ignore[arg-type]


def _scratch_elements(cfg: dict) -> int:
    """int16 scratch of eb_conv2d(_wide)_opt for cfg, as the plan claims it: the im2col
    columns (EB_CONV_OPT_SCRATCH), the 3x3 padded path's copy, the tile kernel's patch or
    the im2col path's padded band (ops.im2col_band)."""
    cols = 4 * -(-cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"] // 4) * 4
    return max(cols, _dw_scratch(cfg),
               DW_TILE_ELEMENTS if kopt.tile_kernel_shape(cfg) else 0,
               im2col_band.elements(kopt.plane_of(cfg)))


def m4_program(lib) -> str:
    """Packed conv and linear cases with the host reference's (int8 weights) outputs; the
    firmware runs the DSP build of the optimized kernels on the packed weights."""
    parts = ['#include <stdio.h>\n#include "eb_kernels.h"\n#include "eb_kernels_opt.h"\n']
    calls, max_scratch, max_out = [], 16, 16
    rng = np.random.default_rng(20250101)
    for i, (in_c, hw, out_c, k, stride, pad, dil, groups, bits) in enumerate(M4_CONVS):
        cfg = {"in_c": in_c, "in_h": hw, "in_w": hw, "out_c": out_c, "k_h": k, "k_w": k,
               "stride_h": stride, "stride_w": stride, "pad_h": pad, "pad_w": pad,
               "dil_h": dil, "dil_w": dil, "groups": groups, "shift": -8, "rounding": i % 2,
               "act": i % 3, "bits": bits}
        cfg["out_h"] = cfg["out_w"] = kopt.conv_out(hw, k, stride, pad, dil)
        x, w, bias = conv_data(cfg, int(rng.integers(2**32)), i % 3 != 2)
        e8 = run_conv(lib, "eb_conv2d", cfg, 0, x, w, bias, False)
        e32 = run_conv(lib, "eb_conv2d_wide", cfg, 0, x, w, bias, True)
        n, sn = e8.size, _scratch_elements(cfg)
        max_scratch, max_out = max(max_scratch, sn), max(max_out, n)
        fields = ", ".join(str(cfg[f]) for f in (*CONV_FIELDS, "shift", "rounding", "act"))
        parts.append(f"static const eb_conv_params p{i} = {{{fields}, {bits}}};\n")
        parts += [kopt.c_array("int8_t", f"x{i}", x),
                  kopt.c_array("int8_t", f"w{i}", packed_of(w, bits)),
                  kopt.c_array("int8_t", f"e8_{i}", e8), kopt.c_array("int32_t", f"e32_{i}", e32)]
        b = "NULL"
        if bias is not None:
            parts.append(kopt.c_array("int32_t", f"b{i}", bias))
            b = f"b{i}"
        calls.append(f"fill({n}); eb_conv2d_opt(&p{i}, x{i}, w{i}, {b}, out8, scratch);\n"
                     f"bad += check({i}, \"conv\", {n}, {sn}, e8_{i}, NULL);\n"
                     f"fill({n}); eb_conv2d_wide_opt(&p{i}, x{i}, w{i}, {b}, out32, scratch);\n"
                     f"bad += check({i}, \"conv wide\", {n}, {sn}, NULL, e32_{i});\n")
    for j, (in_f, out_f, bits) in enumerate(M4_LINEARS):
        i = 100 + j
        x = kopt.int8_data(rng, (in_f,))
        w = weights(rng, (out_f, in_f), bits)
        bias = kopt.random_bias(rng, out_f)
        e8, e32 = kopt.guarded(out_f, np.int8), kopt.guarded(out_f, np.int32)
        args = [in_f, out_f, kopt.ptr(x, I8), kopt.ptr(w, I8), kopt.ptr(bias, I32)]
        lib.eb_linear(*args, -7, 0, 1, kopt.ptr(e8, I8))
        lib.eb_linear_wide(*args, kopt.ptr(e32, I32))
        sn = (in_f + 3) // 4 * 4
        max_scratch, max_out = max(max_scratch, sn), max(max_out, out_f)
        parts += [kopt.c_array("int8_t", f"x{i}", x),
                  kopt.c_array("int8_t", f"w{i}", packed_of(w, bits)),
                  kopt.c_array("int8_t", f"e8_{i}", e8[:out_f]),
                  kopt.c_array("int32_t", f"e32_{i}", e32[:out_f])]
        b = "NULL"
        if bias is not None:
            parts.append(kopt.c_array("int32_t", f"b{i}", bias))
            b = f"b{i}"
        a = f"{in_f}, {out_f}, {bits}, x{i}, w{i}, {b}"
        calls.append(f"fill({out_f}); eb_linear_packed_opt({a}, -7, 0, 1, out8, scratch);\n"
                     f"bad += check({i}, \"linear\", {out_f}, {sn}, e8_{i}, NULL);\n"
                     f"fill({out_f}); eb_linear_packed_wide_opt({a}, out32, scratch);\n"
                     f"bad += check({i}, \"linear wide\", {out_f}, {sn}, NULL, e32_{i});\n")
    parts.append(f"#define SCRATCH {max_scratch}\n#define OUT {max_out}\n" + kopt.M4_MAIN)
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("packed weights on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


@kopt.needs_m4
def test_m4_packed_equals_reference_under_qemu(lib, tmp_path):
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = (kopt.PROJECT / "link.ld.j2").read_text()
    (tmp_path / "link.ld").write_text(env.from_string(template).render(**kopt.LINK_VARS))
    shutil.copy(kopt.PROJECT / "startup_m4.c", tmp_path / "startup_m4.c")
    elf = kopt.build_m4(tmp_path, "packed_kat", m4_program(lib))
    result = kopt.run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "packed weights on M4: 0 mismatching calls" in result.stdout


# ---- end to end: a 4-bit build -------------------------------------------------------------

E2E_MANIFEST = """\
name: {name}
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu}}
    - {{name: conv2, op: conv2d, out: 32, kernel: 3, pad: 1, act: relu, pool: {{mode: max, size: 2}}}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: 2, batch: 64}}
qat: {{weight_bits: {bits}, epochs: 1}}
target: {{device: cortex-m4, memory: {{l1: 16KiB, l2: 128KiB, flash: 512KiB}}}}
"""


def weight_array_bytes(weights_c: str) -> int:
    """The bytes of weights.c's weight arrays (`<name>_w_<layer>[N]`, int8: N bytes)."""
    import re

    return sum(int(n) for n in re.findall(r"const int8_t \w+_w_\w+\[(\d+)\]", weights_c))


@pytest.mark.slow
def test_4bit_build_stores_half_the_weight_bytes(tmp_path):
    """The same model at 8 and 4 bits, built through the known-answer test: the 4-bit
    weights.c holds <= 55% of the 8-bit weight bytes, the plan, kat.json and report.json
    count them so, and the KAT passes on the host and the M4 (0 mismatches)."""
    import json

    from conftest import build_json

    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for bits in (8, 4):
        (manifests / f"d{bits}.yaml").write_text(E2E_MANIFEST.format(name=f"d{bits}", bits=bits))
    build_json(tmp_path, "--cache-dir", str(tmp_path / "cache"))
    found = {}
    for bits in (8, 4):
        out = tmp_path / "build" / f"d{bits}"
        weights_c = (out / "codegen" / "model" / "weights.c").read_text()
        kat = json.loads((out / "kat" / "kat.json").read_text())
        plan = json.loads((out / "plan" / "plan.json").read_text())
        report = json.loads((out / "report.json").read_text())
        assert kat["c_vs_reference"]["mismatches"] == 0
        assert kat["cortex_m4"]["kat"] == "pass", kat["cortex_m4"]
        assert ("packed" in weights_c) == (bits == 4)
        assert {r["layer"]: r["weight_bytes"] for r in kat["cortex_m4"]["layers"]} == \
            {s["layer"]: s.get("weight_bytes", 0) for s in plan["steps"]}
        stored = {s["layer"]: s["weight_bytes"] for s in plan["steps"] if "weight_bytes" in s}
        assert sum(stored.values()) == plan["weight_bytes"] == \
            report["metrics"]["memory"]["weight_bytes"]
        found[bits] = (weight_array_bytes(weights_c), plan["weight_bytes"])
    assert found[4][0] <= 0.55 * found[8][0], found  # the weights alone
    assert found[4][1] <= 0.55 * found[8][1], found  # with the int32 biases
