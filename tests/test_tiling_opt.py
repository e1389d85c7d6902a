"""The tiled path with the optimized kernels (eb_tiling.c driving eb_kernels_opt.c, as the
Cortex-M4 projects run it) against the untiled reference kernels, bit for bit: random layers
(1-D columns tiled along time, 2-D, dense, grouped, depthwise, strides, padding, dilation,
odd channel counts) and random L1 budgets, the tile chosen by the planner
(edgebuild/memory/tiling.py) as `edgebuild plan` would. The optimized kernels run as portable
C here (the same algorithm as the DSP build; test_kernels_opt.py checks that the two agree
under QEMU)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import I8, I32, ConvParams, Tile

from edgebuild.memory import tiling

KERNELS = Path(__file__).resolve().parent.parent / "templates" / "kernels"
GCC = shutil.which("gcc")
CFLAGS = ["-std=c99", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
          "-DEB_STANDALONE", "-DEB_OPT_PORTABLE"]

pytestmark = pytest.mark.skipif(GCC is None, reason="gcc is not on PATH")

# eb_conv2d_tiled's kernel type takes no scratch: bind it as the generated cnn.c does.
HELPER_C = r"""
#include <stdint.h>
#include "eb_kernels_opt.h"
#include "eb_tiling.h"

static union { int32_t align; int16_t values[1 << 18]; } scratch;

static void k_opt(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                  const int32_t *b, void *out)
{
    eb_conv2d_opt(p, in, w, b, (int8_t *)out, scratch.values);
}

static void k_opt_wide(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                       const int32_t *b, void *out)
{
    eb_conv2d_wide_opt(p, in, w, b, (int32_t *)out, scratch.values);
}

void to_conv_tiled(const eb_conv_params *p, const eb_tile *t, int wide, const int8_t *in,
                   const int8_t *w, const int32_t *b, void *out, int8_t *l1)
{
    eb_conv2d_tiled(p, t, wide ? k_opt_wide : k_opt, wide, in, w, b, out, l1);
}

/* The split path the generated cnn.c takes for a dense conv (EB_CONV2D_TILED_COLS). */
void to_conv_tiled_cols(const eb_conv_params *p, const eb_tile *t, int wide, const int8_t *in,
                        const int8_t *w, const int32_t *b, void *out, int8_t *l1)
{
    static const eb_cols_kernel k = {eb_conv_cols_build, eb_conv_cols_dot, scratch.values,
                                     eb_conv_cols_prepare, eb_conv_cols_run};
    eb_conv2d_tiled_cols(p, t, wide ? k_opt_wide : k_opt, &k, wide, in, w, b, out, l1);
}

/* The same split driver and layout on the reference kernels (the -DEB_REFERENCE_KERNELS
 * build of a tiled Cortex-M4 project). */
void to_conv_tiled_refcols(const eb_conv_params *p, const eb_tile *t, int wide,
                           const int8_t *in, const int8_t *w, const int32_t *b, void *out,
                           int8_t *l1)
{
    static const eb_cols_kernel k = {eb_ref_cols_build, eb_ref_cols_dot, scratch.values, 0, 0};
    eb_conv2d_tiled_cols(p, t, wide ? k_opt_wide : k_opt, &k, wide, in, w, b, out, l1);
}
"""
COLS_SCRATCH = 1 << 18  # int16 elements of the helper's scratch
LINEAR_C = r"""
static int g_shift, g_rounding, g_act, g_wide;

static void lin_dot(int n, int m, const int16_t *c, const int8_t *w, const int32_t *b, void *out)
{
    eb_linear_dot(n, m, c, w, b, g_shift, g_rounding, g_act, g_wide, out);
}

