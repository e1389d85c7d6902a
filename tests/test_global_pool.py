"""global_pool (issue 29, item 6): max or average of each channel's whole map, any size.

- shapes: (C, L) -> (C, 1), (C, H, W) -> (C, 1, 1), any map size; other ranks refused;
- the integer reference (exact sum divided with the pooling rule, or the maximum) against
  the torch fake-quant forward, float64 and float32, on hypothesis-drawn maps and modes;
- the C kernels (templates/kernels/eb_global_pool.c): reference and optimized against the
  integer rule on the host (every alignment, maps past the 32-bit block of 2^23 values,
  where a 32-bit sum or eb_pool2d's 2 x sum + count would overflow) and on the Cortex-M4
  under QEMU (the LDM / USADA8 / SSUB8 assembly);
- pool1d / pool2d windows beyond the old cap of 64 (the C takes int16 sizes);
- the C project takes the kernel file only when a layer needs it (existing projects, and
  the golden files, are unchanged).

The end-to-end builds (KAT on host and Cortex-M4, ONNX int8, MAX78000) are in
test_global_pool_e2e.py.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tool
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_opt import (
    ARM_GCC,
    CFLAGS,
    GCC,
    KERNELS,
    build_m4,
    c_array,
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    run_qemu,
)

from edgebuild.core import numerics
from edgebuild.core.geometry import ShapeError
from edgebuild.manifest import Model
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import Mode

ROUNDINGS = ("half_up", "floor", "half_up/trunc")
C_ROUNDING = {"half_up": 0, "floor": 1, "half_up/trunc": 2}  # EB_ROUND_* (eb_kernels.h)
C_MODE = {"max": 0, "avg": 1}  # EB_POOL_*


def layer(mode: str = "avg"):
    return OPS["global_pool"].params(name="g", op="global_pool", mode=mode)


def expected(x: np.ndarray, mode: str, rounding: str) -> np.ndarray:
    """The rule, written out: per sample and channel, the maximum or the exact sum divided
    by the map size with the pooling rule (numerics.np_divide_round)."""
    flat = x.reshape(*x.shape[:2], -1).astype(np.int64)
    if mode == "max":
        return flat.max(axis=2)
    return numerics.np_divide_round(flat.sum(axis=2), flat.shape[2], rounding)


# --- shapes ---------------------------------------------------------------------------------

def test_shapes_keep_the_rank_with_every_side_one():
    op = OPS["global_pool"]
    assert op.out_shape(layer(), [(4, 106)]) == (4, 1)
    assert op.out_shape(layer("max"), [(4, 7, 9)]) == (4, 1, 1)
    assert op.out_shape(layer(), [(2, 100_000)]) == (2, 1)  # any size
    with pytest.raises(ShapeError, match="global_pool expects"):
        op.out_shape(layer(), [(10,)])


def test_a_global_pool_layer_in_a_model():
    model = Model.model_validate({"input": [3, 106], "layers": [
        {"name": "c", "op": "conv1d", "out": 8, "kernel": 3, "pad": 1},
        {"name": "gap", "op": "global_pool", "mode": "avg"},
        {"name": "fc", "op": "linear", "out": 4, "flatten": True}]})
    graph, problems = graphs.build(model.input, model.layers)
    assert problems == [] and graph is not None
    assert [n.out_shape for n in graph.nodes] == [(8, 106), (8, 1), (4,)]
    assert graph.nodes[1].params == 0 and graph.nodes[1].macs == 0


# --- integer reference vs torch fake-quant ----------------------------------------------------

@st.composite
def maps(draw) -> tuple[np.ndarray, str, str]:
    """(int8 batch (N, C, *map), mode, rounding): 1-D maps up to 400 long, 2-D up to 40x40,
    values random or from the rails (ties and extreme sums)."""
    n, c = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    spatial = (draw(st.integers(1, 400)),) if draw(st.booleans()) else (
        draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = draw(st.sampled_from(["random", "rails", "small"]))
    shape = (n, c, *spatial)
    x = (rng.integers(-128, 128, shape) if values == "random" else
         rng.choice([-128, 127], shape) if values == "rails" else rng.integers(-2, 3, shape))
    return x.astype(np.int64), draw(st.sampled_from(["avg", "max"])), draw(
        st.sampled_from(ROUNDINGS))


@settings(max_examples=150, deadline=None)
@given(maps())
def test_reference_is_the_rule_and_equals_torch_fake_quant(case):
    x, mode, rounding = case
    op = OPS["global_pool"]
    got = op.reference(layer(mode), None, [x], rounding)
    keep = (len(x), x.shape[1], *(1 for _ in x.shape[2:]))
    assert got.shape == keep
    assert np.array_equal(got.reshape(len(x), -1), expected(x, mode, rounding))
    for dtype in (torch.float64, torch.float32):
        fake = op.torch.forward(layer(mode), None, [torch.as_tensor(x / 128.0, dtype=dtype)],
                                Mode("qat", rounding))
        assert tuple(fake.shape) == keep
        assert np.array_equal((fake.numpy().astype(np.float64) * 128).astype(np.int64), got), \
            (dtype, mode, rounding)


def test_float_forward_is_the_plain_mean_and_max():
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64)
    op = OPS["global_pool"]
    mean = op.torch.forward(layer("avg"), None, [x], Mode("float"))
    top = op.torch.forward(layer("max"), None, [x], Mode("float"))
    assert torch.allclose(mean, x.mean(dim=(2, 3), keepdim=True))
    assert torch.equal(top, x.amax(dim=(2, 3), keepdim=True))


def test_half_up_halves_round_up_and_trunc_goes_toward_zero():
    x = np.array([[[1, 0], [-1, 0], [3, 0], [-3, 0]]]).reshape(1, 4, 2)  # sums 1, -1, 3, -3
    op = OPS["global_pool"]
    assert op.reference(layer(), None, [x], "half_up").ravel().tolist() == [1, 0, 2, -1]
    assert op.reference(layer(), None, [x], "floor").ravel().tolist() == [0, -1, 1, -2]
    assert op.reference(layer(), None, [x], "half_up/trunc").ravel().tolist() == [0, 0, 1, -1]


# --- the C kernels on the host ----------------------------------------------------------------

class GlobalPoolParams(ctypes.Structure):
    """Mirror of eb_global_pool_params (eb_global_pool.h)."""

    _fields_ = [("c", ctypes.c_int32), ("n", ctypes.c_int32), ("mode", ctypes.c_int8),
                ("rounding", ctypes.c_int8)]


PROBE = """#include <stddef.h>
#include "eb_global_pool.h"
int eb_test_sizeof(void) { return (int)sizeof(eb_global_pool_params); }
int eb_test_offsetof_mode(void) { return (int)offsetof(eb_global_pool_params, mode); }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    tool("gcc")
    build = tmp_path_factory.mktemp("eb_global_pool")
    (build / "probe.c").write_text(PROBE)
    so = build / "libgp.so"
    result = subprocess.run([GCC, *CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", "-o", str(so),
                             str(KERNELS / "eb_global_pool.c"), str(build / "probe.c")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    return ctypes.CDLL(str(so))


def run_kernel(lib, kernel: str, x: np.ndarray, mode: str, rounding: str,
               offset: int = 0) -> np.ndarray:
    """One call on x (C, n) placed `offset` bytes into a guarded buffer; the 16 bytes after
    the output must stay untouched."""
    c, n = x.shape
    buffer = np.zeros(offset + x.size + 8, np.int8)
    buffer[offset:offset + x.size] = x.ravel()
    out = np.full(c + 16, 0x5A, np.int8)
    params = GlobalPoolParams(c, n, C_MODE[mode], C_ROUNDING[rounding])
    getattr(lib, kernel)(ctypes.byref(params), buffer[offset:].ctypes.data_as(ctypes.c_void_p),
                         out.ctypes.data_as(ctypes.c_void_p))
    assert (out[c:] == 0x5A).all(), "wrote past its output"
    return out[:c].astype(np.int64)


def test_struct_layout_matches_the_header(lib):
    assert lib.eb_test_sizeof() == ctypes.sizeof(GlobalPoolParams)
    assert lib.eb_test_offsetof_mode() == GlobalPoolParams.mode.offset


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5), st.integers(1, 300), st.integers(0, 3),
       st.sampled_from(["avg", "max"]), st.sampled_from(ROUNDINGS),
       st.sampled_from(["random", "rails", "negative"]), st.integers(0, 2**32 - 1))
