"""The optimized pointwise convolution (templates/kernels/eb_pw_opt.c) against the reference
eb_conv2d(_wide) (eb_kernels.c), bit for bit:

* host: both files in one shared library (the portable emulation of SMLAD/SXTB16 runs the
  same algorithm) on hypothesis-drawn 1x1 layers -- odd and even channel counts (every
  in_c % 16), pixel counts that are not a multiple of 4, every rounding, activation and
  shift (left shifts too), biases up to the int32 limits, int8 and packed 1-, 2-, 4-bit
  weights, narrow and wide outputs -- and on shapes that are not pointwise (the kernel
  then runs the reference itself);
* Cortex-M4 under QEMU (when arm-none-eabi-gcc and qemu-system-arm are installed): a
  firmware with a few such layers' inputs and the host reference outputs runs the
  DSP-instruction build and exits non-zero on any mismatch;
* instructions and estimated cycles per MAC under QEMU (the insn_count plugin) on the
  DS-CNN keyword spotter's pointwise layers, against the im2col path of eb_conv2d_opt and
  the bounds below.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import test_kernels_opt as kopt
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import CONV_FIELDS, I8, I16, I32, ConvParams, Tile

from edgebuild.core import numerics, packing

KERNELS = kopt.KERNELS
SEED = 20240920
P8, P16, P32 = (ctypes.POINTER(t) for t in (I8, I16, I32))
PROBE = """#include <stddef.h>
#include "eb_kernels_opt.h"
#include "eb_pw_opt.h"
#include "eb_tiling.h"
int eb_test_pw_scratch(int in_c) { return EB_PW_OPT_SCRATCH(in_c); }
int eb_test_cols_scratch(int pixels, int in_c) { return EB_CONV_COLS_SCRATCH(pixels, in_c, 1, 1); }
extern int32_t eb_conv_tile_slot_bytes(const eb_conv_params *p, const eb_tile *t, int wide,
                                       int has_bias);
static void k_narrow(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                     const int32_t *b, void *out) { eb_conv2d(p, in, w, b, (int8_t *)out); }
static void k_wide(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                   const int32_t *b, void *out) { eb_conv2d_wide(p, in, w, b, (int32_t *)out); }
/* A pointwise layer through the tiled driver on the pointwise column blocks (as the
 * generated EB_CONV2D_TILED_PW does). */
