"""The training kernels' Cortex-M4F assembly (templates/train/eb_train_asm.h: the
correlations under the convolution passes, the activation, copies, clearing and sums)
against their portable C twin, under QEMU, on hypothesis-drawn convolutions: the host never
runs that code.

One firmware per example runs every drawn convolution's forward pass, input gradient,
weight gradient (over a random range of output rows, as a row tile does) and bias gradient
on data from a fixed generator, and prints a hash of each output buffer including guard
words past its end. It is built twice, with the assembly and with -DEBT_NO_ASM (the C twin:
the same terms in the same order, the same fused multiply-adds), and the two runs must
print the same hashes: the assembly's sums are the C's bit for bit, and it writes nothing
else. The geometries reach every path: kernels of 1 to 19 taps (the 8-, 4- and 1-step
loops; weight gradients in eights, fours past a short kernel's end, and single taps), rows
narrower than a block, padding, strides and dilations (the C paths), groups, tables longer
than one pass (EBT_TABLE_ROWS), conv1d laid out along the rows, linear layers.
The relu_clamp activation's bit paths run on counts below, at and past a pass of 4, with the
float bit patterns at its edges (-0, denormals, the neighbours of 127/128, inf, NaN); the
copies and the clearing on counts below, at and past a pass of 16."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_kernels_opt import ARM_GCC, M4_FLAGS, M4_LINK, m4_build, needs_m4, run_qemu  # noqa: F401

TRAIN = Path(__file__).resolve().parent.parent / "templates" / "train"
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DEB_STANDALONE"]
FIELDS = ("n", "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h",
          "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups")
BUFFER = 6144  # floats per buffer in the firmware (each case's largest tensor fits)
GUARD = 16

MAIN = r"""
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include "eb_train.h"

#define BUFFER %(buffer)d
#define GUARD %(guard)d
static float x[BUFFER + GUARD], y[BUFFER + GUARD], w[BUFFER + GUARD], b[BUFFER + GUARD];
static float dy[BUFFER + GUARD], dx[BUFFER + GUARD], dw[BUFFER + GUARD];
static uint32_t state;

/* the same pseudo-random floats in [-1, 1) in both builds */
static void fill(float *p, int n)
{
    int i;
    for (i = 0; i < n + GUARD; ++i) {
        state = state * 1664525u + 1013904223u;
        p[i] = (float)(int32_t)(state >> 8) / 8388608.0f - 1.0f;
    }
}

/* FNV-1a over the buffer's bits, its guard words included */
static uint32_t hash(const float *p, int n)
{
    uint32_t h = 2166136261u, v;
    int i;
    for (i = 0; i < n + GUARD; ++i) {
        memcpy(&v, p + i, sizeof v);
        h = (h ^ v) * 16777619u;
    }
    return h;
}

static void run(int i, const ebt_conv *p, int r0, int r1)
{
    const int nx = p->n * p->in_c * p->in_h * p->in_w, ny = p->n * p->out_c * p->out_h * p->out_w;
    const int nw = p->out_c * (p->in_c / p->groups) * p->k_h * p->k_w;
    state = 12345u + (uint32_t)i;
    fill(x, nx);
    fill(w, nw);
    fill(b, p->out_c);
    fill(dy, ny);
    fill(dx, nx);
    fill(dw, nw);
    fill(y, ny);
    ebt_conv_forward(p, x, w, b, y);
    ebt_conv_backward_input(p, dy, w, dx);
    ebt_conv_backward_weight(p, dy, x, dw, r0, r1);
    ebt_conv_backward_bias(p, dy, b);
    printf("conv %%d: forward %%08lx input %%08lx weight %%08lx bias %%08lx\n", i,
           (unsigned long)hash(y, ny), (unsigned long)hash(dx, nx), (unsigned long)hash(dw, nw),
           (unsigned long)hash(b, p->out_c));
}

