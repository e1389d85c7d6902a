"""The optimized kernels' 32-bit requantization (eb_store in templates/kernels/eb_kernels_opt.c)
against the reference eb_requantize (eb_kernels.h, int64 arithmetic), value by value.

A harness #includes eb_kernels_opt.c (its static eb_store becomes callable) and compares for
every right shift 0..31 and the left-shift / past-31 fallbacks, both roundings and every
activation:

* a dense sweep: windows around 0 and both int32 limits, every power of two and its
  neighbours, and for each shift the values on both sides of every rounding boundary
  m * 2^s +- 2^(s-1) for m spread over the whole int32 range;
* hypothesis-drawn int32 accumulators (any value) on the host;
* the same dense sweep built for the Cortex-M4 (SSAT/USAT) and run under QEMU;
* eb_linear_opt (rows 4, then 2, then 1 at a time: eb_dot_4x1 / eb_dot_2x1 / eb_dot_1x1) on
  hypothesis-drawn sizes against eb_linear, int8 and wide outputs (the M4 build of the same
  kernels runs in test_kernels_opt.py's QEMU firmware).
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_opt import (
    ARM_GCC,
    CFLAGS,
    GCC,
    KERNELS,
    M4_FLAGS,
    M4_LINK,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    random_bias,
    run_linear_pair,
    run_qemu,
)

pytestmark = pytest.mark.skipif(GCC is None, reason="no host C compiler")

HARNESS = r"""
#include "eb_kernels.c"     /* eb_requantize, and eb_unpack_weights the packed paths call */
#include "eb_kernels_opt.c"

/* acc[0 .. n) through eb_store in blocks of 1..4 (two rows of up to 2 when odd); returns
 * the mismatches against eb_requantize. */
long eb_rq_check(int shift, int rounding, int act, const int32_t *acc, long n)
{
    int8_t got[8];
    eb_sink s;
    long i, bad = 0;
    s.out8 = got;
    s.out32 = NULL;
    s.shift = shift;
    s.rounding = rounding;
    s.act = act;
    for (i = 0; i < n; i += 4) {
        const int count = n - i < 4 ? (int)(n - i) : 4;
        int j;
        if (count == 4 && (i & 4)) { /* 2 rows x 2, row stride 4 */
            eb_store(&s, 0, 4, acc + i, 2, 2, 2);
            for (j = 0; j < 4; ++j) {
                bad += got[(j >> 1) * 4 + (j & 1)] != eb_requantize(acc[i + j], shift, rounding, act);
            }
        } else {
            eb_store(&s, 0, 0, acc + i, 0, 1, count);
            for (j = 0; j < count; ++j) {
                bad += got[j] != eb_requantize(acc[i + j], shift, rounding, act);
            }
        }
    }
    return bad;
}

static int32_t buf[4096];
static int nbuf;
static long bad_total;
static int cur_shift, cur_rounding, cur_act;

static void flush(void)
{
    bad_total += eb_rq_check(cur_shift, cur_rounding, cur_act, buf, nbuf);
    nbuf = 0;
}

static void put(int64_t v)
{
    if (v < INT32_MIN || v > INT32_MAX) {
        return;
    }
    buf[nbuf++] = (int32_t)v;
    if (nbuf == 4096) {
        flush();
    }
}