void eb_test_pw_tiled(const eb_conv_params *p, const eb_tile *t, int wide, const int8_t *in,
                      const int8_t *w, const int32_t *b, void *out, int16_t *cols, int8_t *l1)
{
    const eb_cols_kernel k = {eb_pw_cols_build, eb_pw_cols_dot, cols, 0, 0};
    eb_conv2d_tiled_cols(p, t, wide ? k_wide : k_narrow, &k, wide, in, w, b, out, l1);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_pw_opt")
    (build / "probe.c").write_text(PROBE)
    shared = build / "libeb_pw.so"
    result = subprocess.run(
        [kopt.GCC, *kopt.CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_pw_opt.c"), str(KERNELS / "eb_tiling.c"), str(build / "probe.c"),
         "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    conv = [ctypes.POINTER(ConvParams), P8, P8, P32]
    for name, args in {"eb_conv2d": [*conv, P8], "eb_conv2d_wide": [*conv, P32],
                       "eb_conv2d_pw_opt": [*conv, P8, P16],
                       "eb_conv2d_pw_wide_opt": [*conv, P32, P16]}.items():
        getattr(so, name).argtypes = args
        getattr(so, name).restype = None
    tile = ctypes.POINTER(Tile)
    so.eb_conv_tile_slot_bytes.argtypes = [ctypes.POINTER(ConvParams), tile, ctypes.c_int,
                                           ctypes.c_int]
    so.eb_conv_tile_slot_bytes.restype = I32
    so.eb_test_pw_tiled.argtypes = [ctypes.POINTER(ConvParams), tile, ctypes.c_int, P8, P8, P32,
                                    ctypes.c_void_p, P16, P8]
    so.eb_test_pw_tiled.restype = None
    return so


# ---- layers -------------------------------------------------------------------------------

def pw_config(in_c: int, in_h: int, in_w: int, out_c: int, shift: int = -9, rounding: int = 0,
              act: int = 1, wbits: int = 0) -> dict:
    return {"in_c": in_c, "in_h": in_h, "in_w": in_w, "out_c": out_c, "out_h": in_h,
            "out_w": in_w, "k_h": 1, "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 0,
            "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 1, "shift": shift,
            "rounding": rounding, "act": act, "wbits": wbits}


def params_of(cfg: dict) -> ConvParams:
    return ConvParams(**{k: cfg[k] for k in (*CONV_FIELDS, "shift", "rounding", "act", "wbits")})


def layer_weights(rng, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """(weight values [out_c][in_c], the array the kernels read: int8 or packed rows)."""
    bits = cfg["wbits"] or 8
    low, high = numerics.weight_limits(bits)
    shape = (cfg["out_c"], cfg["in_c"])
    w = rng.choice([low, high], size=shape) if rng.random() < 0.15 else \
        rng.integers(low, high + 1, size=shape)
    w.reshape(-1)[[0, -1]] = low, high
    w = w.astype(np.int8)
    stored = np.ascontiguousarray(packing.pack(w, bits).view(np.int8)) if cfg["wbits"] else w
    return w, stored


def run_pair(lib, cfg: dict, x: np.ndarray, stored: np.ndarray, bias: np.ndarray | None,
             wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """(reference, pointwise) outputs, each checked for writes past its end (and the
    pointwise kernel's scratch past EB_PW_OPT_SCRATCH)."""
    params = params_of(cfg)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    elements = lib.eb_test_pw_scratch(cfg["in_c"])
    scratch = kopt.scratch_buffer(elements)
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    ref, opt = kopt.guarded(count, dtype), kopt.guarded(count, dtype)
    name = "eb_conv2d_wide" if wide else "eb_conv2d"
    args = (ctypes.byref(params), kopt.ptr(x, I8), kopt.ptr(stored, I8), kopt.ptr(bias, I32))
    getattr(lib, name)(*args, kopt.ptr(ref, ctype))
    opt_name = "eb_conv2d_pw_wide_opt" if wide else "eb_conv2d_pw_opt"
    getattr(lib, opt_name)(*args, kopt.ptr(opt, ctype), kopt.ptr(scratch, I16))
    kopt.check_scratch(scratch, elements, opt_name)
    return kopt.checked(ref, count, name), kopt.checked(opt, count, opt_name)


def assert_equal(lib, cfg, x, stored, bias) -> None:
    for wide in (True, False):
        ref, opt = run_pair(lib, cfg, x, stored, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


def test_scratch_macro_is_the_convs(lib):
    """The op's scratch facet sizes the scratch as eb_conv2d_opt's: EB_PW_OPT_SCRATCH fits."""
    for in_c in (1, 3, 4, 5, 16, 17, 48, 255):
        assert lib.eb_test_pw_scratch(in_c) == 4 * ((in_c + 3) // 4 * 4)


@st.composite
def pw_layers(draw) -> dict:
    in_c = draw(st.one_of(st.integers(1, 20), st.integers(21, 70)))
    in_h, in_w = draw(st.integers(1, 9)), draw(st.integers(1, 13))
    return pw_config(in_c, in_h, in_w, draw(st.integers(1, 12)),
                     shift=draw(st.integers(-31, 4)), rounding=draw(st.integers(0, 1)),
                     act=draw(st.integers(0, 2)), wbits=draw(st.sampled_from([0, 0, 1, 2, 4])))


@settings(max_examples=300, deadline=None)
@given(cfg=pw_layers(), seed=st.integers(0, 2**32 - 1),
       bias_kind=st.sampled_from(["none", "small", "large", "extreme"]))
def test_pw_opt_random_layers(lib, cfg, seed, bias_kind):
    rng = np.random.default_rng(seed)
    x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    _, stored = layer_weights(rng, cfg)
    room = 2**31 - 1 - cfg["in_c"] * 128 * 128
    magnitude = {"none": 0, "small": 1 << 12, "large": 1 << 24, "extreme": room}[bias_kind]
    bias = None if bias_kind == "none" else \
        rng.integers(-magnitude, magnitude + 1, size=cfg["out_c"]).astype(np.int32)
    if bias_kind == "extreme":  # sums near the int32 limits: the general requantization
        bias[rng.integers(cfg["out_c"])] = room * (1 if rng.random() < 0.5 else -1)
    assert_equal(lib, cfg, x, stored, bias)


# The DS-CNN keyword spotter's pointwise layers, every in_c % 16 class, 1 pixel, in_c 1.
PW_SHAPES = [
    pw_config(32, 12, 25, 32), pw_config(32, 6, 12, 48), pw_config(48, 6, 12, 48),
    pw_config(64, 5, 5, 64, act=0), pw_config(8, 7, 7, 5, act=2), pw_config(17, 3, 5, 3),
    pw_config(35, 1, 1, 7, shift=0), pw_config(1, 4, 9, 6, shift=2), pw_config(3, 1, 3, 2),
    pw_config(4, 2, 2, 1, shift=-31, rounding=1), pw_config(12, 5, 1, 9, shift=-1),
]


@pytest.mark.parametrize("index", range(len(PW_SHAPES)))
@pytest.mark.parametrize("wbits", [0, 4, 2, 1])
def test_pw_opt_shapes(lib, index, wbits):
    rng = np.random.default_rng([SEED, index, wbits])
    for rounding in (0, 1):
        for act in (0, 1, 2):
            cfg = {**PW_SHAPES[index], "rounding": rounding, "act": act, "wbits": wbits}
            x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
            _, stored = layer_weights(rng, cfg)
            bias = None if act == 2 else \
                rng.integers(-(1 << 16), 1 << 16, size=cfg["out_c"]).astype(np.int32)
            assert_equal(lib, cfg, x, stored, bias)


def test_pw_opt_extreme_sums(lib):
    """Every x and w at -128 (the largest sums), biases at the edge of the fast
    requantization's room and past it: still equal."""
    cfg = pw_config(20, 3, 4, 4, shift=-20, rounding=0)
    room = 2**31 - 1 - (1 << 19) - 20 * 128 * 128
    x = np.full((20, 3, 4), -128, dtype=np.int8)
    for bias in (np.array([room, -room, 5, 0], dtype=np.int32),
                 np.array([room + 1, -room - 1, 2**31 - 1 - 20 * 128 * 128, 0], dtype=np.int32)):
        for w_value in (-128, 127):
            w = np.full((4, 20), w_value, dtype=np.int8)
            for act in range(3):
                for shift in (-20, -31, -1, 0):
                    assert_equal(lib, {**cfg, "act": act, "shift": shift}, x, w, bias)


def test_pw_opt_not_pointwise_runs_the_reference(lib):
    """Shapes the code generator never sends here (3x3, stride 2, padding, groups): the
    kernel computes them as the reference does."""
    rng = np.random.default_rng([SEED, 3])
    for change in ({"k_h": 3, "k_w": 3, "pad_h": 1, "pad_w": 1}, {"stride_h": 2, "out_h": 3},
                   {"pad_w": 1, "out_w": 9}, {"groups": 2, "in_c": 4, "out_c": 4}):
        cfg = {**pw_config(6, 5, 7, 4), **change}
        x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
        w = kopt.int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                   cfg["k_w"]))[0]
        assert_equal(lib, cfg, x, w, None)


def test_unaligned_inputs_and_weights(lib):
    """Inputs and int8 weights at odd addresses (generated int8 arrays are byte-aligned)."""
    rng = np.random.default_rng([SEED, 4])
    cfg = pw_config(21, 3, 5, 6, shift=-8)
    for offset in (1, 2, 3):
        xb, wb = np.zeros(21 * 15 + offset, np.int8), np.zeros(6 * 21 + offset, np.int8)
        x, w = xb[offset:], wb[offset:]
        x[:] = kopt.int8_data(rng, x.shape)
        w[:] = kopt.int_weights(rng, w.shape)[0]
        assert_equal(lib, cfg, x.reshape(21, 3, 5), w, None)


# ---- tiled through L1: eb_conv2d_tiled_cols on eb_pw_cols_build / eb_pw_cols_dot ------------

@settings(max_examples=150, deadline=None)
@given(cfg=pw_layers(), seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 9),
       channels=st.integers(1, 12), double_buffer=st.booleans(), with_bias=st.booleans())
def test_pw_tiled_cols_equal_reference(lib, cfg, seed, rows, channels, double_buffer,
                                       with_bias):
    """Row tiles x channel tiles of a pointwise layer (packed weights are staged into L1 as
    int8) against the reference kernel on the whole layer."""
    rng = np.random.default_rng(seed)
    x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    _, stored = layer_weights(rng, cfg)
    bias = rng.integers(-(1 << 20), 1 << 20, size=cfg["out_c"]).astype(np.int32) \
        if with_bias else None
    params, tile = params_of(cfg), Tile(rows, channels, int(double_buffer))
    count = cfg["out_c"] * cfg["in_h"] * cfg["in_w"]
    for wide in (True, False):
        slot = lib.eb_conv_tile_slot_bytes(ctypes.byref(params), ctypes.byref(tile), int(wide),
                                           int(bias is not None))
        l1 = np.full((2 if double_buffer else 1) * slot + 16, 0x5A, dtype=np.int8)
        elements = lib.eb_test_cols_scratch(min(rows, cfg["in_h"]) * cfg["in_w"], cfg["in_c"])
        cols = kopt.scratch_buffer(elements)
        dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
        ref, out = kopt.guarded(count, dtype), kopt.guarded(count, dtype)
        args = (kopt.ptr(x, I8), kopt.ptr(stored, I8), kopt.ptr(bias, I32))
        getattr(lib, "eb_conv2d_wide" if wide else "eb_conv2d")(
            ctypes.byref(params), *args, kopt.ptr(ref, ctype))
        lib.eb_test_pw_tiled(ctypes.byref(params), ctypes.byref(tile), int(wide), *args,
                             out.ctypes.data, kopt.ptr(cols, I16), kopt.ptr(l1, I8))
        kopt.check_scratch(cols, elements, "eb_pw_cols_build")
        assert (l1[-16:] == 0x5A).all(), "the tiled pass wrote past its L1 slots"
        np.testing.assert_array_equal(kopt.checked(out, count, "tiled"),
                                      kopt.checked(ref, count, "reference"),
                                      err_msg=f"wide={wide} {cfg} tile {rows}x{channels}")


# ---- Cortex-M4 under QEMU ------------------------------------------------------------------

@pytest.fixture(scope="module")
def m4_build(tmp_path_factory):
    """startup_m4.c and the rendered link.ld (as test_kernels_opt's fixture of that name)."""
    jinja2 = pytest.importorskip("jinja2")
    build = tmp_path_factory.mktemp("eb_pw_m4")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = (kopt.PROJECT / "link.ld.j2").read_text()
    (build / "link.ld").write_text(env.from_string(template).render(**kopt.LINK_VARS))
    shutil.copy(kopt.PROJECT / "startup_m4.c", build / "startup_m4.c")
    return build


def m4_program(lib, cases) -> str:
    parts = ['#include <stdio.h>\n#include "eb_kernels.h"\n#include "eb_pw_opt.h"\n']
    calls, max_scratch, max_out = [], 16, 16
    for i, (cfg, x, stored, bias) in enumerate(cases):
        ref8, _ = run_pair(lib, cfg, x, stored, bias, wide=False)
        ref32, _ = run_pair(lib, cfg, x, stored, bias, wide=True)
        n, sn = ref8.size, lib.eb_test_pw_scratch(cfg["in_c"])
        max_scratch, max_out = max(max_scratch, sn), max(max_out, n)
        fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act",
                                                 "wbits"))
        parts.append(f"static const eb_conv_params p{i} = {{{fields}}};\n")
        parts += [kopt.c_array("int8_t", f"x{i}", x), kopt.c_array("int8_t", f"w{i}", stored),
                  kopt.c_array("int8_t", f"e8_{i}", ref8),
                  kopt.c_array("int32_t", f"e32_{i}", ref32)]
        b = "NULL"
        if bias is not None:
            parts.append(kopt.c_array("int32_t", f"b{i}", bias))
            b = f"b{i}"
        calls.append(f"fill({n}); eb_conv2d_pw_opt(&p{i}, x{i}, w{i}, {b}, out8, scratch);\n"
                     f"bad += check({i}, \"pw\", {n}, {sn}, e8_{i}, NULL);\n"
                     f"fill({n}); eb_conv2d_pw_wide_opt(&p{i}, x{i}, w{i}, {b}, out32, "
                     f"scratch);\nbad += check({i}, \"pw wide\", {n}, {sn}, NULL, e32_{i});\n")
    parts.append(f"#define SCRATCH {max_scratch}\n#define OUT {max_out}\n" + kopt.M4_MAIN)
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("eb_pw_opt on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


def build_m4(build: Path, name: str, source: str) -> Path:
    (build / f"{name}.c").write_text(source)
    elf = build / f"{name}.elf"
    result = subprocess.run(
        [kopt.ARM_GCC, *kopt.M4_FLAGS, *kopt.CFLAGS, f"-I{KERNELS}", *kopt.M4_LINK,
         "-Wl,-T," + str(build / "link.ld"), "-o", str(elf), str(build / "startup_m4.c"),
         str(build / f"{name}.c"), str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_kernels_opt.c"), str(KERNELS / "eb_dw_opt.c"),
         str(KERNELS / "eb_pw_opt.c")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


M4_CASES = [(0, 0, 1), (1, 4, 1), (2, 0, 0), (3, 2, 2), (4, 1, 1), (5, 0, 2), (6, 0, 0),
            (7, 4, 1), (8, 0, 1), (9, 0, 0), (10, 2, 0)]  # (PW_SHAPES index, wbits, act)


@kopt.needs_m4
def test_m4_pw_equals_reference_under_qemu(lib, m4_build):
    cases = []
    for n, (index, wbits, act) in enumerate(M4_CASES):
        rng = np.random.default_rng([SEED, 50, n])
        cfg = {**PW_SHAPES[index], "wbits": wbits, "act": act, "rounding": n % 2}
        x = kopt.int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
        _, stored = layer_weights(rng, cfg)
        bias = None if n % 3 == 0 else \
            rng.integers(-(1 << 18), 1 << 18, size=cfg["out_c"]).astype(np.int32)
        cases.append((cfg, x, stored, bias))
    elf = build_m4(m4_build, "pw_kat", m4_program(lib, cases))
    result = kopt.run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout



# ---- instructions and cycles per MAC under QEMU --------------------------------------------

PW_BENCH_MAIN = """
#include <stdio.h>
#include <string.h>
#include "eb_kernels.h"
#include "eb_kernels_opt.h"
#include "eb_pw_opt.h"

static const eb_conv_params layer = {{{fields}}};
static int8_t input[{in_c} * {in_h} * {in_w}];
static int8_t weight[{out_c} * {in_c}];
static int32_t bias[{out_c}];
static int8_t out_ref[{out_c} * {in_h} * {in_w}], out_opt[{out_c} * {in_h} * {in_w}];
static int16_t scratch[EB_PW_OPT_SCRATCH({in_c})] __attribute__((aligned(4)));

volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_im2col_begin(void) {{ eb_bench_marker = 1; }}
__attribute__((noinline)) void eb_bench_im2col_end(void) {{ eb_bench_marker = 2; }}
__attribute__((noinline)) void eb_bench_pw_begin(void) {{ eb_bench_marker = 3; }}
__attribute__((noinline)) void eb_bench_pw_end(void) {{ eb_bench_marker = 4; }}

int main(void)
{{
    uint32_t s = 12345u;
    int i;
    for (i = 0; i < (int)sizeof input; ++i) {{ s = s * 1103515245u + 12345u; input[i] = (int8_t)(s >> 16); }}
    for (i = 0; i < (int)sizeof weight; ++i) {{ s = s * 1103515245u + 12345u; weight[i] = (int8_t)(s >> 16); }}
    for (i = 0; i < {out_c}; ++i) {{ s = s * 1103515245u + 12345u; bias[i] = (int32_t)(s >> 16) - 32768; }}
    eb_bench_im2col_begin();
    eb_conv2d_opt(&layer, input, weight, bias, out_ref, scratch);
    eb_bench_im2col_end();
    eb_bench_pw_begin();
    eb_conv2d_pw_opt(&layer, input, weight, bias, out_opt, scratch);
    eb_bench_pw_end();
    i = memcmp(out_ref, out_opt, sizeof out_ref) != 0;
    printf("bench layer: pointwise %s im2col\\\\n", i ? "DIFFERS FROM" : "equals");
    return i;
}}
"""

# The DS-CNN keyword spotter's pointwise layers (manifests/kws_dscnn.yaml): the bounds on
# the pointwise kernel's instructions and estimated cycles per MAC (room left above what
# was measured, arm-none-eabi-gcc 12.2 -O2: pw1 1.23 / 1.94, pw2 1.21 / 1.90, pw3 1.09 /
# 1.74; eb_conv2d_opt's im2col path 2.41 / 3.68, 2.04 / 3.17, 1.81 / 2.82), and CMSIS-NN's
# figures on the same shapes (benchmarks/cmsis_nn.py, arm_convolve_1x1_s8_fast) for the
# record: the bounds keep the kernel below them.
PW_BENCH = {
    "pw1 32x12x25 -> 32": (pw_config(32, 12, 25, 32), 1.4, 2.2),  # CMSIS-NN 2.70 / 3.14
    "pw2 32x6x12 -> 48": (pw_config(32, 6, 12, 48), 1.4, 2.2),  # CMSIS-NN 2.75 / 3.21
    "pw3 48x6x12 -> 48": (pw_config(48, 6, 12, 48), 1.3, 2.1),  # CMSIS-NN 2.32 / 2.72
}


def count_stretch(build: Path, elf: Path, start: int, stop: int) -> tuple[int, int]:
    """(instructions, estimated cycles) from start to stop (the insn_count plugin)."""
    plugin = build / "insn_count.so"
    if not plugin.exists():
        made = subprocess.run([kopt.GCC, "-shared", "-fPIC", "-O2", "-o", str(plugin),
                               str(kopt.PLUGIN_SRC)], capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
    out = build / f"count_{start:x}_{stop:x}.txt"
    result = kopt.run_qemu(elf, ["-plugin", f"{plugin},start={start:#x},stop={stop:#x},out={out}"])
    assert result.returncode == 0 and out.is_file(), result.stdout + result.stderr
    insns, cycles = out.read_text().split()[:2]
    return int(insns), int(cycles)


@kopt.needs_m4
def test_m4_pw_insn_and_cycles_per_mac(m4_build):
    lines, failures = [], []
    for n, (label, (cfg, max_insn, max_cycles)) in enumerate(PW_BENCH.items()):
        fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act",
                                                 "wbits"))
        elf = build_m4(m4_build, f"pw_bench{n}", PW_BENCH_MAIN.format(**cfg, fields=fields))
        result = kopt.run_qemu(elf)
        assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}"
        sym = kopt.symbol_addresses(elf)
        macs = cfg["out_c"] * cfg["in_c"] * cfg["in_h"] * cfg["in_w"]
        figures = {kind: [v / macs for v in count_stretch(
            m4_build, elf, sym[f"eb_bench_{kind}_begin"], sym[f"eb_bench_{kind}_end"])]
            for kind in ("im2col", "pw")}
        (i_insn, i_cyc), (p_insn, p_cyc) = figures["im2col"], figures["pw"]
        lines.append(f"  {label:20s} {macs:7d} MACs: im2col {i_insn:.2f} insn {i_cyc:.2f} cyc,"
                     f" pointwise {p_insn:.2f} insn {p_cyc:.2f} cyc per MAC")
        if p_insn > max_insn or p_cyc > max_cycles:
            failures.append(f"{label}: {p_insn:.3f} insn, {p_cyc:.3f} cycles per MAC")
    print("\npointwise layers under QEMU (insn_count plugin):\n" + "\n".join(lines))
    assert not failures, failures
