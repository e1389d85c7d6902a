"""The tiled paths of a Cortex-M4 project, on the M4 under QEMU and on the host, bit for bit
against the untiled reference kernels (the oracle), on random shapes: the split conv
(eb_conv2d_tiled_cols on eb_conv_cols_build/dot: odd channel counts, strides, padding,
dilation, 1-D columns) behind a tiled fused pool (eb_pool2d_tiled_k on eb_pool2d_opt), the
split linear with int8 and packed 1-, 2-, 4-bit weights (eb_linear_tiled_cols), and
eb_dma_copy (LDM/STM blocks on the M4) at every size and alignment. Each hypothesis example
is one program holding a batch of cases; it runs compiled for the M4 (the DSP kernels) and
for the host (-DEB_OPT_PORTABLE); the tile of each case is the planner's
(memory.tiling.choose, split layout) for a random L1 budget."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kernels_opt import (  # noqa: F401  (m4_build: the fixture)
    ARM_GCC,
    CFLAGS,
    KERNELS,
    M4_FLAGS,
    M4_LINK,
    QEMU,
    c_array,
    kernel_objects,
    m4_build,
    run_qemu,
)
from test_tiling_opt import conv_out

from edgebuild.core import packing
from edgebuild.memory import tiling

GCC = shutil.which("gcc")
SOURCES = ("eb_kernels.c", "eb_kernels_opt.c", "eb_dw_opt.c", "eb_pool_opt.c", "eb_tiling.c")
GUARD = 16

PRELUDE = r"""
#include <stdio.h>
#include <string.h>
#include "eb_kernels.h"
#include "eb_kernels_opt.h"
#include "eb_tiling.h"

static union { int32_t align; int16_t values[SCRATCH]; } scratch;
static union { int32_t align; int8_t bytes[L1 + 16]; } l1;
static union { int32_t align; int8_t bytes[BUF + 16]; } ref, got;
static int g_shift, g_rounding, g_act, g_wide;
static const eb_cols_kernel cols_k = {eb_conv_cols_build, eb_conv_cols_dot, scratch.values,
                                      eb_conv_cols_prepare, eb_conv_cols_run};

static void lin_dot(int n, int m, const int16_t *c, const int8_t *w, const int32_t *b, void *out)
{
    eb_linear_dot(n, m, c, w, b, g_shift, g_rounding, g_act, g_wide, out);
}

static const eb_linear_cols lin_k = {eb_linear_expand, lin_dot, scratch.values};

static void unused_kernel(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                          const int32_t *b, void *out)
{
    (void)p; (void)in; (void)w; (void)b; (void)out;
}

static void fill(int8_t *buf, int n) { memset(buf, 0x5A, (size_t)n + 16); }

static int same(const char *what, int c, int bytes, int l1_bytes)
{
    int i, bad = memcmp(ref.bytes, got.bytes, (size_t)bytes) != 0;
    for (i = bytes; i < bytes + 16; ++i) bad |= got.bytes[i] != 0x5A;
    for (i = l1_bytes; i < l1_bytes + 16; ++i) bad |= l1.bytes[i] != 0x5A;
    if (bad) printf("case %d %s: MISMATCH\n", c, what);
    return bad;
}

static uint8_t dma_src[400], dma_dst[400], dma_want[400];