/* relu_clamp forward and backward (out of place and in place) on n floats: random ones
 * around the clamp's ends and the bit patterns at its edges */
static void act(int n)
{
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u,
                                       0x3F7DFFFFu, 0x3F7E0000u, 0x3F7E0001u, 0x3F800000u,
                                       0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x3C000000u};
    int i;
    state = 777u + (uint32_t)n;
    fill(x, n);
    fill(dy, n);
    for (i = 0; i < n; ++i) {
        x[i] *= 1.5f;
    }
    for (i = 0; i < 48; ++i) { /* each special value in each lane of a pass of 4 */
        memcpy(x + (i * 5) %% n, special + i / 4, sizeof special[0]);
    }
    ebt_act_forward(EBT_ACT_RELU_CLAMP, n, x, y);
    ebt_act_backward(EBT_ACT_RELU_CLAMP, n, x, dy, dx);
    printf("act %%d: forward %%08lx backward %%08lx", n, (unsigned long)hash(y, n),
           (unsigned long)hash(dx, n));
    ebt_act_backward(EBT_ACT_RELU_CLAMP, n, x, dy, dy);
    ebt_act_forward(EBT_ACT_RELU_CLAMP, n, x, x);
    printf(" in place %%08lx %%08lx\n", (unsigned long)hash(x, n), (unsigned long)hash(dy, n));
}

/* ebt_copy and ebt_zero on n floats (the guard words past them must stay) */
static void copies(int n)
{
    state = 999u + (uint32_t)n;
    fill(x, n);
    fill(y, n);
    fill(dx, n);
    ebt_copy(y, x, n);
    ebt_zero(dx, n);
    printf("copy %%d: %%08lx zero %%08lx\n", n, (unsigned long)hash(y, n), (unsigned long)hash(dx, n));
}

