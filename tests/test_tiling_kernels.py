"""Tiled execution (templates/kernels/eb_tiling.c, contract in eb_tiling.h) against the untiled
reference kernels (eb_kernels.c, themselves checked against numpy in test_kernels.py), bit for
bit, on random layers and random tilings (hypothesis).

Besides the outputs, every test checks what the contract promises about L1: the buffer holds
exactly n_slots * slot bytes (slot from the header's layout formula, implemented here in
Python: the planner reuses it) and the guard bytes after it stay untouched; a recording kernel
wrapper (C, compiled into the test library) logs every tile's kernel call — the tile params,
where in L1 each pointer points, and the contents of the input region(s) — so the tile order,
the region offsets, the materialized zero padding and the double-buffering prefetch (the next
tile's input is already in the other slot when the current tile is computed) are checked too.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import tool
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import (
    CONV_FIELDS,
    I8,
    I32,
    POOL_FIELDS,
    ConvParams,
    PoolParams,
    Tile,
    layout_probe,
)

from edgebuild.memory import tiling

KERNELS = Path(__file__).resolve().parent.parent / "templates" / "kernels"
GCC = shutil.which("gcc")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
CFLAGS = ["-std=c99", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
          "-DEB_STANDALONE"]  # the bare kernel library: plain names (eb_kernels.h)
STRICT = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-Wpedantic",
          "-Wmissing-prototypes", "-Wstrict-prototypes", "-Wcast-align", "-Wconversion",
          "-DEB_STANDALONE"]
M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]

pytestmark = pytest.mark.skipif(
    GCC is None, reason="gcc is not on PATH: the tiling tests compile eb_tiling.c")

GUARD = 16  # guard bytes after L1 / guard elements after every output buffer
SENTINEL = 0x5A
EXAMPLES = settings(max_examples=80, deadline=None)

I64 = ctypes.c_int64
P8, P32, P64 = ctypes.POINTER(I8), ctypes.POINTER(I32), ctypes.POINTER(I64)
INT = ctypes.c_int

STRUCTS = {"conv": ("eb_conv_params", ConvParams), "pool": ("eb_pool_params", PoolParams),
           "tile": ("eb_tile", Tile)}

# Test-only C: struct probes, and kernels bound for eb_*_tiled that record every call (tile
# params, pointer offsets from the start of L1, a snapshot of each slot's input region) before
# running the reference kernel. The linear kernel type carries no shift/rounding/act: the
# caller binds them (here through globals).
HELPER_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "eb_tiling.h"

static const int8_t *g_l1;
static int64_t g_slot;
static int g_slots, g_calls, g_max_calls, g_snap_len;
static int64_t *g_offsets;
static eb_conv_params *g_params;
static int32_t *g_dims;
static int8_t *g_snap;
static int g_shift, g_rounding, g_act;

void tt_record(const int8_t *l1, int64_t slot, int slots, int max_calls, int64_t *offsets,
               eb_conv_params *params, int32_t *dims, int8_t *snap, int snap_len)
{
    g_l1 = l1; g_slot = slot; g_slots = slots; g_max_calls = max_calls; g_offsets = offsets;
    g_params = params; g_dims = dims; g_snap = snap; g_snap_len = snap_len; g_calls = 0;
}

int tt_calls(void) { return g_calls; }

static int64_t l1_offset(const void *ptr)
{
    return ptr == NULL ? -1 : (int64_t)((uintptr_t)ptr - (uintptr_t)g_l1);
}

static void record(const void *in, const void *w, const void *b, const void *out)
{
    if (g_calls < g_max_calls) {
        int64_t *o = g_offsets + 4 * g_calls;
        int s;
        o[0] = l1_offset(in); o[1] = l1_offset(w); o[2] = l1_offset(b); o[3] = l1_offset(out);
        for (s = 0; s < g_slots; ++s) {
            memcpy(g_snap + ((int64_t)g_calls * g_slots + s) * g_snap_len, g_l1 + s * g_slot,
                   (size_t)g_snap_len);
        }
    }
    ++g_calls;
}

static void rec_conv(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                     const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) g_params[g_calls] = *p;
    record(in, w, b, out);
    eb_conv2d(p, in, w, b, (int8_t *)out);
}

static void rec_conv_wide(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                          const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) g_params[g_calls] = *p;
    record(in, w, b, out);
    eb_conv2d_wide(p, in, w, b, (int32_t *)out);
}

static void rec_linear(int in_f, int out_f, const int8_t *in, const int8_t *w,
                       const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) { g_dims[2 * g_calls] = in_f; g_dims[2 * g_calls + 1] = out_f; }
    record(in, w, b, out);
    eb_linear(in_f, out_f, in, w, b, g_shift, g_rounding, g_act, (int8_t *)out);
}

static void rec_linear_wide(int in_f, int out_f, const int8_t *in, const int8_t *w,
                            const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) { g_dims[2 * g_calls] = in_f; g_dims[2 * g_calls + 1] = out_f; }
    record(in, w, b, out);
    eb_linear_wide(in_f, out_f, in, w, b, (int32_t *)out);
}

void tt_conv_tiled(const eb_conv_params *p, const eb_tile *t, int wide, const int8_t *in,
                   const int8_t *w, const int32_t *b, void *out, int8_t *l1)
{
    eb_conv2d_tiled(p, t, wide ? rec_conv_wide : rec_conv, wide, in, w, b, out, l1);
}

static void rec_convt(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) g_params[g_calls] = *p;
    record(in, w, b, out);
    eb_conv_transpose2d(p, in, w, b, (int8_t *)out);
}

static void rec_convt_wide(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                           const int32_t *b, void *out)
{
    if (g_calls < g_max_calls) g_params[g_calls] = *p;
    record(in, w, b, out);
    eb_conv_transpose2d_wide(p, in, w, b, (int32_t *)out);
}

void tt_convt_tiled(const eb_conv_params *p, const eb_tile *t, int wide, const int8_t *in,
                    const int8_t *w, const int32_t *b, void *out, int8_t *l1)
{
    eb_conv_transpose2d_tiled(p, t, wide ? rec_convt_wide : rec_convt, wide, in, w, b, out, l1);
}

void tt_linear_tiled(int in_f, int out_f, const eb_tile *t, int wide, int shift, int rounding,
                     int act, const int8_t *in, const int8_t *w, const int32_t *b, void *out,
                     int8_t *l1)
{
    g_shift = shift; g_rounding = rounding; g_act = act;
    eb_linear_tiled(in_f, out_f, t, wide ? rec_linear_wide : rec_linear, wide, in, w, b, out,
                    l1);
}
"""