/* The dense sweep for one (shift, rounding, act); window: half-width of the windows. */
static void sweep_one(int window)
{
    int64_t v, m;
    int k, d;
    const int s = cur_shift < 0 ? -cur_shift : 0;
    for (v = -window; v <= window; ++v) put(v);
    for (v = 0; v <= window; ++v) { put((int64_t)INT32_MIN + v); put((int64_t)INT32_MAX - v); }
    for (k = 0; k < 32; ++k) {
        for (d = -3; d <= 3; ++d) { put(((int64_t)1 << k) + d); put(-((int64_t)1 << k) + d); }
    }
    if (s > 0 && s < 40) {
        const int64_t step = (int64_t)1 << s, half = step >> 1;
        const int64_t mmax = ((int64_t)1 << 31) / step + 1;
        const int64_t mstep = mmax / 200 + 1;
        for (m = -mmax; m <= mmax; m += mstep) {
            for (d = -2; d <= 2; ++d) {
                put(m * step + half + d);
                put(m * step - half + d);
                put(m * step + d);
            }
        }
        for (m = -300; m <= 300; ++m) {  /* the int8 output range and just beyond */
            for (d = -1; d <= 1; ++d) { put(m * step + half + d); put(m * step + d); }
        }
    }
    flush();
}

long eb_rq_sweep(int window)
{
    int shift, rounding, act;
    bad_total = 0;
    for (shift = -40; shift <= 8; ++shift) {
        for (rounding = EB_ROUND_HALF_UP; rounding <= EB_ROUND_FLOOR; ++rounding) {
            for (act = EB_ACT_NONE; act <= EB_ACT_ABS; ++act) {
                cur_shift = shift;
                cur_rounding = rounding;
                cur_act = act;
                sweep_one(window);
            }
        }
    }
    return bad_total;
}
"""

M4_MAIN = r"""
#include <stdio.h>
int main(void)
{
    long bad = eb_rq_sweep(512);
    printf("requant mismatches: %ld\n", bad);
    return bad != 0;
}
"""

P32 = ctypes.POINTER(ctypes.c_int32)


@pytest.fixture(scope="module")
def rq_lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_requant_opt")
    (build / "rq.c").write_text(HARNESS)
    shared = build / "librq.so"
    result = subprocess.run(
        [GCC, *CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", str(build / "rq.c"),
         str(KERNELS / "eb_dw_opt.c"), "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    so.eb_rq_check.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, P32, ctypes.c_long]
    so.eb_rq_check.restype = ctypes.c_long
    so.eb_rq_sweep.argtypes = [ctypes.c_int]
    so.eb_rq_sweep.restype = ctypes.c_long
    return so


def test_requant_dense_sweep(rq_lib):
    assert rq_lib.eb_rq_sweep(1 << 14) == 0


@settings(max_examples=300, deadline=None)
@given(accs=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=64),
       shift=st.integers(-34, 4), rounding=st.sampled_from([0, 1]), act=st.sampled_from([0, 1, 2]))
def test_requant_random_accumulators(rq_lib, accs, shift, rounding, act):
    arr = np.ascontiguousarray(accs, dtype=np.int32)
    assert rq_lib.eb_rq_check(shift, rounding, act, arr.ctypes.data_as(P32), arr.size) == 0


@needs_m4
def test_requant_dense_sweep_under_qemu(m4_build: Path):  # noqa: F811 (the fixture)
    (m4_build / "rq.c").write_text(HARNESS + M4_MAIN)
    elf = m4_build / "rq.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, f"-I{KERNELS}", *M4_LINK, "-Wl,-T," + str(m4_build / "link.ld"),
         "-o", str(elf), str(m4_build / "startup_m4.c"), str(m4_build / "rq.c"),
         str(KERNELS / "eb_dw_opt.c")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    run = run_qemu(elf)
    assert "requant mismatches: 0" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 0


@settings(max_examples=80, deadline=None)
@given(in_f=st.integers(1, 300), out_f=st.integers(1, 14), shift=st.integers(-20, 2),
       rounding=st.sampled_from([0, 1]), act=st.sampled_from([0, 1, 2]),
       seed=st.integers(0, 2**32 - 1))
def test_linear_opt_random_sizes(lib, in_f, out_f, shift, rounding, act, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (in_f,))
    w, _ = int_weights(rng, (out_f, in_f))
    bias = random_bias(rng, out_f)
    q = {"shift": shift, "rounding": rounding, "act": act}
    for wide in (True, False):
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"in_f={in_f} out_f={out_f} {q}")