/* The split tiled linear the generated cnn.c takes (EB_LINEAR_TILED_COLS). */
void to_linear_tiled_cols(int in_f, int out_f, const eb_tile *t, int shift, int rounding,
                          int act, int wide, const int8_t *in, const int8_t *w,
                          const int32_t *b, void *out, int8_t *l1)
{
    static const eb_linear_cols k = {eb_linear_expand, lin_dot, scratch.values};
    g_shift = shift;
    g_rounding = rounding;
    g_act = act;
    g_wide = wide;
    eb_linear_tiled_cols(in_f, out_f, 0, t, &k, wide, in, w, b, out, l1);
}
"""

P8, P32 = ctypes.POINTER(I8), ctypes.POINTER(I32)
GUARD = 16


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_tiling_opt")
    (build / "helper.c").write_text(HELPER_C + LINEAR_C)
    shared = build / "libtiling_opt.so"
    result = subprocess.run(
        [GCC, *CFLAGS, f"-I{KERNELS}", *(str(KERNELS / f) for f in (
            "eb_kernels.c", "eb_kernels_opt.c", "eb_dw_opt.c", "eb_tiling.c")), str(build / "helper.c"),
         "-o", str(shared)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    pc, pt = ctypes.POINTER(ConvParams), ctypes.POINTER(Tile)
    so.eb_conv2d.argtypes = [pc, P8, P8, P32, P8]
    so.eb_conv2d_wide.argtypes = [pc, P8, P8, P32, P32]
    so.to_conv_tiled.argtypes = [pc, pt, ctypes.c_int, P8, P8, P32, ctypes.c_void_p, P8]
    so.to_conv_tiled_cols.argtypes = so.to_conv_tiled.argtypes
    so.to_conv_tiled_refcols.argtypes = so.to_conv_tiled.argtypes
    ci = ctypes.c_int
    so.eb_linear.argtypes = [ci, ci, P8, P8, P32, ci, ci, ci, P8]
    so.eb_linear_wide.argtypes = [ci, ci, P8, P8, P32, P32]
    so.to_linear_tiled_cols.argtypes = [ci, ci, pt, ci, ci, ci, ci, P8, P8, P32,
                                        ctypes.c_void_p, P8]
    return so


def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def axis(draw, one_d: bool) -> dict:
    """k, stride, pad, dil, in, out of one spatial axis (all 1 for a 1-D layer's width)."""
    if one_d:
        return {"k": 1, "stride": 1, "pad": 0, "dil": 1, "in": 1, "out": 1}
    k, stride = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    pad, dil = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    size = draw(st.integers(max(1, dil * (k - 1) + 1 - 2 * pad), 30 if one_d else 12))
    return {"k": k, "stride": stride, "pad": pad, "dil": dil, "in": size,
            "out": conv_out(size, k, stride, pad, dil)}


@st.composite
def layers(draw) -> dict:
    """A conv layer as the planner's Window sees it: 1-D layers are columns [C][L][1]."""
    one_d = draw(st.booleans())
    in_c = draw(st.integers(1, 20))
    layout = draw(st.sampled_from(["dense", "dense", "depthwise", "grouped"]))
    if layout == "dense":
        groups, out_c = 1, draw(st.integers(1, 24))
    elif layout == "depthwise":
        groups, out_c = in_c, in_c * draw(st.integers(1, 2))
    else:
        groups = draw(st.sampled_from([d for d in range(1, in_c + 1) if in_c % d == 0]))
        out_c = groups * draw(st.integers(1, max(1, 16 // groups)))
    h, w = axis(draw, False), axis(draw, one_d)
    cfg = {"in_c": in_c, "out_c": out_c, "groups": groups,
           "shift": draw(st.integers(-12, 0)), "rounding": draw(st.integers(0, 1)),
           "act": draw(st.integers(0, 2))}
    for name, ax in (("h", h), ("w", w)):
        cfg.update({f"k_{name}": ax["k"], f"stride_{name}": ax["stride"],
                    f"pad_{name}": ax["pad"], f"dil_{name}": ax["dil"],
                    f"in_{name}": ax["in"], f"out_{name}": ax["out"]})
    return cfg


def window(cfg: dict, wide: bool, bias: bool) -> tiling.Window:
    """The planner's Window; `split` as ops.conv marks it (a dense conv, in_c > 1)."""
    return tiling.Window(**{k: cfg[k] for k in (
        "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h", "pad_h",
        "pad_w", "dil_h", "groups")}, wide=wide, bias=bias,
        split=cfg["groups"] == 1 and cfg["in_c"] > 1)


def ptr(arr: np.ndarray | None, ctype=I8):
    return None if arr is None else arr.ctypes.data_as(ctypes.POINTER(ctype))


def round4(n: int) -> int:
    return (n + 3) // 4 * 4


def run_case(lib, cfg: dict, wide: bool, has_bias: bool, budget: float, double: bool,
             seed: int, cols: bool = False, reference: bool = False) -> None:
    w_plan = window(cfg, wide, has_bias)
    smallest = tiling.smallest_l1(w_plan, double)
    l1_size = int(smallest + budget * max(0, tiling.whole(w_plan) - 1 - smallest))
    # the split driver runs a split Window in the split layout (a grouped conv: the kernel)
    tile = tiling.choose("c", w_plan, l1_size, double, split=cols)
    assert tile is not None and tile.tiled and tile.l1_bytes <= l1_size
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (cfg["in_c"], cfg["in_h"], cfg["in_w"]), dtype=np.int8)
    wt = rng.integers(-128, 128, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                                  cfg["k_w"]), dtype=np.int8)
    bias = rng.integers(-3000, 3000, cfg["out_c"], dtype=np.int32) if has_bias else None
    params = ConvParams(**{k: cfg.get(k, 0) for k, _ in ConvParams._fields_})  # wbits 0: int8
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    expected = np.zeros(count, dtype=dtype)
    (lib.eb_conv2d_wide if wide else lib.eb_conv2d)(params, ptr(x), ptr(wt), ptr(bias, I32),
                                                    ptr(expected, ctype))
    got = np.full(count + GUARD, 0x5A, dtype=dtype)
    l1 = np.full(tile.l1_bytes + GUARD + 4, 0x5A, dtype=np.int8)
    l1_view = l1[(-l1.ctypes.data) % 4:]  # eb_tiling.h: L1 is 4-byte aligned
    # EB_CONV_COLS_SCRATCH: the columns of one row tile's pixels
    assert round4(min(tile.rows, cfg["out_h"]) * cfg["out_w"]) * round4(
        cfg["in_c"] * cfg["k_h"] * cfg["k_w"]) <= COLS_SCRATCH
    run = (lib.to_conv_tiled_refcols if reference else lib.to_conv_tiled_cols) if cols \
        else lib.to_conv_tiled
    run(params, Tile(tile.rows, tile.channels, int(double)), int(wide), ptr(x), ptr(wt),
        ptr(bias, I32), got.ctypes.data, ptr(l1_view))
    np.testing.assert_array_equal(got[:count], expected, err_msg=f"{cfg} {tile}")
    assert (got[count:] == dtype(0x5A)).all(), "wrote past the output"
    assert (l1_view[tile.l1_bytes:tile.l1_bytes + GUARD] == 0x5A).all(), "wrote past L1"


@settings(max_examples=150, deadline=None)
@given(layers(), st.booleans(), st.booleans(), st.floats(0, 1), st.booleans(),
       st.integers(0, 2**32 - 1), st.sampled_from(["kernel", "cols", "refcols"]))
def test_tiled_optimized_equals_untiled_reference(lib, cfg, wide, bias, budget, double, seed,
                                                  path):
    """Through the layer's kernel, or the split path in the split layout (cols: each row
    tile's unpadded input rows, its columns built once, every channel tile's weights against
    them; refcols: the same driver on the reference kernels; grouped convs: the kernel)."""
    w_plan = window(cfg, wide, bias)
    if tiling.smallest_l1(w_plan, double) >= tiling.whole(w_plan):
        return  # nothing to tile: the layer fits any budget that fits its smallest tile
    run_case(lib, cfg, wide, bias, budget, double, seed, path != "kernel", path == "refcols")


@pytest.mark.parametrize("cols", [False, True], ids=["kernel", "cols"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_vowels_layers_tiled_in_1kib(lib, double, cols):
    # vowels' conv2 and conv3 as small_l1 tiles them (columns along time, 1 KiB of L1)
    for length in (12, 6):
        cfg = {"in_c": 32, "out_c": 32, "groups": 1, "shift": -8, "rounding": 0, "act": 1,
               "k_h": 3, "stride_h": 1, "pad_h": 1, "dil_h": 1, "in_h": length,
               "out_h": length, "k_w": 1, "stride_w": 1, "pad_w": 0, "dil_w": 1, "in_w": 1,
               "out_w": 1}
        w_plan = window(cfg, False, True)
        budget = (1024 - tiling.smallest_l1(w_plan, double)) / (
            tiling.whole(w_plan) - 1 - tiling.smallest_l1(w_plan, double))
        run_case(lib, cfg, False, True, budget, double, length, cols)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(1, 20), st.booleans(), st.booleans(), st.booleans(),
       st.floats(0, 1), st.integers(-12, 0), st.integers(0, 1), st.integers(0, 2),
       st.integers(0, 2**32 - 1))
def test_tiled_linear_cols_equals_reference(lib, in_f, out_f, wide, has_bias, double, budget,
                                            shift, rounding, act, seed):
    """The split tiled linear (input expanded once, weight rows streamed) against eb_linear,
    on the planner's tile for a random L1 budget."""
    w_plan = tiling.Window(in_f, 1, 1, out_f, 1, 1, wide=wide, bias=has_bias, linear=True,
                           split=True)
    smallest = tiling.smallest_l1(w_plan, double)
    tile = tiling.choose("fc", w_plan, int(smallest + budget * max(
        0, tiling.whole(w_plan) - 1 - smallest)), double, split=True)
    assert tile is not None
    if not tile.tiled:
        return  # fits whole: not run through the tiled driver
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, in_f, dtype=np.int8)
    wt = rng.integers(-128, 128, (out_f, in_f), dtype=np.int8)
    bias = rng.integers(-3000, 3000, out_f, dtype=np.int32) if has_bias else None
    dtype = np.int32 if wide else np.int8
    expected = np.zeros(out_f, dtype=dtype)
    if wide:
        lib.eb_linear_wide(in_f, out_f, ptr(x), ptr(wt), ptr(bias, I32), ptr(expected, I32))
    else:
        lib.eb_linear(in_f, out_f, ptr(x), ptr(wt), ptr(bias, I32), shift, rounding, act,
                      ptr(expected))
    got = np.full(out_f + GUARD, 0x5A, dtype=dtype)
    l1 = np.full(tile.l1_bytes + GUARD + 4, 0x5A, dtype=np.int8)
    l1_view = l1[(-l1.ctypes.data) % 4:]
    lib.to_linear_tiled_cols(in_f, out_f, Tile(tile.rows, tile.channels, int(double)), shift,
                             rounding, act, int(wide), ptr(x), ptr(wt), ptr(bias, I32),
                             got.ctypes.data, ptr(l1_view))
    np.testing.assert_array_equal(got[:out_f], expected, err_msg=f"{tile}")
    assert (got[out_f:] == dtype(0x5A)).all(), "wrote past the output"
    assert (l1_view[tile.l1_bytes:tile.l1_bytes + GUARD] == 0x5A).all(), "wrote past L1"