int main(void)
{
    copies(1);
    copies(16);
    copies(33);
    copies(1001);
    act(1);
    act(4);
    act(39);
    act(1001);
%(calls)s
    printf("done\n");
    return 0;
}
"""


def out_size(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


@st.composite
def convs(draw) -> dict:
    """A convolution whose tensors fit BUFFER, weighted towards the assembly's paths
    (stride and dilation 1 along the row, rows of one to several blocks)."""
    groups = draw(st.sampled_from([1, 1, 1, 2, 3]))
    in_c = groups * draw(st.integers(1, 4))
    out_c = groups * draw(st.integers(1, 3))
    k_w = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 19]))
    k_h = draw(st.sampled_from([1, 1, 2, 3]))
    stride_w = draw(st.sampled_from([1, 1, 1, 2]))
    dil_w = draw(st.sampled_from([1, 1, 1, 2]))
    stride_h, dil_h = draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 1, 2]))
    pad_w, pad_h = draw(st.integers(0, k_w - 1)), draw(st.integers(0, k_h - 1))
    in_w = draw(st.integers(max(1, dil_w * (k_w - 1) + 1 - 2 * pad_w), 70))
    least_h = max(1, dil_h * (k_h - 1) + 1 - 2 * pad_h)
    in_h = draw(st.integers(least_h, least_h + 3))
    cfg = {"n": draw(st.integers(1, 2)), "in_c": in_c, "in_h": in_h, "in_w": in_w,
           "out_c": out_c, "k_h": k_h, "k_w": k_w, "stride_h": stride_h,
           "stride_w": stride_w, "pad_h": pad_h, "pad_w": pad_w, "dil_h": dil_h,
           "dil_w": dil_w, "groups": groups}
    cfg["out_h"] = out_size(in_h, k_h, stride_h, pad_h, dil_h)
    cfg["out_w"] = out_size(in_w, k_w, stride_w, pad_w, dil_w)
    sizes = (cfg["n"] * in_c * in_h * in_w, cfg["n"] * out_c * cfg["out_h"] * cfg["out_w"])
    if cfg["out_h"] < 1 or cfg["out_w"] < 1 or max(sizes) > BUFFER:
        return draw(convs())
    r0 = draw(st.integers(0, cfg["out_h"] - 1))
    cfg["rows"] = (r0, draw(st.integers(r0 + 1, cfg["out_h"])))
    return cfg


# Tables longer than EBT_TABLE_ROWS (32 rows: in_c / groups * kernel rows): two passes,
# without and with padding (edge blocks over zero-padded copies, several scratch loads)
LONG_TABLES = [
    {"n": 1, "in_c": 20, "in_h": 3, "in_w": 30, "out_c": 2, "out_h": 1, "out_w": 24, "k_h": 3,
     "k_w": 7, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
     "groups": 1, "rows": (0, 1)},
    {"n": 1, "in_c": 12, "in_h": 3, "in_w": 29, "out_c": 3, "out_h": 1, "out_w": 29, "k_h": 3,
     "k_w": 19, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 9, "dil_h": 1, "dil_w": 1,
     "groups": 1, "rows": (0, 1)},
    # a conv1d as the generated code lays it out (along the rows, one column wide: run as a
    # row), its weight gradient whole and over a tile of rows; a linear layer
    {"n": 2, "in_c": 4, "in_h": 60, "in_w": 1, "out_c": 3, "out_h": 60, "out_w": 1, "k_h": 5,
     "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 2, "pad_w": 0, "dil_h": 1, "dil_w": 1,
     "groups": 1, "rows": (0, 60)},
    {"n": 1, "in_c": 6, "in_h": 50, "in_w": 1, "out_c": 6, "out_h": 48, "out_w": 1, "k_h": 3,
     "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
     "groups": 6, "rows": (7, 31)},
    {"n": 3, "in_c": 40, "in_h": 1, "in_w": 1, "out_c": 11, "out_h": 1, "out_w": 1, "k_h": 1,
     "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
     "groups": 1, "rows": (0, 1)},
]


def firmware(cases: list[dict]) -> str:
    calls = []
    for i, cfg in enumerate(cases):
        fields = ", ".join(str(cfg[name]) for name in FIELDS)
        calls.append(f"    {{ static const ebt_conv p = {{{fields}}}; "
                     f"run({i}, &p, {cfg['rows'][0]}, {cfg['rows'][1]}); }}")
    return MAIN % {"buffer": BUFFER, "guard": GUARD, "calls": "\n".join(calls)}


def build(directory: Path, name: str, source: str, defines: tuple[str, ...]) -> Path:
    (directory / f"{name}.c").write_text(source)
    elf = directory / f"{name}.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, *defines, f"-I{TRAIN}", *M4_LINK,
         "-Wl,-T," + str(directory / "link.ld"), "-o", str(elf), str(directory / "startup_m4.c"),
         str(directory / f"{name}.c"), str(TRAIN / "eb_train.c"), "-lm"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


def hashes(elf: Path) -> list[str]:
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    lines = result.stdout.splitlines()
    assert lines and lines[-1] == "done", result.stdout
    return lines


def objdump(elf: Path) -> str:
    tool = str(ARM_GCC).replace("gcc", "objdump")
    return subprocess.run([tool, "-d", str(elf)], capture_output=True, text=True,
                          check=True).stdout


@needs_m4
@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases=st.lists(convs(), min_size=8, max_size=12))
def test_m4_assembly_equals_its_c_twin(m4_build, cases):  # noqa: F811
    source = firmware([*cases, *LONG_TABLES])
    asm = build(m4_build, "train_asm", source, ())
    twin = build(m4_build, "train_twin", source, ("-DEBT_NO_ASM",))
    assert "{s0-s14}" in objdump(asm) and "{s0-s14}" not in objdump(twin)
    got, expected = hashes(asm), hashes(twin)
    assert len(got) == len(cases) + len(LONG_TABLES) + 9
    assert got == expected