def probe_source() -> str:
    lines = ["#include <stddef.h>", '#include "eb_tiling.h"', *layout_probe(STRUCTS, "tt")]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_tiling")
    (build / "tt_helper.c").write_text(HELPER_C)
    (build / "tt_probe.c").write_text(probe_source())
    shared = build / "libeb_tiling.so"
    result = subprocess.run(
        [GCC, *CFLAGS, f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_tiling.c"), str(build / "tt_helper.c"), str(build / "tt_probe.c"),
         "-o", str(shared)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    pc, pp, pt = (ctypes.POINTER(s) for s in (ConvParams, PoolParams, Tile))
    signatures = {
        "eb_conv2d": ([pc, P8, P8, P32, P8], None),
        "eb_conv2d_wide": ([pc, P8, P8, P32, P32], None),
        "eb_conv_transpose2d": ([pc, P8, P8, P32, P8], None),
        "eb_conv_transpose2d_wide": ([pc, P8, P8, P32, P32], None),
        "eb_conv_transpose_tile_slot_bytes": ([pc, pt, INT, INT], I32),
        "tt_convt_tiled": ([pc, pt, INT, P8, P8, P32, ctypes.c_void_p, P8], None),
        "eb_linear": ([INT, INT, P8, P8, P32, INT, INT, INT, P8], None),
        "eb_linear_wide": ([INT, INT, P8, P8, P32, P32], None),
        "eb_pool2d": ([pp, P8, P8], None),
        "eb_pool2d_tiled": ([pp, pt, P8, P8, P8], None),
        "eb_dma_copy": ([ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32], None),
        "eb_dma_copy2d": ([ctypes.c_void_p, I32, ctypes.c_void_p, I32, I32, ctypes.c_uint32],
                          None),
        "eb_conv_tile_slot_bytes": ([pc, pt, INT, INT], I32),
        "eb_pool_tile_slot_bytes": ([pp, pt], I32),
        "eb_linear_tile_slot_bytes": ([INT, pt, INT, INT], I32),
        "tt_record": ([P8, I64, INT, INT, P64, pc, P32, P8, INT], None),
        "tt_calls": ([], INT),
        "tt_conv_tiled": ([pc, pt, INT, P8, P8, P32, ctypes.c_void_p, P8], None),
        "tt_linear_tiled": ([INT, INT, pt, INT, INT, INT, INT, P8, P8, P32, ctypes.c_void_p,
                             P8], None),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(so, name)
        fn.argtypes, fn.restype = args, res
    return so


# ---- the header's L1 layout formula (the planner's copy) ----------------------------------

def align4(n: int) -> int:
    return (n + 3) & ~3


def slot_layout(in_bytes: int, weight_bytes: int, bias_bytes: int, out_bytes: int) -> dict:
    """Region offsets inside one slot (input, weight, bias, output; each 4-byte aligned) and
    the slot size, itself a multiple of 4 so that the second slot starts aligned too."""
    weight = align4(in_bytes)
    bias = weight + align4(weight_bytes)
    out = bias + align4(bias_bytes)
    return {"in": 0, "weight": weight, "bias": bias, "out": out, "slot": out + align4(out_bytes),
            "in_bytes": in_bytes}


def conv_in_rows(cfg: dict, rows: int) -> int:
    return (rows - 1) * cfg["stride_h"] + cfg["dil_h"] * (cfg["k_h"] - 1) + 1


def conv_tile_channels(cfg: dict, channels: int) -> int:
    """Output channels of a full tile, at most out_c. The header asks for a multiple of
    out_c/groups (whole groups); a dense conv (groups == 1) takes any count and a grouped conv
    a divisor of out_c/groups (no tile straddles two groups). eb_tiling.c rounds anything
    else down to such a count."""
    out_per_group = cfg["out_c"] // cfg["groups"]
    oc_t = max(1, min(channels, cfg["out_c"]))
    if oc_t >= out_per_group:
        return oc_t - oc_t % out_per_group
    if cfg["groups"] == 1:
        return oc_t
    return max(d for d in range(1, oc_t + 1) if out_per_group % d == 0)


def conv_tile_groups(cfg: dict, oc_t: int) -> int:
    return max(1, oc_t // (cfg["out_c"] // cfg["groups"]))


def conv_tile_inputs(cfg: dict, oc_t: int) -> int:
    """cin_t: the input channels of the tile's groups (all of in_c for a dense conv)."""
    return conv_tile_groups(cfg, oc_t) * (cfg["in_c"] // cfg["groups"])


def conv_slot_layout(cfg: dict, rows: int, channels: int, wide: bool, has_bias: bool) -> dict:
    """Full-size tile: rows <= out_h, channels <= out_c (the largest tile of the layer)."""
    rows, oc_t = min(rows, cfg["out_h"]), conv_tile_channels(cfg, channels)
    return slot_layout(
        conv_tile_inputs(cfg, oc_t) * conv_in_rows(cfg, rows) * (cfg["in_w"] + 2 * cfg["pad_w"]),
        oc_t * cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"],
        4 * oc_t if has_bias else 0,
        oc_t * rows * cfg["out_w"] * (4 if wide else 1))


def convt_in_rows(cfg: dict, rows: int) -> int:
    """Input rows of a transposed conv's tile slot: the most `rows` output rows can read."""
    return min(cfg["in_h"], (rows - 1 + cfg["dil_h"] * (cfg["k_h"] - 1)) // cfg["stride_h"] + 1)


def convt_span(cfg: dict, y0: int, rows: int) -> tuple[int, int]:
    """(first, count) of the input rows output rows [y0, y0 + rows) read: output row y takes
    input row i through tap k when y + pad_h = i * stride_h + k * dil_h."""
    first = max(0, -(-(y0 + cfg["pad_h"] - cfg["dil_h"] * (cfg["k_h"] - 1)) // cfg["stride_h"]))
    last = min(cfg["in_h"] - 1, (y0 + rows - 1 + cfg["pad_h"]) // cfg["stride_h"])
    return first, max(0, last - first + 1)


def convt_slot_layout(cfg: dict, rows: int, channels: int, wide: bool, has_bias: bool) -> dict:
    rows, oc_t = min(rows, cfg["out_h"]), conv_tile_channels(cfg, channels)
    return slot_layout(
        conv_tile_inputs(cfg, oc_t) * convt_in_rows(cfg, rows) * cfg["in_w"],
        oc_t * cfg["in_c"] // cfg["groups"] * cfg["k_h"] * cfg["k_w"],
        4 * oc_t if has_bias else 0,
        oc_t * rows * cfg["out_w"] * (4 if wide else 1))


def pool_in_rows(cfg: dict, rows: int) -> int:
    """The windows' span; a tile of all the output rows stages whole planes (eb_tiling.h)."""
    span = (rows - 1) * cfg["stride_h"] + cfg["k_h"]
    return max(span, cfg["in_h"]) if rows >= cfg["out_h"] else span


def pool_slot_layout(cfg: dict, rows: int, channels: int) -> dict:
    rows, c_t = min(rows, cfg["out_h"]), min(channels, cfg["c"])
    return slot_layout(c_t * pool_in_rows(cfg, rows) * cfg["in_w"], 0, 0,
                       c_t * rows * cfg["out_w"])


def linear_slot_layout(in_f: int, channels: int, wide: bool, has_bias: bool) -> dict:
    """channels as given: the C function has no out_f to clamp with (clamp before calling)."""
    return slot_layout(in_f, channels * in_f, 4 * channels if has_bias else 0,
                       channels * (4 if wide else 1))


# ---- helpers ---------------------------------------------------------------------------

def ptr(arr: np.ndarray | None, ctype=I8):
    if arr is None:
        return None
    assert arr.flags.c_contiguous
    return arr.ctypes.data_as(ctypes.POINTER(ctype))


def l1_buffer(size: int) -> np.ndarray:
    """size bytes of L1 plus GUARD guard bytes, all SENTINEL, 4-byte aligned (int32-backed)."""
    backing = np.empty((size + GUARD + 3) // 4, dtype=np.int32)
    buf = backing.view(np.int8)[:size + GUARD]
    buf[:] = SENTINEL
    assert buf.ctypes.data % 4 == 0
    return buf


def check_guard(l1: np.ndarray, size: int) -> None:
    assert (l1[size:] == SENTINEL).all(), "the tiled kernel wrote past its L1 slots"


def out_buffer(count: int, wide: bool) -> np.ndarray:
    return np.full(count + GUARD, SENTINEL, dtype=np.int32 if wide else np.int8)


def checked(buf: np.ndarray, count: int) -> np.ndarray:
    assert (buf[count:] == SENTINEL).all(), "the kernel wrote past its output"
    return buf[:count].copy()


def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def int8_data(rng: np.random.Generator, shape) -> np.ndarray:
    flavour = rng.integers(3)
    if flavour == 0:
        x = rng.integers(-128, 128, size=shape)
    elif flavour == 1:
        x = rng.integers(-3, 4, size=shape)  # rounding ties
    else:
        x = rng.choice([-128, 127], size=shape)  # saturation
    return np.ascontiguousarray(x, dtype=np.int8)


def bias_data(rng: np.random.Generator, count: int, has_bias: bool) -> np.ndarray | None:
    if not has_bias:
        return None
    return rng.integers(-(1 << 20), 1 << 20, size=count).astype(np.int32)


class Recorder:
    """Buffers for the recording kernel wrapper: per call 4 offsets, params (conv) or
    (in_f, out_f) (linear), and a snapshot of the first snap_len bytes of every slot."""

    def __init__(self, lib, l1: np.ndarray, layout: dict, slots: int, calls: int) -> None:
        self.lib, self.slots, self.max_calls = lib, slots, calls + 4
        self.snap_len = max(layout["in_bytes"], 1)
        self.offsets = np.zeros((self.max_calls, 4), dtype=np.int64)
        self.params = (ConvParams * self.max_calls)()
        self.dims = np.zeros((self.max_calls, 2), dtype=np.int32)
        self.snap = np.zeros((self.max_calls, slots, self.snap_len), dtype=np.int8)
        lib.tt_record(ptr(l1), layout["slot"], slots, self.max_calls, ptr(self.offsets, I64),
                      self.params, ptr(self.dims, I32), ptr(self.snap), self.snap_len)

    def calls(self) -> int:
        return self.lib.tt_calls()

    def check_call(self, i: int, layout: dict, has_bias: bool, staged: list[np.ndarray]) -> None:
        """Call i ran on slot i % slots with the header's region offsets; its slot's input
        region holds staged[i] and, double buffered, the other slot already holds staged[i+1]."""
        s = i % self.slots
        base = s * layout["slot"]
        expected = [base + layout["in"], base + layout["weight"],
                    base + layout["bias"] if has_bias else -1, base + layout["out"]]
        assert self.offsets[i].tolist() == expected, f"tile {i}: pointers into L1"
        np.testing.assert_array_equal(self.snap[i, s, :staged[i].size], staged[i],
                                      err_msg=f"tile {i}: staged input")
        if self.slots == 2 and i + 1 < len(staged):
            np.testing.assert_array_equal(self.snap[i, 1 - s, :staged[i + 1].size],
                                          staged[i + 1],
                                          err_msg=f"tile {i}: next tile not prefetched")


# ---- struct layout, C slot sizes, compiler cleanliness ------------------------------------

@pytest.mark.parametrize("key", sorted(STRUCTS))
def test_struct_layout_matches_header(lib, key):
    _, struct = STRUCTS[key]
    assert ctypes.sizeof(struct) == getattr(lib, f"tt_sizeof_{key}")()
    for field, _ in struct._fields_:
        assert getattr(struct, field).offset == getattr(lib, f"tt_offsetof_{key}_{field}")(), field


def conv_params(cfg: dict) -> ConvParams:
    return ConvParams(**{k: cfg[k] for k in CONV_FIELDS}, shift=cfg["shift"],
                      rounding=cfg["rounding"], act=cfg["act"])


def pool_params(cfg: dict) -> PoolParams:
    return PoolParams(**{k: cfg[k] for k in POOL_FIELDS}, mode=cfg["mode"],
                      rounding=cfg["rounding"])


def conv_cfg(**kw) -> dict:
    cfg = {"in_c": 1, "in_h": 1, "in_w": 1, "out_c": 1, "k_h": 1, "k_w": 1, "stride_h": 1,
           "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1, "groups": 1,
           "shift": 0, "rounding": 0, "act": 0, **kw}
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    return cfg


@pytest.mark.parametrize(("cfg", "rows", "channels", "wide", "bias", "slot"), [
    # 4x10x10 -> 8 in 2 groups, k3 pad1, tile 4 rows x 4 ch (one group): input 2*6*12=144,
    # weight 4*2*9=72, bias 16, output 4*4*10=160
    (conv_cfg(in_c=4, in_h=10, in_w=10, out_c=8, groups=2, k_h=3, k_w=3, pad_h=1, pad_w=1),
     4, 4, 0, 1, 392),
    # same, wide output 640, no bias
    (conv_cfg(in_c=4, in_h=10, in_w=10, out_c=8, groups=2, k_h=3, k_w=3, pad_h=1, pad_w=1),
     4, 4, 1, 0, 856),
    # dense 3 -> 8, tile of 4 channels (any count: every tile reads all 3 inputs): input
    # 3*6*12=216, weight 4*27=108, bias 16, output 4*4*10=160
    (conv_cfg(in_c=3, in_h=10, in_w=10, out_c=8, k_h=3, k_w=3, pad_h=1, pad_w=1), 4, 4, 0, 1,
     500),
    # 4 -> 8 in 2 groups, 6 channels asked: rounded down to one group (4), as the first case
    (conv_cfg(in_c=4, in_h=10, in_w=10, out_c=8, groups=2, k_h=3, k_w=3, pad_h=1, pad_w=1),
     4, 6, 0, 1, 392),
    # ... 3 channels asked: a divisor of the group's 4, 2 channels of one group: input
    # 2*6*12=144, weight 2*2*9=36, bias 8, output 2*4*10=80
    (conv_cfg(in_c=4, in_h=10, in_w=10, out_c=8, groups=2, k_h=3, k_w=3, pad_h=1, pad_w=1),
     4, 3, 0, 1, 268),
    # conv1d 1x7 -> 3, k3 pad1: input 9 -> 12, weight 9 -> 12, output 21 -> 24
    (conv_cfg(in_w=7, out_c=3, k_w=3, pad_w=1), 1, 3, 0, 0, 48),
    # rows/channels beyond the layer are clamped: tile = whole layer (out_h = 1)
    (conv_cfg(in_w=7, out_c=3, k_w=3, pad_w=1), 9, 30, 0, 0, 48),
    # depthwise 4ch 5x5 k3 stride 2 dil 1 no pad, 1 row x 2 ch: out 2x2; input 2*3*5=30 -> 32,
    # weight 2*9=18 -> 20, bias 8, output 2*1*2=4
    (conv_cfg(in_c=4, in_h=5, in_w=5, out_c=4, groups=4, k_h=3, k_w=3, stride_h=2,
              stride_w=2), 1, 2, 0, 1, 64),
])
def test_conv_slot_bytes_by_hand(lib, cfg, rows, channels, wide, bias, slot):
    assert conv_slot_layout(cfg, rows, channels, wide, bias)["slot"] == slot
    assert lib.eb_conv_tile_slot_bytes(conv_params(cfg), Tile(rows, channels, 0), wide,
                                       bias) == slot


def test_pool_and_linear_slot_bytes_by_hand(lib):
    # 3x9x9 pool 2x2 stride 2 (out 4x4), tile 2 rows x 2 ch: input 2*4*9=72, output 2*2*4=16
    cfg = {"c": 3, "in_h": 9, "in_w": 9, "out_h": 4, "out_w": 4, "k_h": 2, "k_w": 2,
           "stride_h": 2, "stride_w": 2, "mode": 0, "rounding": 0}
    assert pool_slot_layout(cfg, 2, 2)["slot"] == 88
    assert lib.eb_pool_tile_slot_bytes(pool_params(cfg), Tile(2, 2, 0)) == 88
    # linear 10 -> tile of 3: input 12, weight 30 -> 32, bias 12, output 3 -> 4 (wide 12)
    assert linear_slot_layout(10, 3, False, True)["slot"] == 60
    assert lib.eb_linear_tile_slot_bytes(10, Tile(1, 3, 1), 0, 1) == 60
    assert lib.eb_linear_tile_slot_bytes(10, Tile(1, 3, 1), 1, 0) == 56


def test_dma_copy(lib):
    src = np.arange(-20, 20, dtype=np.int8)
    dst = np.full(48, SENTINEL, dtype=np.int8)
    lib.eb_dma_copy(dst.ctypes.data + 3, src.ctypes.data, 40)
    assert dst[3:43].tolist() == src.tolist()
    assert (dst[:3] == SENTINEL).all() and (dst[43:] == SENTINEL).all()
    lib.eb_dma_copy(dst.ctypes.data, src.ctypes.data, 0)
    assert dst[0] == SENTINEL


def test_dma_copy2d(lib):
    # 3 blocks of 5 bytes, 7 apart in the source, 6 apart in the destination
    src = np.arange(-30, 0, dtype=np.int8)
    dst = np.full(24, SENTINEL, dtype=np.int8)
    lib.eb_dma_copy2d(dst.ctypes.data + 1, 6, src.ctypes.data + 2, 7, 3, 5)
    want = np.full(24, SENTINEL, dtype=np.int8)
    for b in range(3):
        want[1 + 6 * b:6 + 6 * b] = src[2 + 7 * b:7 + 7 * b]
    assert dst.tolist() == want.tolist()
    lib.eb_dma_copy2d(dst.ctypes.data, 6, src.ctypes.data, 7, 0, 5)
    assert dst.tolist() == want.tolist()


@pytest.mark.parametrize("compiler", [
    pytest.param("cc", id="host"),
    pytest.param("arm", id="cortex-m4"),
])
def test_compiles_warning_free(tmp_path, compiler):
    tool("gcc" if compiler == "cc" else "arm-none-eabi-gcc")
    cmd = [GCC, *STRICT] if compiler == "cc" else [ARM_GCC, *STRICT, *M4_FLAGS]
    result = subprocess.run([*cmd, f"-I{KERNELS}", "-c", str(KERNELS / "eb_tiling.c"), "-o",
                             str(tmp_path / "eb_tiling.o")], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


# ---- random layers and tilings -------------------------------------------------------------

@st.composite
def conv_cases(draw):
    one_d = draw(st.booleans())
    in_c = draw(st.integers(1, 8))
    layout = draw(st.sampled_from(["dense", "depthwise", "grouped"]))
    if layout == "dense":
        groups, out_c = 1, draw(st.integers(1, 10))
    elif layout == "depthwise":
        groups = out_c = in_c
    else:
        groups = draw(st.sampled_from([d for d in range(1, in_c + 1) if in_c % d == 0]))
        out_c = groups * draw(st.integers(1, max(1, 10 // groups)))
    cfg = {"in_c": in_c, "out_c": out_c, "groups": groups,
           "shift": draw(st.integers(-14, 3)), "rounding": draw(st.integers(0, 1)),
           "act": draw(st.integers(0, 2))}
    for axis in ("h", "w"):
        if axis == "h" and one_d:
            k, stride, pad, dil, size = 1, 1, 0, 1, 1
        else:
            k, stride = draw(st.integers(1, 4)), draw(st.integers(1, 3))
            # (width padding past 4: the staging's zeroing calls, not its words)
            pad, dil = draw(st.integers(0, 6 if axis == "w" else 2)), draw(st.integers(1, 2))
            size = draw(st.integers(max(1, dil * (k - 1) + 1 - 2 * pad), 12))
        cfg.update({f"k_{axis}": k, f"stride_{axis}": stride, f"pad_{axis}": pad,
                    f"dil_{axis}": dil, f"in_{axis}": size,
                    f"out_{axis}": conv_out(size, k, stride, pad, dil)})
    out_per_group = out_c // groups
    rows = draw(st.integers(1, cfg["out_h"] + 1))
    channels = draw(st.one_of(  # whole groups (the contract), or any count (rounded in C)
        st.integers(1, groups + 1).map(lambda n: n * out_per_group), st.integers(1, out_c + 1)))
    return {"cfg": cfg, "rows": rows, "channels": channels, "double": draw(st.booleans()),
            "wide": draw(st.booleans()), "bias": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**32 - 1))}


def tiles(total_c: int, c_step: int, out_h: int, row_step: int, rows_outer: bool = False):
    """(c0, c_t, y0, rows) in the contract's order: channels outer, rows inner — or rows
    outer, channels inner (a dense conv)."""
    c_step, row_step = min(c_step, total_c), min(row_step, out_h)
    if rows_outer:
        return [(c0, min(c_step, total_c - c0), y0, min(row_step, out_h - y0))
                for y0 in range(0, out_h, row_step) for c0 in range(0, total_c, c_step)]
    return [(c0, min(c_step, total_c - c0), y0, min(row_step, out_h - y0))
            for c0 in range(0, total_c, c_step) for y0 in range(0, out_h, row_step)]


def staged_conv_input(cfg: dict, x: np.ndarray, c0: int, c_t: int, y0: int,
                      rows: int) -> np.ndarray:
    """What the header says a tile's input region holds: [cin_t][in_rows][in_w + 2 pad_w],
    zero outside the image."""
    in_rows = conv_in_rows(cfg, rows)
    ipg, opg = cfg["in_c"] // cfg["groups"], cfg["out_c"] // cfg["groups"]
    padded = np.pad(x, ((0, 0), (cfg["pad_h"], cfg["pad_h"] + in_rows),
                        (cfg["pad_w"], cfg["pad_w"])))
    first, top = c0 // opg * ipg, y0 * cfg["stride_h"]
    return padded[first:first + conv_tile_inputs(cfg, c_t), top:top + in_rows].reshape(-1)


def as_row(tile: dict) -> dict:
    """The params a conv tile reaches the kernel with: a column ([C][rows][1], k_w = 1: a 1-D
    layer tiled along time) as the row it is in memory ([C][1][rows]), eb_tiling.h."""
    if not (tile["in_w"] == tile["out_w"] == tile["k_w"] == 1 and tile["pad_w"] == 0):
        return tile
    row = dict(tile, in_h=1, out_h=1, k_h=1, stride_h=1, pad_h=0, dil_h=1)
    row.update({f"{name}_w": tile[f"{name}_h"] for name in ("k", "stride", "pad", "dil")},
               in_w=tile["in_h"], out_w=tile["out_h"])
    return row


def check_conv_tiled(lib, case: dict) -> None:
    cfg, wide, has_bias = case["cfg"], case["wide"], case["bias"]
    rng = np.random.default_rng(case["seed"])
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w = int8_data(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"]))
    bias = bias_data(rng, cfg["out_c"], has_bias)
    originals = [a.copy() for a in (x, w) + ((bias,) if has_bias else ())]
    params = conv_params(cfg)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]

    expected = out_buffer(count, wide)
    if wide:
        lib.eb_conv2d_wide(params, ptr(x), ptr(w), ptr(bias, I32), ptr(expected, I32))
    else:
        lib.eb_conv2d(params, ptr(x), ptr(w), ptr(bias, I32), ptr(expected))
    expected = checked(expected, count)

    tile = Tile(case["rows"], case["channels"], case["double"])
    layout = conv_slot_layout(cfg, case["rows"], case["channels"], wide, has_bias)
    assert lib.eb_conv_tile_slot_bytes(params, tile, wide, has_bias) == layout["slot"]
    slots = 2 if case["double"] else 1
    l1 = l1_buffer(slots * layout["slot"])
    order = tiles(cfg["out_c"], conv_tile_channels(cfg, case["channels"]), cfg["out_h"],
                  case["rows"], rows_outer=cfg["groups"] == 1)
    rec = Recorder(lib, l1, layout, slots, len(order))
    got = out_buffer(count, wide)
    lib.tt_conv_tiled(params, tile, int(wide), ptr(x), ptr(w), ptr(bias, I32),
                      got.ctypes.data, ptr(l1))

    np.testing.assert_array_equal(checked(got, count), expected, err_msg=str(case))
    check_guard(l1, slots * layout["slot"])
    for before, after in zip(originals, (x, w) + ((bias,) if has_bias else ()), strict=True):
        np.testing.assert_array_equal(after, before)
    assert rec.calls() == len(order)
    staged = [staged_conv_input(cfg, x, *t) for t in order]
    for i, (_, c_t, _, rows) in enumerate(order):
        p = rec.params[i]
        want = as_row(dict(cfg, in_c=conv_tile_inputs(cfg, c_t), in_h=conv_in_rows(cfg, rows),
                           in_w=cfg["in_w"] + 2 * cfg["pad_w"], out_c=c_t, out_h=rows, pad_h=0,
                           pad_w=0, groups=conv_tile_groups(cfg, c_t)))
        assert {k: getattr(p, k) for k in want} == want, f"tile {i} params"
        rec.check_call(i, layout, has_bias, staged)


@EXAMPLES
@given(conv_cases())
def test_conv2d_tiled_matches_untiled(lib, case):
    check_conv_tiled(lib, case)


def fixed_case(cfg: dict, rows: int, channels: int, double: bool = True, wide: bool = False,
               bias: bool = True) -> dict:
    return {"cfg": cfg, "rows": rows, "channels": channels, "double": double, "wide": wide,
            "bias": bias, "seed": 7}


@pytest.mark.parametrize("case", [
    # dense, 3 of 8 channels per tile (3, 3, 2), each reading all inputs
    fixed_case(conv_cfg(in_c=3, in_h=9, in_w=9, out_c=8, k_h=3, k_w=3, pad_h=1, pad_w=1,
                        shift=-6), 2, 3),
    # 2 groups of 3 outputs, 5 channels asked: rounded down to 3 (one group per tile)
    fixed_case(conv_cfg(in_c=4, in_h=6, in_w=6, out_c=6, groups=2, k_h=2, k_w=2, shift=-5),
               4, 5),
    # 2 groups of 4 outputs, 3 asked: 2 (a divisor), tiles inside one group
    fixed_case(conv_cfg(in_c=4, in_h=6, in_w=6, out_c=8, groups=2, k_h=2, k_w=2, pad_w=1,
                        shift=-5), 3, 3, wide=True),
    # k=1 pad 2: the first and last two output rows see only padding (bias alone)
    fixed_case(conv_cfg(in_c=2, in_h=3, in_w=4, out_c=2, pad_h=2, pad_w=2, shift=-4), 1, 1),
    # an odd number of row tiles: the slots' parity crosses channel tiles (weights per slot)
    fixed_case(conv_cfg(in_c=6, in_h=7, in_w=5, out_c=6, groups=3, k_h=3, k_w=2, pad_h=1,
                        stride_h=2, dil_w=2, shift=-5, act=1), 3, 2, wide=True),
    # a conv1d tiled along time (a column, 5 rows per tile): the kernel gets it as a row
    fixed_case(conv_cfg(in_c=3, in_h=11, in_w=1, out_c=4, k_h=3, pad_h=1, dil_h=2,
                        shift=-6, act=1), 5, 3),
    # depthwise conv1d, one channel per tile, no bias
    fixed_case(conv_cfg(in_c=5, in_w=12, out_c=5, groups=5, k_w=4, pad_w=1, stride_w=3,
                        shift=-3, rounding=1, act=2), 1, 1, bias=False),
    # the staged rows' width padding: a zero word at either end (rows of 4 bytes, the words
    # overlapping), and past 4 bytes or in rows of fewer than 4 zeroed byte by byte
    fixed_case(conv_cfg(in_c=3, in_h=5, in_w=2, out_c=4, k_h=3, k_w=3, pad_h=1, pad_w=1,
                        shift=-5), 2, 4),
    fixed_case(conv_cfg(in_c=2, in_h=4, in_w=7, out_c=3, k_h=2, k_w=3, pad_h=1, pad_w=5,
                        shift=-5, act=1), 2, 3),
    fixed_case(conv_cfg(in_c=2, in_h=4, in_w=1, out_c=3, k_h=3, k_w=1, pad_h=1, pad_w=1,
                        shift=-4), 3, 3),
], ids=["dense-partial-channels", "grouped-rounded-down", "grouped-sub-group",
        "padding-only-rows", "odd-row-tiles", "column-1d", "depthwise-1d", "pad-words",
        "pad-wide", "pad-narrow-row"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_conv2d_tiled_fixed(lib, case, double):
    check_conv_tiled(lib, dict(case, double=double))


def convt_out(size: int, k: int, stride: int, pad: int, out_pad: int, dil: int) -> int:
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1


@st.composite
def convt_cases(draw):
    in_c = draw(st.integers(1, 6))
    groups = draw(st.sampled_from([d for d in range(1, in_c + 1) if in_c % d == 0]))
    out_c = groups * draw(st.integers(1, max(1, 8 // groups)))
    cfg = {"in_c": in_c, "out_c": out_c, "groups": groups, "shift": draw(st.integers(-14, 3)),
           "rounding": draw(st.integers(0, 1)), "act": draw(st.integers(0, 2))}
    for axis in ("h", "w"):
        k, stride = draw(st.integers(1, 4)), draw(st.integers(1, 3))
        dil = draw(st.integers(1, 2))
        out_pad = draw(st.integers(0, max(stride, dil) - 1))
        size = draw(st.integers(1, 8))
        full = convt_out(size, k, stride, 0, out_pad, dil)
        pad = draw(st.integers(0, min(3, (full - 1) // 2)))
        cfg.update({f"k_{axis}": k, f"stride_{axis}": stride, f"pad_{axis}": pad,
                    f"dil_{axis}": dil, f"in_{axis}": size,
                    f"out_{axis}": convt_out(size, k, stride, pad, out_pad, dil)})
    out_per_group = out_c // groups
    rows = draw(st.integers(1, cfg["out_h"] + 1))
    channels = draw(st.one_of(
        st.integers(1, groups + 1).map(lambda n: n * out_per_group), st.integers(1, out_c + 1)))
    return {"cfg": cfg, "rows": rows, "channels": channels, "double": draw(st.booleans()),
            "wide": draw(st.booleans()), "bias": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**32 - 1))}


def staged_convt_input(cfg: dict, x: np.ndarray, c0: int, c_t: int, y0: int,
                       rows: int) -> np.ndarray:
    """A transposed conv tile's input region: [cin_t][count][in_w], the rows it reads."""
    first, count = convt_span(cfg, y0, rows)
    ipg, opg = cfg["in_c"] // cfg["groups"], cfg["out_c"] // cfg["groups"]
    c_first = c0 // opg * ipg
    return x[c_first:c_first + conv_tile_inputs(cfg, c_t), first:first + count].reshape(-1)


def check_convt_tiled(lib, case: dict) -> None:
    cfg, wide, has_bias = case["cfg"], case["wide"], case["bias"]
    rng = np.random.default_rng(case["seed"])
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w = int8_data(rng, (cfg["in_c"], cfg["out_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"]))
    bias = bias_data(rng, cfg["out_c"], has_bias)
    params = conv_params(cfg)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    expected = out_buffer(count, wide)
    if wide:
        lib.eb_conv_transpose2d_wide(params, ptr(x), ptr(w), ptr(bias, I32), ptr(expected, I32))
    else:
        lib.eb_conv_transpose2d(params, ptr(x), ptr(w), ptr(bias, I32), ptr(expected))
    expected = checked(expected, count)

    tile = Tile(case["rows"], case["channels"], case["double"])
    layout = convt_slot_layout(cfg, case["rows"], case["channels"], wide, has_bias)
    assert lib.eb_conv_transpose_tile_slot_bytes(params, tile, wide, has_bias) == layout["slot"]
    window = tiling.Window(**{k: cfg[k] for k in (
        "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h", "pad_h",
        "pad_w", "dil_h", "groups")}, wide=wide, bias=has_bias, transposed=True)
    oc_t = conv_tile_channels(cfg, case["channels"])
    if oc_t % tiling.step(window) == 0:  # a tile the planner can choose: its slot formula agrees
        assert tiling.slot_bytes(window, min(case["rows"], cfg["out_h"]), oc_t) == layout["slot"]
    slots = 2 if case["double"] else 1
    l1 = l1_buffer(slots * layout["slot"])
    order = tiles(cfg["out_c"], conv_tile_channels(cfg, case["channels"]), cfg["out_h"],
                  case["rows"])
    rec = Recorder(lib, l1, layout, slots, len(order))
    got = out_buffer(count, wide)
    lib.tt_convt_tiled(params, tile, int(wide), ptr(x), ptr(w), ptr(bias, I32),
                       got.ctypes.data, ptr(l1))

    np.testing.assert_array_equal(checked(got, count), expected, err_msg=str(case))
    check_guard(l1, slots * layout["slot"])
    assert rec.calls() == len(order)
    staged = [staged_convt_input(cfg, x, *t) for t in order]
    for i, (_, c_t, y0, rows) in enumerate(order):
        first, n = convt_span(cfg, y0, rows)
        want = dict(cfg, in_c=conv_tile_inputs(cfg, c_t), in_h=n, out_c=c_t, out_h=rows,
                    pad_h=y0 + cfg["pad_h"] - first * cfg["stride_h"],
                    groups=conv_tile_groups(cfg, c_t))
        assert {k: getattr(rec.params[i], k) for k in want} == want, f"tile {i} params"
        rec.check_call(i, layout, has_bias, staged)


@EXAMPLES
@given(convt_cases())
def test_conv_transpose2d_tiled_matches_untiled(lib, case):
    check_convt_tiled(lib, case)


def convt_cfg(out_pad: int = 0, **kw) -> dict:
    cfg = conv_cfg(**kw)
    for axis in ("h", "w"):
        cfg[f"out_{axis}"] = convt_out(cfg[f"in_{axis}"], cfg[f"k_{axis}"], cfg[f"stride_{axis}"],
                                       cfg[f"pad_{axis}"], out_pad, cfg[f"dil_{axis}"])
    return cfg


@pytest.mark.parametrize("case", [
    # the MAX7800x upsampler (3x3, stride 2, pad 1, output padding 1), dense, 3 of 5 channels
    fixed_case(convt_cfg(in_c=3, in_h=5, in_w=4, out_c=5, k_h=3, k_w=3, stride_h=2,
                         stride_w=2, pad_h=1, pad_w=1, out_pad=1, shift=-6), 2, 3),
    # 1x1 stride 2, output padding 1: the last output row reads no input (bias alone)
    fixed_case(convt_cfg(in_c=2, in_h=3, in_w=3, out_c=4, groups=2, stride_h=2, stride_w=2,
                         out_pad=1, shift=-3), 1, 1),
    # 2 groups of 4 outputs, 3 asked: 2 (a divisor): weights gathered per input channel
    fixed_case(convt_cfg(in_c=4, in_h=4, in_w=3, out_c=8, groups=2, k_h=2, k_w=3, stride_h=3,
                         dil_w=2, pad_w=1, shift=-5), 3, 3, wide=True),
], ids=["upsampler", "output-padding-only-rows", "grouped-sub-group"])
@pytest.mark.parametrize("double", [False, True], ids=["single", "double"])
def test_conv_transpose2d_tiled_fixed(lib, case, double):
    check_convt_tiled(lib, dict(case, double=double))


@st.composite
def pool_cases(draw):
    c = draw(st.integers(1, 8))
    k_h, k_w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    in_h, in_w = draw(st.integers(k_h, 12)), draw(st.integers(k_w, 12))
    s_h, s_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cfg = {"c": c, "in_h": in_h, "in_w": in_w, "out_h": (in_h - k_h) // s_h + 1,
           "out_w": (in_w - k_w) // s_w + 1, "k_h": k_h, "k_w": k_w, "stride_h": s_h,
           "stride_w": s_w, "mode": draw(st.integers(0, 1)), "rounding": draw(st.integers(0, 1))}
    return {"cfg": cfg, "rows": draw(st.integers(1, cfg["out_h"] + 1)),
            "channels": draw(st.integers(1, c + 1)), "double": draw(st.booleans()),
            "seed": draw(st.integers(0, 2**32 - 1))}


@EXAMPLES
@given(pool_cases())
def test_pool2d_tiled_matches_untiled(lib, case):
    cfg = case["cfg"]
    rng = np.random.default_rng(case["seed"])
    x = int8_data(rng, (cfg["c"], cfg["in_h"], cfg["in_w"]))
    before = x.copy()
    params = pool_params(cfg)
    count = cfg["c"] * cfg["out_h"] * cfg["out_w"]
    expected = out_buffer(count, False)
    lib.eb_pool2d(params, ptr(x), ptr(expected))
    expected = checked(expected, count)

    tile = Tile(case["rows"], case["channels"], case["double"])
    layout = pool_slot_layout(cfg, case["rows"], case["channels"])
    assert lib.eb_pool_tile_slot_bytes(params, tile) == layout["slot"]
    size = (2 if case["double"] else 1) * layout["slot"]
    l1 = l1_buffer(size)
    got = out_buffer(count, False)
    lib.eb_pool2d_tiled(params, tile, ptr(x), ptr(got), ptr(l1))
    np.testing.assert_array_equal(checked(got, count), expected, err_msg=str(case))
    check_guard(l1, size)
    np.testing.assert_array_equal(x, before)


@st.composite
def linear_cases(draw):
    out_f = draw(st.integers(1, 40))
    return {"in_f": draw(st.integers(1, 300)), "out_f": out_f,
            "channels": draw(st.integers(1, out_f + 1)), "rows": draw(st.integers(1, 5)),
            "double": draw(st.booleans()), "wide": draw(st.booleans()),
            "bias": draw(st.booleans()), "shift": draw(st.integers(-14, 3)),
            "rounding": draw(st.integers(0, 1)), "act": draw(st.integers(0, 2)),
            "seed": draw(st.integers(0, 2**32 - 1))}


@EXAMPLES
@given(linear_cases())
def test_linear_tiled_matches_untiled(lib, case):
    in_f, out_f, wide, has_bias = case["in_f"], case["out_f"], case["wide"], case["bias"]
    rng = np.random.default_rng(case["seed"])
    x, w = int8_data(rng, (in_f,)), int8_data(rng, (out_f, in_f))
    bias = bias_data(rng, out_f, has_bias)
    expected = out_buffer(out_f, wide)
    if wide:
        lib.eb_linear_wide(in_f, out_f, ptr(x), ptr(w), ptr(bias, I32), ptr(expected, I32))
    else:
        lib.eb_linear(in_f, out_f, ptr(x), ptr(w), ptr(bias, I32), case["shift"],
                      case["rounding"], case["act"], ptr(expected))
    expected = checked(expected, out_f)

    tile = Tile(case["rows"], case["channels"], case["double"])  # rows: ignored for linear
    assert lib.eb_linear_tile_slot_bytes(in_f, tile, wide, has_bias) == \
        linear_slot_layout(in_f, case["channels"], wide, has_bias)["slot"]
    layout = linear_slot_layout(in_f, min(case["channels"], out_f), wide, has_bias)
    slots = 2 if case["double"] else 1
    l1 = l1_buffer(slots * layout["slot"])
    step = min(case["channels"], out_f)
    order = [(o0, min(step, out_f - o0)) for o0 in range(0, out_f, step)]
    rec = Recorder(lib, l1, layout, slots, len(order))
    got = out_buffer(out_f, wide)
    lib.tt_linear_tiled(in_f, out_f, tile, int(wide), case["shift"], case["rounding"],
                        case["act"], ptr(x), ptr(w), ptr(bias, I32), got.ctypes.data, ptr(l1))

    np.testing.assert_array_equal(checked(got, out_f), expected, err_msg=str(case))
    check_guard(l1, slots * layout["slot"])
    assert rec.calls() == len(order)
    for i, (_, oc_t) in enumerate(order):
        assert rec.dims[i].tolist() == [in_f, oc_t]
        rec.check_call(i, layout, has_bias, [x] * len(order))


# ---- slot sizes over wider shapes (no data: C function vs the Python formula) --------------

@EXAMPLES
@given(st.data())
def test_slot_bytes_match_formula(lib, data):
    draw = data.draw
    groups = draw(st.integers(1, 16))
    cfg = {"in_c": groups * draw(st.integers(1, 16)), "out_c": groups * draw(st.integers(1, 16)),
           "groups": groups, "shift": 0, "rounding": 0, "act": 0}
    for axis in ("h", "w"):
        k, stride = draw(st.integers(1, 7)), draw(st.integers(1, 4))
        pad, dil = draw(st.integers(0, 3)), draw(st.integers(1, 3))
        size = draw(st.integers(max(1, dil * (k - 1) + 1 - 2 * pad), 64))
        cfg.update({f"k_{axis}": k, f"stride_{axis}": stride, f"pad_{axis}": pad,
                    f"dil_{axis}": dil, f"in_{axis}": size,
                    f"out_{axis}": conv_out(size, k, stride, pad, dil)})
    opg = cfg["out_c"] // groups
    rows = draw(st.integers(1, cfg["out_h"] + 2))
    channels = draw(st.one_of(st.integers(1, groups + 1).map(lambda n: n * opg),
                              st.integers(1, cfg["out_c"] + 2)))
    wide, has_bias = draw(st.booleans()), draw(st.booleans())
    assert lib.eb_conv_tile_slot_bytes(conv_params(cfg), Tile(rows, channels, 1), wide,
                                       has_bias) == \
        conv_slot_layout(cfg, rows, channels, wide, has_bias)["slot"]

    pool = {"c": draw(st.integers(1, 64)), "k_h": draw(st.integers(1, 4)),
            "k_w": draw(st.integers(1, 4)), "stride_h": draw(st.integers(1, 4)),
            "stride_w": draw(st.integers(1, 4)), "mode": 0, "rounding": 0}
    pool["in_h"] = draw(st.integers(pool["k_h"], 64))
    pool["in_w"] = draw(st.integers(pool["k_w"], 64))
    pool["out_h"] = (pool["in_h"] - pool["k_h"]) // pool["stride_h"] + 1
    pool["out_w"] = (pool["in_w"] - pool["k_w"]) // pool["stride_w"] + 1
    rows, channels = draw(st.integers(1, pool["out_h"] + 2)), draw(st.integers(1, 70))
    assert lib.eb_pool_tile_slot_bytes(pool_params(pool), Tile(rows, channels, 0)) == \
        pool_slot_layout(pool, rows, channels)["slot"]

    in_f, channels = draw(st.integers(1, 2000)), draw(st.integers(1, 256))
    assert lib.eb_linear_tile_slot_bytes(in_f, Tile(1, channels, 0), wide, has_bias) == \
        linear_slot_layout(in_f, channels, wide, has_bias)["slot"]