static int dma_case(int c, int dst_off, int src_off, int n)
{
    int i;
    for (i = 0; i < 400; ++i) {
        dma_src[i] = (uint8_t)(i * 7 + 3);
        dma_dst[i] = dma_want[i] = 0xA5;
    }
    memcpy(dma_want + dst_off, dma_src + src_off, (size_t)n);
    eb_dma_copy(dma_dst + dst_off, dma_src + src_off, (uint32_t)n);
    if (memcmp(dma_dst, dma_want, sizeof dma_dst) != 0) {
        printf("dma %d (dst +%d, src +%d, %d bytes): MISMATCH\n", c, dst_off, src_off, n);
        return 1;
    }
    return 0;
}
"""


def axis(draw, one_d: bool) -> dict:
    """k, stride, pad, dil, in, out of one axis (all 1 along a 1-D layer's width)."""
    if one_d:
        return {"k": 1, "stride": 1, "pad": 0, "dil": 1, "in": 1, "out": 1}
    k, stride = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    pad, dil = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    size = draw(st.integers(max(1, dil * (k - 1) + 1 - 2 * pad), 10))
    return {"k": k, "stride": stride, "pad": pad, "dil": dil, "in": size,
            "out": conv_out(size, k, stride, pad, dil)}


@st.composite
def conv_cases(draw) -> dict:
    """A dense conv (in_c > 1: the split path) with an optional fused max/avg pool before it:
    2-D or a 1-D column [C][L][1]."""
    one_d = draw(st.booleans())
    cfg = {"in_c": draw(st.integers(2, 19)), "out_c": draw(st.integers(1, 23)), "groups": 1,
           "shift": draw(st.integers(-12, -4)), "rounding": draw(st.integers(0, 1)),
           "act": draw(st.integers(0, 2)), "wide": draw(st.booleans()),
           "bias": draw(st.booleans()), "double": draw(st.booleans()),
           "budget": draw(st.floats(0, 1)), "seed": draw(st.integers(0, 2**31))}
    for name, ax in (("h", axis(draw, False)), ("w", axis(draw, one_d))):
        cfg.update({f"k_{name}": ax["k"], f"stride_{name}": ax["stride"],
                    f"pad_{name}": ax["pad"], f"dil_{name}": ax["dil"],
                    f"in_{name}": ax["in"], f"out_{name}": ax["out"]})
    cfg["pool"] = draw(st.sampled_from([None, (2, 0), (2, 1), (3, 0), (4, 1)]))  # (size, avg)
    return cfg


@st.composite
def linear_cases(draw) -> dict:
    return {"in_f": draw(st.integers(1, 200)), "out_f": draw(st.integers(1, 20)),
            "bits": draw(st.sampled_from([0, 1, 2, 4])), "wide": draw(st.booleans()),
            "bias": draw(st.booleans()), "double": draw(st.booleans()),
            "budget": draw(st.floats(0, 1)), "shift": draw(st.integers(-12, 0)),
            "rounding": draw(st.integers(0, 1)), "act": draw(st.integers(0, 2)),
            "seed": draw(st.integers(0, 2**31))}


def _tile(w: tiling.Window, budget: float, double: bool) -> tiling.Tile:
    """The planner's tile for a budget between the smallest tile's and the whole layer's; a
    layer whose smallest tile holds it whole runs untiled in a project: its whole L1 here."""
    smallest = tiling.smallest_l1(w, double)
    tile = tiling.choose("x", w, int(smallest + budget * max(0, tiling.whole(w) - 1 - smallest)),
                         double, split=True)
    assert tile is not None
    if tile.tiled:
        return tile
    need = max((tile.l1_bytes + 3) & ~3, tiling.slot_bytes(w, w.out_h, w.out_c),
               tiling.split_l1(w, w.out_h, w.out_c, 1 + double)[1] if w.split else 0)
    # (the driver on one tile of it: its slot's regions each 4-byte aligned -- a 2-channel
    # pool of 3 x 1 rows puts its 2 outputs at byte 8, past the 6 + 2 of the whole layer --
    # or the split layout)
    return tiling.Tile("x", w.out_h, w.out_c, 1, 0, need, 0, 0, False)


class Program:
    """A batch of cases as C: data arrays, and per case the reference then the tiled run."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.calls: list[str] = []
        self.sizes = {"SCRATCH": 16, "L1": 16, "BUF": 16}

    def need(self, key: str, n: int) -> None:
        self.sizes[key] = max(self.sizes[key], n)

    def source(self) -> str:
        defines = "".join(f"#define {k} {v}\n" for k, v in self.sizes.items())
        return (defines + PRELUDE + "".join(self.parts) + "int main(void)\n{\n    int bad = 0;\n" +
                "".join(self.calls) + '    printf("tiled on target: %d mismatching calls\\n", '
                "bad);\n    return bad != 0;\n}\n")

    def conv(self, i: int, cfg: dict) -> None:
        rng = np.random.default_rng(cfg["seed"])
        pool = cfg["pool"]
        in_h = cfg["in_h"] * pool[0] + pool[0] - 1 if pool else cfg["in_h"]  # floor mode
        raw = (cfg["in_c"], in_h, cfg["in_w"])
        self.parts += [c_array("int8_t", f"x{i}", rng.integers(-128, 128, raw)),
                       c_array("int8_t", f"w{i}", rng.integers(-128, 128, (
                           cfg["out_c"], cfg["in_c"], cfg["k_h"], cfg["k_w"])))]
        bias = "NULL"
        if cfg["bias"]:
            b = rng.integers(-3000, 3000, cfg["out_c"])
            if cfg["seed"] % 3 == 0:  # a bias at the int32 limit: the dot's exact-row path
                b[cfg["seed"] % cfg["out_c"]] = 2**31 - 1 - cfg["in_c"] * cfg["k_h"] * \
                    cfg["k_w"] * 16384
            self.parts.append(c_array("int32_t", f"b{i}", b))
            bias = f"b{i}"
        source = f"x{i}"
        if pool:
            source = self._pool(i, cfg, in_h)
        fields = [cfg[k] for k in ("in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h",
                                   "k_w", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h",
                                   "dil_w", "groups", "shift", "rounding", "act")]
        self.parts.append(f"static const eb_conv_params p{i} = {{{', '.join(map(str, fields))}, "
                          "0};\n")
        w = tiling.Window(**{k: cfg[k] for k in (
            "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h",
            "stride_w", "pad_h", "pad_w", "dil_h", "dil_w")}, wide=cfg["wide"], bias=cfg["bias"],
            split=True)
        tile = _tile(w, cfg["budget"], cfg["double"])
        rows = min(tile.rows, cfg["out_h"])
        self.need("SCRATCH", ((rows * cfg["out_w"] + 3) & ~3) * (
            (cfg["in_c"] * cfg["k_h"] * cfg["k_w"] + 3) & ~3))
        self.need("L1", tile.l1_bytes)
        wide = int(cfg["wide"])
        out = cfg["out_c"] * cfg["out_h"] * cfg["out_w"] * (4 if wide else 1)
        self.need("BUF", out)
        ref = (f"eb_conv2d_wide(&p{i}, {source}, w{i}, {bias}, (int32_t *)ref.bytes)" if wide
               else f"eb_conv2d(&p{i}, {source}, w{i}, {bias}, ref.bytes)")
        self.parts.append(f"static const eb_tile t{i} = {{{tile.rows}, {tile.channels}, "
                          f"{int(cfg['double'])}}};\n")
        self.calls.append(
            f"    {ref};\n    fill(got.bytes, {out}); fill(l1.bytes, {tile.l1_bytes});\n"
            f"    eb_conv2d_tiled_cols(&p{i}, &t{i}, unused_kernel, &cols_k, {wide}, {source}, "
            f"w{i}, {bias}, got.bytes, l1.bytes);\n"
            f"    bad += same(\"conv\", {i}, {out}, {tile.l1_bytes});\n")

    def _pool(self, i: int, cfg: dict, in_h: int) -> str:
        """The fused input pool along the rows (the conv's input: pooled.bytes), tiled."""
        size, avg = cfg["pool"]
        w = tiling.Window(cfg["in_c"], in_h, cfg["in_w"], cfg["in_c"], cfg["in_h"], cfg["in_w"],
                          k_h=size, stride_h=size, groups=cfg["in_c"], weights=False)
        tile = _tile(w, cfg["budget"], cfg["double"])
        n = cfg["in_c"] * cfg["in_h"] * cfg["in_w"]
        self.need("L1", tile.l1_bytes)
        self.need("BUF", n)
        self.parts.append(
            f"static const eb_pool_params q{i} = {{{cfg['in_c']}, {in_h}, {cfg['in_w']}, "
            f"{cfg['in_h']}, {cfg['in_w']}, {size}, 1, {size}, 1, {avg}, {cfg['rounding']}}};\n"
            f"static const eb_tile tp{i} = {{{tile.rows}, {tile.channels}, "
            f"{int(cfg['double'])}}};\nstatic int8_t px{i}[{n}];\n")
        self.calls.append(
            f"    eb_pool2d(&q{i}, x{i}, px{i});\n    fill(got.bytes, {n}); "
            f"fill(l1.bytes, {tile.l1_bytes});\n"
            f"    eb_pool2d_tiled_k(&q{i}, &tp{i}, eb_pool2d_opt, x{i}, got.bytes, l1.bytes);\n"
            f"    memcpy(ref.bytes, px{i}, {n});\n"
            f"    bad += same(\"pool\", {i}, {n}, {tile.l1_bytes});\n")
        return f"px{i}"

    def linear(self, i: int, cfg: dict) -> None:
        rng = np.random.default_rng(cfg["seed"])
        in_f, out_f, bits, wide = cfg["in_f"], cfg["out_f"], cfg["bits"], int(cfg["wide"])
        if bits:
            high = 1 << (bits - 1)
            stored = packing.pack(rng.integers(-high, high, (out_f, in_f)), bits).view(np.int8)
        else:
            stored = rng.integers(-128, 128, (out_f, in_f))
        self.parts += [c_array("int8_t", f"lx{i}", rng.integers(-128, 128, in_f)),
                       c_array("int8_t", f"lw{i}", stored)]
        bias = "NULL"
        if cfg["bias"]:
            self.parts.append(c_array("int32_t", f"lb{i}", rng.integers(-3000, 3000, out_f)))
            bias = f"lb{i}"
        w = tiling.Window(in_f, 1, 1, out_f, 1, 1, wide=cfg["wide"], bias=cfg["bias"],
                          linear=True, split=True)
        tile = _tile(w, cfg["budget"], cfg["double"])
        self.need("SCRATCH", (in_f + 3) & ~3)
        self.need("L1", tile.l1_bytes)
        out = out_f * (4 if wide else 1)
        self.need("BUF", out)
        q = f"{cfg['shift']}, {cfg['rounding']}, {cfg['act']}"
        args = f"{in_f}, {out_f}, {bits}, lx{i}, lw{i}, {bias}"
        if bits:
            ref = (f"eb_linear_packed_wide({args}, (int32_t *)ref.bytes)" if wide else
                   f"eb_linear_packed({args}, {q}, ref.bytes)")
        else:
            args = f"{in_f}, {out_f}, lx{i}, lw{i}, {bias}"
            ref = (f"eb_linear_wide({args}, (int32_t *)ref.bytes)" if wide else
                   f"eb_linear({args}, {q}, ref.bytes)")
        self.parts.append(f"static const eb_tile lt{i} = {{{tile.rows}, {tile.channels}, "
                          f"{int(cfg['double'])}}};\n")
        self.calls.append(
            f"    {ref};\n    fill(got.bytes, {out}); fill(l1.bytes, {tile.l1_bytes});\n"
            f"    g_shift = {cfg['shift']}; g_rounding = {cfg['rounding']}; "
            f"g_act = {cfg['act']}; g_wide = {wide};\n"
            f"    eb_linear_tiled_cols({in_f}, {out_f}, {bits}, &lt{i}, &lin_k, {wide}, lx{i}, "
            f"lw{i}, {bias}, got.bytes, l1.bytes);\n"
            f"    bad += same(\"linear\", {i}, {out}, {tile.l1_bytes});\n")

    def dma(self, cases: list[tuple[int, int, int]]) -> None:
        for i, (dst, src, n) in enumerate(cases):
            self.calls.append(f"    bad += dma_case({i}, {dst}, {src}, {n});\n")


def run_both(tmp: Path, source: str) -> None:
    """The program built for the host and, when the toolchain is there, for the M4."""
    (tmp / "prog.c").write_text(source)
    kernels = [str(KERNELS / name) for name in SOURCES]
    host = subprocess.run([GCC, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror",
                           "-DEB_STANDALONE", "-DEB_OPT_PORTABLE", f"-I{KERNELS}", "prog.c", *kernels, "-o", "host"],
                          cwd=tmp, capture_output=True, text=True, timeout=120)
    assert host.returncode == 0, host.stderr
    run = subprocess.run(["./host"], cwd=tmp, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "0 mismatching" in run.stdout, run.stdout + run.stderr
    if ARM_GCC is None or QEMU is None:
        return  # the host half only
    elf = tmp / "prog.elf"
    objects = kernel_objects(tmp, sources=SOURCES)  # the same kernels each example
    build = subprocess.run([ARM_GCC, *M4_FLAGS, *CFLAGS, f"-I{KERNELS}", *M4_LINK,
                            "-Wl,-T," + str(tmp / "link.ld"), "-o", str(elf),
                            str(tmp / "startup_m4.c"), "prog.c", *map(str, objects)],
                           cwd=tmp, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    result = run_qemu(elf)
    assert result.returncode == 0 and "0 mismatching" in result.stdout, \
        result.stdout + result.stderr


pytestmark = pytest.mark.skipif(GCC is None, reason="gcc is not on PATH")


@settings(max_examples=6, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(st.lists(conv_cases(), min_size=4, max_size=6),
       st.lists(linear_cases(), min_size=4, max_size=6),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(0, 300)),
                min_size=6, max_size=10))
def test_tiled_paths_equal_the_reference_on_m4_and_host(m4_build, convs, linears,  # noqa: F811
                                                        dmas):
    program = Program()
    for i, cfg in enumerate(convs):
        program.conv(i, cfg)
    for i, cfg in enumerate(linears):
        program.linear(i, cfg)
    program.dma(dmas + [(0, 0, 32), (0, 0, 64), (4, 4, 96), (1, 3, 33), (0, 0, 0)])
    run_both(m4_build, program.source())


def test_a_whole_layer_on_the_driver_has_its_slots_alignment(m4_build):  # noqa: F811
    """A layer that fits L1 whole, run on the tiled driver (one tile), needs the driver's
    slot -- each region 4-byte aligned -- not the layer's bytes: a fused average pool of 2
    channels over 3 x 1 rows (6 input bytes, 2 outputs at byte 8; hypothesis found it
    writing past the 8 bytes the whole layer counts)."""
    w = tiling.Window(2, 3, 1, 2, 1, 1, k_h=2, stride_h=2, groups=2, weights=False)
    assert _tile(w, 0.75, True).l1_bytes >= tiling.slot_bytes(w, 1, 2) == 12
    cfg = {"in_c": 2, "out_c": 22, "groups": 1, "shift": -6, "rounding": 0, "act": 0,
           "wide": False, "bias": False, "double": True, "budget": 0.75, "seed": 100833,
           "k_h": 1, "stride_h": 2, "pad_h": 0, "dil_h": 1, "in_h": 1, "out_h": 1, "k_w": 1,
           "stride_w": 1, "pad_w": 0, "dil_w": 1, "in_w": 1, "out_w": 1, "pool": (2, 1)}
    program = Program()
    program.conv(0, cfg)
    program.linear(0, {"in_f": 83, "out_f": 6, "bits": 0, "wide": True, "bias": True,
                       "double": True, "budget": 0.5, "shift": -9, "rounding": 0, "act": 0,
                       "seed": 73527})
    program.dma([(0, 0, 32)])
    run_both(m4_build, program.source())
