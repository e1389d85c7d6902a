"""Linear layers on the optimized kernels (eb_kernels_opt.c: eb_linear_core, its fast rows
eb_linear_fast), against the reference kernel bit for bit: hypothesis over widths of 1..80
inputs (a row's last 1..3 weights loaded as a whole word where another row follows: the
bytes past the row meet zeros in the column) and 1..40 outputs (the last 1..3 rows after
the blocks of 4), every requantization -- the fast forms (right shift, relu or none, half up
or floor) and the rest (left shifts, abs) --, biases at the edges of the fast form's range
(bias + 2^(s-1) + the largest sum at INT32_MAX, bias + the smallest sum at INT32_MIN) and
wide outputs. On the host (portable C) and on the Cortex-M4 under QEMU, where layers of 4..12
inputs with a bias take a form of their own input count ("linear_k<K>")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernel_selection import _defines
from test_kernels_opt import (
    assert_m4_exact,
    build_m4,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_instructions,
    m4_test_program,
    needs_m4,
    run_linear_pair,
    run_qemu,
)

from edgebuild.ops.linear import short_form

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


@st.composite
def linear_layers(draw) -> tuple:
    """(in_f, out_f, x, w, bias, q) as test_kernels_opt.linear_case makes them."""
    in_f, out_f = draw(st.integers(1, 80)), draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=in_f).astype(np.int8)
    w = rng.integers(-128, 128, size=(out_f, in_f)).astype(np.int8)
    if draw(st.booleans()):  # the largest sums: every product 2^14
        x[:] = -128
        w[:] = -128
    q = {"shift": draw(st.integers(-20, 3)), "rounding": draw(st.integers(0, 1)),
         "act": draw(st.integers(0, 2))}
    kind = draw(st.sampled_from(["none", "random", "edges"]))
    bias = None
    if kind == "random":
        bias = rng.integers(-(1 << 22), 1 << 22, size=out_f).astype(np.int32)
    elif kind == "edges":  # around the fast form's bounds (eb_linear_fast: hi, lo)
        x[:] = -128  # every product 2^14: bias hi + 1 would overflow the fast sums
        w[:] = -128
        s = max(0, -q["shift"])
        r = (1 << (s - 1)) if s > 0 and q["rounding"] == 0 else 0
        hi, lo = INT32_MAX - in_f * 16384 - r, INT32_MIN + in_f * 16384
        bias = np.array([int(rng.choice([hi, hi + 1, hi - 1, lo, lo - 1]))
                         for _ in range(out_f)], dtype=np.int32)
    return in_f, out_f, x, w, bias, q


@settings(max_examples=300, deadline=None)
@given(case=linear_layers())
def test_linear_opt_equals_reference(lib, case):  # noqa: F811
    in_f, out_f, x, w, bias, q = case
    for wide in (False, True):
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {in_f}->{out_f} {q}")


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cases=st.lists(linear_layers(), min_size=12, max_size=16))
def test_m4_linear_opt_equals_reference(lib, m4_build, cases):  # noqa: F811
    elf = build_m4(m4_build, "linear", m4_test_program(lib, [], linear_cases=cases))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout, result.stdout


def _top_cases() -> list[tuple]:
    """Sums at INT32_MAX itself: every product 2^14 and the bias the rest, so that a = the
    sum + bias = INT32_MAX. Requantized half up by 1 (q + 1 overflows unless saturated:
    eb_half's QADD) or more, relu and none, row-at-a-time (10 inputs) and blocks of 4 (26)."""
    cases = []
    for in_f in (10, 26):
        for shift in (-1, -2, -9):
            for act in (0, 1):
                x = np.full(in_f, -128, dtype=np.int8)
                w = np.full((9, in_f), -128, dtype=np.int8)
                bias = np.full(9, INT32_MAX - in_f * 16384, dtype=np.int32)
                bias[::2] -= np.arange(5, dtype=np.int32)  # and just below it
                cases.append((in_f, 9, x, w, bias, {"shift": shift, "rounding": 0, "act": act}))
    return cases


def _tail_cases() -> list[tuple]:
    """The M4's blocks by hand (eb_linear_asm) at every tail: 4..13 inputs and some wider
    ones (whole words plus 0..3 more), 4..9 rows (a last block with and without rows after
    it: with none, one whose rows end in 2 or 3 inputs is left to C), relu and none, half up
    and floor, shifts 1..20, random weights and biases (none for 8 rows)."""
    rng = np.random.default_rng(32)
    cases = []
    for in_f in (*range(4, 14), 25, 26, 27, 64, 67):
        for out_f in (4, 5, 8, 9):
            q = {"shift": -int(rng.integers(1, 21)), "rounding": int(rng.integers(0, 2)),
                 "act": int(rng.integers(0, 2))}
            x = rng.integers(-128, 128, size=in_f).astype(np.int8)
            w = rng.integers(-128, 128, size=(out_f, in_f)).astype(np.int8)
            bias = rng.integers(-(1 << 20), 1 << 20, size=out_f).astype(np.int32)
            cases.append((in_f, out_f, x, w, None if out_f == 8 else bias, q))
    return cases


# Sums at INT32_MAX itself; the M4's blocks by hand at every tail.
CASE_SETS = {"linear_top": _top_cases, "linear_tails": _tail_cases}


@pytest.mark.parametrize("name", CASE_SETS)
def test_linear_opt_equals_reference_on_case_sets(lib, name):  # noqa: F811
    for in_f, out_f, x, w, bias, q in CASE_SETS[name]():
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide=False)
        np.testing.assert_array_equal(opt, ref, err_msg=f"{name}: {in_f}->{out_f} {q}")


@needs_m4
@pytest.mark.parametrize("name", CASE_SETS)
def test_m4_linear_opt_equals_reference_on_case_sets(lib, m4_build, name):  # noqa: F811
    elf = build_m4(m4_build, name, m4_test_program(lib, [], linear_cases=CASE_SETS[name]()))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout, result.stdout


def test_short_forms_named_for_their_layers():
    """"linear_k<K>" for a layer of 4..12 inputs with a bias; none for 3 or 13 inputs, or
    without a bias (eb_linear4 runs those rows)."""
    assert short_form(11, True) == {"linear_k11"} and short_form(4, True) == {"linear_k4"}
    assert short_form(12, True) == {"linear_k12"}
    assert not short_form(3, True) and not short_form(13, True) and not short_form(11, False)


@needs_m4
def test_m4_short_forms_exact_at_every_width(lib, m4_build):  # noqa: F811
    """Every form, 4..12 inputs (a row's last 1, 2 or 3 weights byte by byte, as a half or
    as a word), 13 and 12 rows (a last block with a row after it or none), relu and none,
    half up and floor, at a right shift of 5..8 where most outputs lie inside int8: equal
    to the reference on the M4."""
    rng = np.random.default_rng(34)
    cases = []
    for in_f in range(4, 13):
        for out_f in (13, 12):
            x = rng.integers(-128, 128, size=in_f).astype(np.int8)
            w = rng.integers(-128, 128, size=(out_f, in_f)).astype(np.int8)
            bias = rng.integers(-(1 << 12), 1 << 12, size=out_f).astype(np.int32)
            q = {"shift": -int(rng.integers(5, 9)), "rounding": out_f & 1, "act": in_f & 1}
            cases.append((in_f, out_f, x, w, bias, q))
    elf = build_m4(m4_build, "short_widths", m4_test_program(lib, [], linear_cases=cases))
    assert_m4_exact(elf, "short_widths")


@needs_m4
def test_m4_short_forms_take_the_rows(lib, m4_build):  # noqa: F811
    """11 -> 64 (relu, half up), 10 -> 61 (none, floor: a last block left to C) and 4 -> 33
    on the M4: exact with the form of their input count and with it left out (eb_linear4's
    blocks then); with it at least 3 instructions a row fewer (measured 11 -> 1594: 26.2 ->
    20.7 a row)."""
    rng = np.random.default_rng(33)
    for in_f, out_f, act, rounding in ((11, 64, 1, 0), (10, 61, 0, 1), (4, 33, 1, 0)):
        x = rng.integers(-128, 128, size=in_f).astype(np.int8)
        w = rng.integers(-128, 128, size=(out_f, in_f)).astype(np.int8)
        bias = rng.integers(-(1 << 20), 1 << 20, size=out_f).astype(np.int32)
        case = (in_f, out_f, x, w, bias, {"shift": -9, "rounding": rounding, "act": act})
        source = m4_test_program(lib, [], linear_cases=[case])
        counts = []
        for name, defines in (("on", ()), ("off", _defines((f"linear_k{in_f}",)))):
            elf = build_m4(m4_build, f"short_{name}_{in_f}", source, defines)
            assert_m4_exact(elf, name)
            counts.append(m4_instructions(m4_build, elf))
        assert counts[0] <= counts[1] - 3 * out_f, (in_f, counts)