def test_both_kernels_follow_the_rule_at_every_alignment(lib, c, n, offset, mode, rounding,
                                                          values, seed):
    rng = np.random.default_rng(seed)
    x = (rng.integers(-128, 128, (c, n)) if values == "random" else
         rng.choice([-128, 127], (c, n)) if values == "rails" else
         rng.integers(-128, -100, (c, n))).astype(np.int8)
    want = expected(x[None], mode, rounding)[0]
    for kernel in ("eb_global_pool", "eb_global_pool_opt"):
        assert np.array_equal(run_kernel(lib, kernel, x, mode, rounding, offset), want), kernel


@pytest.mark.parametrize("n", [(1 << 23) - 1, (1 << 23) + 5, (1 << 24) + 3])
def test_averages_past_the_32_bit_block_do_not_overflow(lib, n):
    """2^23 and more values: the int32 block sums go into an int64 total and the division
    is 64-bit (a plain int32 sum of 2^24 values of -128 is -2^31, and 2 x sum + n wraps)."""
    rng = np.random.default_rng(n)
    cases = {"rails": np.full((1, n), -128, np.int8), "high": np.full((1, n), 127, np.int8),
             "random": rng.integers(-128, 128, (1, n)).astype(np.int8)}
    cases["rails"][0, -3:] = 5  # a sum that is not a multiple of n
    for name, x in cases.items():
        for rounding in ROUNDINGS:
            want = expected(x[None], "avg", rounding)[0]
            for kernel in ("eb_global_pool", "eb_global_pool_opt"):
                got = run_kernel(lib, kernel, x, "avg", rounding, offset=1)
                assert np.array_equal(got, want), (kernel, name, rounding)


