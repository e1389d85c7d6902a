"""eb_add_opt (eb_pool_opt.c) against the reference eb_add on hypothesis-drawn element-wise
adds: 1 to 6 inputs (two: QADD8; more: halfword sums), any length (the last n % 4 elements
by the reference arithmetic), act none / relu / abs, values at the int8 extremes (the
saturations and abs(-128)). On the host (portable C) and on the Cortex-M4 under QEMU (the
SIMD code), each M4 example one firmware of several adds."""

from __future__ import annotations

import ctypes

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_abi import I8
from test_kernels_opt import (
    build_m4,
    c_array,
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    run_qemu,
)
from test_kernels_opt_paths import pool_lib  # noqa: F401 (the fixture)

P8 = ctypes.POINTER(I8)


@st.composite
def adds(draw) -> tuple[int, int, int]:
    """(n, count, act); seeds for the data are drawn apart."""
    return (draw(st.integers(1, 70)), draw(st.sampled_from([1, 2, 2, 2, 3, 4, 6])),
            draw(st.integers(0, 2)))


def add_data(rng, n: int, count: int) -> list[np.ndarray]:
    """int8 arrays, a third of them near the extremes (sums that saturate)."""
    out = []
    for _ in range(count):
        x = rng.integers(-128, 128, size=n)
        edge = rng.random(n) < 0.3
        x[edge] = rng.choice([-128, -127, -100, 100, 126, 127], size=int(edge.sum()))
        out.append(x.astype(np.int8))
    return out


def expected(inputs: list[np.ndarray], act: int) -> np.ndarray:
    total = np.sum([x.astype(np.int64) for x in inputs], axis=0)
    if act == 1:
        total = np.maximum(total, 0)
    elif act == 2:
        total = np.abs(total)
    return np.clip(total, -128, 127).astype(np.int8)


def run(pool_lib, name: str, inputs, act: int) -> np.ndarray:  # noqa: F811
    n = inputs[0].size
    table = (P8 * len(inputs))(*(x.ctypes.data_as(P8) for x in inputs))
    out = np.full(n + 8, 0x5A, dtype=np.int8)
    fn = getattr(pool_lib, name)
    fn.restype = None
    fn(n, len(inputs), table, act, out.ctypes.data_as(P8))
    assert (out[n:] == 0x5A).all(), f"{name} wrote past its output"
    return out[:n]


@settings(max_examples=300, deadline=None)
@given(case=adds(), seed=st.integers(0, 2**32 - 1))
def test_add_opt_host(pool_lib, case, seed):  # noqa: F811
    n, count, act = case
    inputs = add_data(np.random.default_rng(seed), n, count)
    want = expected(inputs, act)
    np.testing.assert_array_equal(run(pool_lib, "eb_add", inputs, act), want)
    np.testing.assert_array_equal(run(pool_lib, "eb_add_opt", inputs, act), want)


def m4_add_program(cases) -> str:
    """eb_pool_opt.c included (the test firmware links eb_kernels(_opt).c only)."""
    parts = ['#include <stdio.h>\n#include <string.h>\n#include "eb_kernels.h"\n'
             '#include "eb_kernels_opt.h"\n#include "eb_pool_opt.c"\n'
             "static int8_t out[80];\n"]
    calls = []
    for i, (inputs, act) in enumerate(cases):
        n = inputs[0].size
        names = []
        for j, x in enumerate(inputs):
            parts.append(c_array("int8_t", f"x{i}_{j}", x))
            names.append(f"x{i}_{j}")
        parts.append(c_array("int8_t", f"e{i}", expected(inputs, act)))
        parts.append(f"static const int8_t *const in{i}[] = {{{', '.join(names)}}};\n")
        calls.append(f"memset(out, 0x5A, sizeof out); eb_add_opt({n}, {len(inputs)}, in{i}, {act}, out);\n"
                     f"if (memcmp(out, e{i}, {n}) != 0 || out[{n}] != 0x5A) {{ ++bad; "
                     f'printf("case {i}: MISMATCH\\n"); }}\n')
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("eb_add_opt on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


@needs_m4
@settings(max_examples=4, deadline=None)
@given(cases=st.lists(adds(), min_size=10, max_size=20), seed=st.integers(0, 2**32 - 1))
def test_m4_add_opt_equals_reference(m4_build, cases, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    data = [(add_data(rng, n, count), act) for n, count, act in cases]
    elf = build_m4(m4_build, "add_opt", m4_add_program(data))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout
