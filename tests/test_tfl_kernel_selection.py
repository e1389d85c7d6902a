"""Which paths of the Cortex-M4 kernels for TFLite's number format a project links
(templates/kernels/eb_tfl_opt.c; ops.c OPTIONAL_PATHS "tfl_*" -> eb_config.h's
EB_OPT_NO_TFL_<PATH>): the emitters name, per layer, the paths it runs
(formats.tflite.paths), and a model links only those. Leaving a path out must never change
a result -- its layers take the next path, at worst the portable kernel -- and the
prediction must name the path the C takes, or the layer would run slower than it can. On
the Cortex-M4 under QEMU, a layer of each path (tests/test_kernel_selection.py does the same
for edgebuild's own kernels)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_kernels_opt import (
    ARM_GCC,
    CFLAGS,
    KERNELS,
    M4_FLAGS,
    M4_LINK,
    c_array,
    count_with_plugin,
    m4_build,  # noqa: F401 (the fixture)
    needs_m4,
    run_qemu,
    symbol_addresses,
)
from test_tflite_kernels import linear_case, m4_case, pool_case

from edgebuild.formats.tflite import kernels
from edgebuild.formats.tflite import paths as tfl_paths
from edgebuild.formats.tflite.quant import TflQuant
from edgebuild.ops.c import OPTIONAL_PATHS

TFL_PATHS = tuple(p for p in OPTIONAL_PATHS if p.startswith("tfl_"))
POOL_FIELDS = ("c", "in_h", "in_w", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w",
               "mode", "act_min", "act_max", "pad_top", "pad_left")

# (m4_case spec, index) of a convolution of each path: index % 3 == 0 gives a layer slow
# channels (a huge bias, shifts past the assembly's), which keep it off the pair GEMM
CONVS = [
    (dict(kind="pointwise", in_c=24, h=5, w=5, out_c=20), 1),  # pairs, flat
    (dict(kind="dense", in_c=5, h=9, w=8, out_c=8, k=3, pad=1), 2),  # pairs, band
    (dict(kind="pointwise", in_c=64, h=3, w=7, out_c=9, clamp=True), 2),  # odd: gemm4, clamp
    (dict(kind="pointwise", in_c=32, h=6, w=8, out_c=30), 3),  # slow channels: gemm4
    (dict(kind="dense", in_c=32, h=6, w=7, out_c=20, k=3, pad=1), 6),  # int8 weights: gemm8
    (dict(kind="dense", in_c=32, h=5, w=6, out_c=18, k=3, clamp=True), 5),  # gemm8, clamp
    (dict(kind="depthwise", in_c=6, h=9, w=5, out_c=6, k=3, pad=1), 7),  # s1, strip
    (dict(kind="depthwise", in_c=6, h=16, w=1, out_c=6, k=3, pad=1), 16),  # the strip alone
    (dict(kind="depthwise", in_c=4, h=6, w=8, out_c=8, k=3, pad=1), 9),  # s1, slow channels
    (dict(kind="depthwise", in_c=5, h=7, w=5, out_c=10, k=3, pad=1, clamp=True), 10),  # clamp
    (dict(kind="depthwise", in_c=4, h=12, w=16, out_c=4, k=3, stride=2, pad=(0, 1)), 11),
    (dict(kind="depthwise", in_c=3, h=11, w=13, out_c=9, k=3, stride=2, pad=1, clamp=True), 13),
    (dict(kind="depthwise", in_c=3, h=9, w=9, out_c=3, k=5, pad=2), 14),  # the C loops
]
# (in_f, out_f) of a linear layer of each path: narrow, aligned rows (triples, a last pair
# and a last row; pairs only), any rows
LINEARS = [(64, 2), (64, 13), (24, 7), (30, 5)]
# pool_case's (c, h, w, kernel, stride, mode): global average, average and max windows
# (a window of long runs: on 2x2 ones the portable loop is as fast)
POOLS = [(16, 5, 5, (5, 5), 1, "avg"), (3, 11, 13, (2, 7), 2, "avg"),
         (3, 17, 17, (17, 17), 1, "max")]


def _layers() -> list[tuple[str, dict]]:
    """Every layer above with its data and reference output: (kind, case)."""
    rng = np.random.default_rng(41)
    layers = [("conv", m4_case(spec, index, pruned=False)) for spec, index in CONVS]
    layers += [("linear", linear_case(rng, in_f, out_f)) for in_f, out_f in LINEARS]
    for spec in POOLS:
        case = pool_case(rng, *spec)
        case["params"] = dict(zip(POOL_FIELDS, case.pop("fields"), strict=True))
        layers.append(("pool", case))
    return layers


def predicted(kind: str, case: dict) -> frozenset[str]:
    """The paths the generator names for the layer (tflite.operators' emitters)."""
    p = case["params"]
    if kind == "pool":
        return tfl_paths.pool_paths(p)
    if kind == "linear":
        return tfl_paths.linear_paths(p)
    q = TflQuant((p["in_zp"],), p["out_zp"], p["act_min"], p["act_max"], 1.0, case["mult"],
                 case["shift"], weight=case["w"], bias=case["bias"])
    return tfl_paths.conv_paths(p, q)


MAIN = """
static int16_t scratch[SCRATCH + 16] __attribute__((aligned(4)));
static int8_t out[OUT + 16];
static int8_t w_odd[W + 8] __attribute__((unused));
volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_begin(void) { eb_bench_marker = 1; }
__attribute__((noinline)) void eb_bench_end(void) { eb_bench_marker = 2; }

static void fill(void)
{
    int i;
    memset(out, 0x5A, sizeof out);
    for (i = 0; i < SCRATCH + 16; ++i) scratch[i] = 0x5A5A;
}

/* the outputs, and nothing written past them or past the layer's scratch */
static int check(int id, const int8_t *want, int n, int32_t used)
{
    int i, bad = 0;
    for (i = 0; i < n; ++i) bad |= out[i] != want[i];
    for (i = n; i < n + 16; ++i) bad |= out[i] != 0x5A;
    for (i = used; i < SCRATCH + 16; ++i) bad |= scratch[i] != 0x5A5A;
    if (bad) printf("layer %d: MISMATCH\\n", id);
    return bad;
}
"""


def _call(i: int, kind: str, case: dict, weights: str) -> str:
    """The optimized kernel's call for layer i and its check."""
    n = case["ref"].size
    if kind == "pool":
        return (f"    fill(); eb_bench_begin(); eb_tfl_pool2d_opt(&p{i}, x{i}, out); "
                f"eb_bench_end(); bad += check({i}, e{i}, {n}, 0);\n")
    fn, need = (("eb_tfl_conv2d_opt", "eb_tfl_conv_scratch") if kind == "conv"
                else ("eb_tfl_linear_opt", "eb_tfl_linear_scratch"))
    return (f"    fill(); eb_bench_begin(); {fn}(&p{i}, x{i}, {weights}, b{i}, m{i}, s{i}, out, "
            f"scratch); eb_bench_end(); bad += check({i}, e{i}, {n}, {need}(&p{i}));\n")


def _scratch(kind: str, p: dict) -> int:
    if kind == "linear":
        return kernels.linear_scratch(p["in_f"])
    if kind == "pool":
        return 0
    return kernels.conv_scratch(*(p[f] for f in (
        "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w",
        "dil_h", "dil_w", "groups")))


def source(layers: list[tuple[str, dict]], odd_linear: bool = True) -> str:
    """A firmware running each layer's optimized kernel (weights word-aligned, as weights.c
    has them; with `odd_linear` a linear layer's at an odd address too) against the
    reference's outputs; it prints the mismatching layers' count."""
    parts, calls = ['#include <stdio.h>\n#include <string.h>\n#include "eb_tfl.h"\n'], []
    sizes = {"SCRATCH": 16, "OUT": 16, "W": 16}
    for i, (kind, case) in enumerate(layers):
        struct = {"conv": "eb_tfl_conv_params", "linear": "eb_tfl_fc_params",
                  "pool": "eb_tfl_pool_params"}[kind]
        fields = ", ".join(f".{k} = {v}" for k, v in case["params"].items())
        parts += [f"static const {struct} p{i} = {{{fields}}};\n",
                  c_array("int8_t", f"x{i}", case["x"]), c_array("int8_t", f"e{i}", case["ref"])]
        sizes["OUT"] = max(sizes["OUT"], case["ref"].size)
        sizes["SCRATCH"] = max(sizes["SCRATCH"], _scratch(kind, case["params"]))
        if kind != "pool":
            parts += [c_array("int8_t", f"w{i}", case["w"]), c_array("int32_t", f"m{i}", case["mult"]),
                      c_array("int32_t", f"s{i}", case["shift"]),
                      c_array("int32_t", f"b{i}", case["bias"]) if case["bias"] is not None
                      else f"static const int32_t *const b{i} = NULL;\n"]
            sizes["W"] = max(sizes["W"], case["w"].size)
        calls.append(_call(i, kind, case, f"w{i}"))
        if kind == "linear" and odd_linear:
            calls.append(f"    memcpy(w_odd + 3, w{i}, sizeof w{i});\n"
                         + _call(i, kind, case, "w_odd + 3"))
    head = "".join(f"#define {key} {value}\n" for key, value in sizes.items())
    return (head + "".join(parts) + MAIN + "int main(void)\n{\n    int bad = 0;\n"
            + "".join(calls) + '    printf("%d mismatching layers\\n", bad);\n'
            "    return bad != 0;\n}\n")


def _defines(left_out) -> tuple[str, ...]:
    return tuple(f"-DEB_OPT_NO_{path.upper()}" for path in left_out)


def build(build_dir: Path, name: str, text: str, defines: tuple[str, ...]) -> Path:
    (build_dir / f"{name}.c").write_text(text)
    elf = build_dir / f"{name}.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, *defines, f"-I{KERNELS}", *M4_LINK, "-ffunction-sections",
         "-Wl,--gc-sections", "-Wl,-T," + str(build_dir / "link.ld"), "-o", str(elf),
         str(build_dir / "startup_m4.c"), str(build_dir / f"{name}.c"),
         str(KERNELS / "eb_tfl.c"), str(KERNELS / "eb_tfl_opt.c")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


def _text(elf: Path) -> int:
    out = subprocess.run([ARM_GCC.replace("gcc", "size"), str(elf)], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.splitlines()[1].split()[0])


def _run_exact(elf: Path, what: str) -> None:
    result = run_qemu(elf)
    assert result.returncode == 0, f"{what}: exit {result.returncode}\n{result.stdout}"
    assert "0 mismatching layers" in result.stdout, f"{what}\n{result.stdout}"


def test_paths_are_optional_paths_the_kernels_know():
    """Every path the emitters name is one eb_config.h may define away and eb_tfl_opt.c
    tests for (a misspelt one would be left out nowhere), and the layers here name each."""
    text = (KERNELS / "eb_tfl_opt.c").read_text()
    for path in TFL_PATHS:
        assert f"EB_OPT_NO_{path.upper()}" in text, path
    named = frozenset().union(*(predicted(kind, case) for kind, case in _layers()))
    assert named == set(TFL_PATHS), sorted(set(TFL_PATHS) ^ named)


def test_predictions_of_the_mlperf_shapes():
    """The paths of KWS's and VWW's layers as eb_tfl_opt.c's tests choose them: full-range
    activations take no clamping form; a 3x3 stride-1 depthwise of 5 columns the strip
    kernel, of 48 none; a pointwise layer of fast channels the pair GEMM; a wide one tiles
    of records (pairs), a 3x3 dense one of 288 taps per channel int8 weights."""
    def conv(in_c, hw, out_c, k, groups=1, stride=1, pad=0) -> dict:
        out = (hw + 2 * pad - k) // stride + 1
        return dict(in_c=in_c, in_h=hw, in_w=hw, out_c=out_c, out_h=out, out_w=out, k_h=k,
                    k_w=k, stride_h=stride, stride_w=stride, pad_top=pad, pad_left=pad,
                    dil_h=1, dil_w=1, groups=groups)

    def quant(f: dict, shift: int = -8, lo: int = -128) -> TflQuant:
        rng = np.random.default_rng(3)
        w = rng.integers(-128, 128, (f["out_c"], f["in_c"] // f["groups"], f["k_h"], f["k_w"]))
        return TflQuant((-128,), -128, lo, 127, 1.0, np.full(f["out_c"], 1 << 30),
                        np.full(f["out_c"], shift), weight=w, bias=np.zeros(f["out_c"], int))

    kws_dw = dict(conv(64, 5, 64, 3, 64, pad=1), in_h=25, out_h=25)
    assert tfl_paths.conv_paths(kws_dw, quant(kws_dw)) == {
        "tfl_depthwise", "tfl_dw3_s1", "tfl_dw3_strip"}
    assert tfl_paths.conv_paths(kws_dw, quant(kws_dw, lo=-20)) == {
        "tfl_depthwise", "tfl_dw3_s1", "tfl_dw3_strip", "tfl_clamp"}
    vww_dw = conv(8, 48, 8, 3, 8, pad=1)
    assert tfl_paths.conv_paths(vww_dw, quant(vww_dw)) == {"tfl_depthwise", "tfl_dw3_s1"}
    assert tfl_paths.conv_paths(vww_dw, quant(vww_dw, shift=3)) == {"tfl_depthwise"}
    for f in (conv(64, 5, 64, 1), conv(256, 3, 256, 1)):
        assert tfl_paths.conv_paths(f, quant(f)) == {"tfl_gemm_pairs"}
    assert tfl_paths.conv_paths(conv(64, 5, 63, 1), quant(conv(64, 5, 63, 1))) == {"tfl_gemm4"}
    ic = conv(32, 16, 32, 3, pad=1)
    assert tfl_paths.conv_paths(ic, quant(ic)) == {"tfl_gemm8"}


@needs_m4
def test_m4_left_out_paths_stay_exact(m4_build):  # noqa: F811
    """Each path left out on its own, and all of them at once: every layer still comes out
    exact (the next path, at worst the portable kernel), and the firmware is smaller by the
    code left out (the name and the C's test agree)."""
    text = source(_layers())
    sizes = {}
    for left_out in ((), *((p,) for p in TFL_PATHS), TFL_PATHS):
        name = "tflsel_" + ("_".join(left_out) if len(left_out) < 2 else "all")
        elf = build(m4_build, name, text, _defines(left_out))
        _run_exact(elf, name)
        sizes[left_out] = _text(elf)
    for path in TFL_PATHS:
        assert sizes[(path,)] < sizes[()], (path, sizes[(path,)], sizes[()])
    assert sizes[TFL_PATHS] < sizes[()] - 15000, sizes


@needs_m4
@pytest.mark.parametrize("index", range(len(CONVS) + len(LINEARS) + len(POOLS)))
def test_m4_predicted_paths_are_the_ones_taken(m4_build, index):  # noqa: F811
    """A layer built with only the paths its emitter names (the rest left out, as a model of
    that one layer links them) runs as fast as with every path linked: the prediction names
    the path the C takes, not a fallback (which costs more: from a few percent for the strip
    kernel to several times the instructions)."""
    kind, case = _layers()[index]
    keep = predicted(kind, case)
    text = source([(kind, case)], odd_linear=False)
    counts = []
    for name, left_out in ((f"tflall_{index}", ()),
                           (f"tflonly_{index}", tuple(p for p in TFL_PATHS if p not in keep))):
        elf = build(m4_build, name, text, _defines(left_out))
        _run_exact(elf, name)
        sym = symbol_addresses(elf)
        count = count_with_plugin(m4_build, elf, sym["eb_bench_begin"], sym["eb_bench_end"])
        assert count is not None, "the insn_count plugin did not build or run"
        counts.append(count)
    print(f"\n{kind} {index}, {sorted(keep)}: {counts[0]} instructions, {counts[1]} with those")
    assert counts[1] <= counts[0] * 1.02, (kind, case["params"], sorted(keep), counts)