# --- the C kernels on the Cortex-M4 -------------------------------------------------------------

M4_MAIN = """
#include <stdio.h>
#include "eb_global_pool.h"
#include "eb_global_pool.c"

static int8_t in_buf[IN_BYTES + 8] __attribute__((aligned(4)));
static int8_t out_buf[OUT + 16];

static int run(int case_id, const int8_t *x, int offset, int c, int n, int mode, int rounding,
               const int8_t *want, int opt)
{
    eb_global_pool_params p;
    int i, bad = 0;
    p.c = c; p.n = n; p.mode = (int8_t)mode; p.rounding = (int8_t)rounding;
    for (i = 0; i < c * n; ++i) in_buf[offset + i] = x[i];
    for (i = 0; i < OUT + 16; ++i) out_buf[i] = 0x5A;
    if (opt) eb_global_pool_opt(&p, in_buf + offset, out_buf);
    else eb_global_pool(&p, in_buf + offset, out_buf);
    for (i = 0; i < c; ++i) bad |= out_buf[i] != want[i];
    for (i = c; i < OUT + 16; ++i) bad |= out_buf[i] != 0x5A;
    if (bad) printf("case %d (%s): MISMATCH\\n", case_id, opt ? "opt" : "ref");
    return bad;
}
"""


@needs_m4
def test_kernels_equal_the_rule_on_the_cortex_m4(m4_build):  # noqa: F811 (the fixture)
    rng = np.random.default_rng(29)
    parts, calls, largest, most = [], [], 16, 1
    cases = [(int(rng.integers(1, 5)), int(n), int(rng.integers(0, 4)))
             for n in [1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 63, 64, 65, 106, 255, 1000, 4099]]
    for i, (c, n, offset) in enumerate(cases):
        x = rng.integers(-128, 128, (c, n)).astype(np.int8)
        if i % 3 == 0:
            x[:, ::2] = -128
        parts.append(c_array("int8_t", f"x{i}", x))
        for mode in ("avg", "max"):
            for rounding in ROUNDINGS if mode == "avg" else ("half_up",):
                name = f"e{i}_{mode}_{C_ROUNDING[rounding]}"
                parts.append(c_array("int8_t", name, expected(x[None], mode, rounding)[0]))
                for opt in (0, 1):
                    calls.append(f"    bad += run({i}, x{i}, {offset}, {c}, {n}, {C_MODE[mode]}, "
                                 f"{C_ROUNDING[rounding]}, {name}, {opt});\n")
        largest, most = max(largest, offset + c * n), max(most, c)
    source = (f"#define IN_BYTES {largest}\n#define OUT {most}\n" + M4_MAIN + "".join(parts)
              + "int main(void)\n{\n    int bad = 0;\n" + "".join(calls)
              + '    printf("eb_global_pool on M4: %d mismatching calls\\n", bad);\n'
                "    return bad != 0;\n}\n")
    elf = build_m4(m4_build, "global_pool_kat", source, ("-DEB_STANDALONE",))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "eb_global_pool on M4: 0 mismatching calls" in result.stdout


def test_the_m4_build_runs_the_word_wide_assembly(tmp_path):
    """The optimized kernel's loops on the M4 are the LDM + EOR/USADA8 and SSUB8/SEL ones
    (and compile without the frame pointer r7, at -O0 too)."""
    tool("arm-none-eabi-gcc")
    for level in ("-O2", "-O0"):
        obj = tmp_path / f"gp{level}.o"
        result = subprocess.run([ARM_GCC, "-mcpu=cortex-m4", "-mthumb", *CFLAGS, level, "-c",
                                 f"-I{KERNELS}", "-o", str(obj),
                                 str(KERNELS / "eb_global_pool.c")],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    dump = subprocess.run([ARM_GCC.replace("gcc", "objdump"), "-d", str(tmp_path / "gp-O2.o")],
                          capture_output=True, text=True, timeout=60).stdout
    for instruction in ("ldmia", "usada8", "ssub8", "sel"):
        assert instruction in dump, instruction


# --- pool1d / pool2d beyond 64 -------------------------------------------------------------------

def build(input_shape, *layers):
    model = Model.model_validate({"input": list(input_shape), "layers": list(layers)})
    return graphs.build(model.input, model.layers)


def test_pool_layers_take_windows_beyond_64():
    graph, problems = build((3, 106), {"name": "p", "op": "pool1d", "mode": "avg", "size": 106})
    assert problems == [] and graph is not None and graph.nodes[0].out_shape == (3, 1)
    graph, problems = build((2, 100, 90), {"name": "p", "op": "pool2d", "mode": "max",
                                           "size": [100, 90]})
    assert problems == [] and graph is not None and graph.nodes[0].out_shape == (2, 1, 1)


def test_the_pool_window_limits_that_remain():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):  # eb_pool_params holds int16 sizes
        Model.model_validate({"input": [1, 40000], "layers": [
            {"name": "p", "op": "pool1d", "mode": "avg", "size": 40000}]})
    graph, problems = build((1, 4000, 4000), {"name": "p", "op": "pool2d", "mode": "avg",
                                              "size": [4000, 4000]})
    assert graph is None and "a global_pool averages any number" in problems[0].message
    with pytest.raises(ValidationError):  # a convolution's fused pool keeps its limit
        Model.model_validate({"input": [1, 100, 100], "layers": [
            {"name": "c", "op": "conv2d", "out": 1, "pool": {"mode": "max", "size": 65}}]})


# --- the C project --------------------------------------------------------------------------------

def test_the_kernel_file_comes_only_with_a_global_pool():
    from edgebuild.codegen.project import kernel_files

    for cpu in ("host", "cortex-m4"):
        sources, headers = kernel_files(cpu, False, {"global_pool"})
        assert "eb_global_pool.c" in sources and "eb_global_pool.h" in headers
        sources, headers = kernel_files(cpu, False, ())
        assert "eb_global_pool.c" not in sources and "eb_global_pool.h" not in headers


def test_the_emitter_calls_the_optimized_kernel_on_the_m4_only():
    from edgebuild.ops.c import CStep

    def step(optimized: bool):
        return CStep(layer(), ((8, 7, 9),), (8, 1, 1), None, "half_up/trunc", ("T_c",), "T_g",
                     None, None, None, False, optimized)

    emit = OPS["global_pool"].c.emit
    m4, host = emit(step(True)), emit(step(False))
    assert m4.calls == ("EB_GLOBAL_POOL(&Q_g, T_c, T_g);",)
    assert host.calls == ("eb_global_pool(&Q_g, T_c, T_g);",)
    assert m4.paths == host.paths == frozenset({"global_pool"})
    assert ".n = 63" in host.decls[0] and "EB_ROUND_TRUNC" in host.decls[0]
    assert "EB_POOL_AVG" in host.decls[0] and ".c = 8" in host.decls[0]
    assert Path(KERNELS / "eb_global_pool.h").is_file()
