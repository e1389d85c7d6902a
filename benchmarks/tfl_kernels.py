"""Instructions (and estimated Cortex-M4 cycles) per MAC of the TFLite-format kernels
(templates/kernels/eb_tfl_opt.c, eb_tfl.c) on KWS / VWW / ResNet-like layer shapes, counted
under QEMU (mps2-an386, a Cortex-M4) by the TCG plugin templates/tools/insn_count.c between
markers around one call.

For each shape one firmware runs the portable kernel (eb_tfl.c) and the optimized one
(eb_tfl_opt.c, arm-none-eabi-gcc -O2 -mcpu=cortex-m4 -mfloat-abi=hard) on the same random
int8 data with per-channel multipliers and shifts, checks that their outputs are identical,
and exits non-zero if not. MACs count every tap of the kernel window (padding included), as
edgebuild's other kernel benchmarks do; cycles are the plugin's model (zero wait states,
see insn_count.c), not a measurement.

With the reference copy of CMSIS-NN beside the repository (../shared/reference/cmsis-nn, as
benchmarks/cmsis_nn.py uses it; --no-cmsis skips it), a column gives ARM's s8 kernels on the
same shapes under the same counter: arm_convolve_wrapper_s8, arm_depthwise_conv_wrapper_s8
(NHWC, per-channel quantization, the same zero points as input and output offsets) and
arm_fully_connected_s8 (per tensor), built with the same compiler and flags.

    python benchmarks/tfl_kernels.py [--only NAME ...] [--keep DIR] [--no-cmsis]

Needs arm-none-eabi-gcc (newlib), qemu-system-arm and gcc (for the plugin); prints a table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "templates" / "kernels"
PROJECT = REPO / "templates" / "project"
PLUGIN_SRC = REPO / "templates" / "tools" / "insn_count.c"
M4_FLAGS = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
CFLAGS = ("-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-DEB_STANDALONE")
LINK = ("-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs")
QEMU = ("-M", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native")
LINK_VARS = {"flash_bytes": 4194304, "ram_bytes": 4194304, "stack_bytes": 16384,
             "heap_bytes": 4096}
CMSIS = REPO.parent / "shared" / "reference" / "cmsis-nn"
CMSIS_DIRS = ("ConvolutionFunctions", "FullyConnectedFunctions", "NNSupportFunctions")
CMSIS_SCRATCH = 64 * 1024


@dataclass(frozen=True)
class Conv:
    """A convolution; pad (top, left); out sizes from TensorFlow's padding (pad_end)."""

    in_c: int
    in_h: int
    in_w: int
    out_c: int
    k: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)
    pad_end: tuple[int, int] = (0, 0)
    groups: int = 1
    dil: tuple[int, int] = (1, 1)

    def out_hw(self) -> tuple[int, int]:
        return tuple((size + a + b - d * (k - 1) - 1) // s + 1 for size, a, b, d, k, s in zip(
            (self.in_h, self.in_w), self.pad, self.pad_end, self.dil, self.k, self.stride,
            strict=True))  # type: ignore[return-value]

    def macs(self) -> int:
        oh, ow = self.out_hw()
        return self.out_c * oh * ow * (self.in_c // self.groups) * self.k[0] * self.k[1]


@dataclass(frozen=True)
class Fc:
    in_f: int
    out_f: int

    def macs(self) -> int:
        return self.in_f * self.out_f


# name: (layer, what it stands for)
SHAPES: dict[str, tuple[Conv | Fc, str]] = {
    "pw 64->64 25x5": (Conv(64, 25, 5, 64, (1, 1)), "DS-CNN KWS pointwise"),
    "dw 3x3 64ch 25x5": (Conv(64, 25, 5, 64, (3, 3), pad=(1, 1), pad_end=(1, 1), groups=64),
                         "DS-CNN KWS depthwise"),
    "conv 3x3 16->16 32x32": (Conv(16, 32, 32, 16, (3, 3), pad=(1, 1), pad_end=(1, 1)),
                              "ResNet-8 (MLPerf Tiny IC)"),
    "conv 3x3/2 3->8 96x96": (Conv(3, 96, 96, 8, (3, 3), stride=(2, 2), pad_end=(1, 1)),
                              "VWW MobileNet first layer"),
    "dw 3x3/2 32ch 48x48": (Conv(32, 48, 48, 32, (3, 3), stride=(2, 2), pad_end=(1, 1),
                                 groups=32), "VWW MobileNet depthwise, stride 2"),
    "fc 640->128": (Fc(640, 128), "KWS / AD fully connected"),
    # beyond the brief's list
    "conv 10x4/2 1->64 49x10": (Conv(1, 49, 10, 64, (10, 4), stride=(2, 2), pad=(4, 1),
                                     pad_end=(5, 2)), "DS-CNN KWS first layer"),
    "pw 16->32 48x48": (Conv(16, 48, 48, 32, (1, 1)), "VWW MobileNet pointwise"),
    "dw 3x3 16ch 48x48": (Conv(16, 48, 48, 16, (3, 3), pad=(1, 1), pad_end=(1, 1), groups=16),
                          "VWW MobileNet depthwise"),
    "conv 3x3 32->32 16x16": (Conv(32, 16, 16, 32, (3, 3), pad=(1, 1), pad_end=(1, 1)),
                              "ResNet-8 middle"),
    # the MLPerf Tiny layers the brief names
    "dw 3x3/2 16ch 48x48": (Conv(16, 48, 48, 16, (3, 3), stride=(2, 2), pad_end=(1, 1),
                                 groups=16), "VWW depthwise, stride 2"),
    "dw 3x3 128ch 6x6": (Conv(128, 6, 6, 128, (3, 3), pad=(1, 1), pad_end=(1, 1), groups=128),
                         "VWW depthwise, 6x6"),
    "dw 3x3 256ch 3x3": (Conv(256, 3, 3, 256, (3, 3), pad=(1, 1), pad_end=(1, 1), groups=256),
                         "VWW depthwise, 3x3"),
    "pw 128->128 6x6": (Conv(128, 6, 6, 128, (1, 1)), "VWW pointwise, 6x6"),
    "pw 256->256 3x3": (Conv(256, 3, 3, 256, (1, 1)), "VWW pointwise, 3x3"),
    "pw 8->16 48x48": (Conv(8, 48, 48, 16, (1, 1)), "VWW pointwise, first"),
    "conv 3x3 64->64 8x8": (Conv(64, 8, 8, 64, (3, 3), pad=(1, 1), pad_end=(1, 1)),
                            "ResNet-8 last"),
    "fc 128->128": (Fc(128, 128), "AD fully connected"),
    "fc 128->8": (Fc(128, 8), "AD output"),
}

COMMON = r"""
#include <stdio.h>
#include <string.h>
#include "eb_tfl.h"

static uint32_t seed = 12345u;
static int32_t next(void) { seed = seed * 1103515245u + 12345u; return (int32_t)(seed >> 8); }
static void fill8(int8_t *p, int32_t n) { int32_t i; for (i = 0; i < n; ++i) p[i] = (int8_t)next(); }

/* Markers for the instruction counter: distinct bodies (no identical-code folding). */
volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_ref_begin(void) { eb_bench_marker = 1; }
__attribute__((noinline)) void eb_bench_ref_end(void) { eb_bench_marker = 2; }
__attribute__((noinline)) void eb_bench_opt_begin(void) { eb_bench_marker = 3; }
__attribute__((noinline)) void eb_bench_opt_end(void) { eb_bench_marker = 4; }

static void fill_quant(int32_t *bias, int32_t *mult, int32_t *shift, int n)
{
    int i;
    for (i = 0; i < n; ++i) {
        bias[i] = (next() % 20000) - 10000;
        mult[i] = (int32_t)(0x40000000u + ((uint32_t)next() & 0x3FFFFFFFu));
        shift[i] = -7 - (int32_t)((uint32_t)next() % 4u);
    }
}
"""

CONV_MAIN = r"""
#define N_IN ({in_c} * {in_h} * {in_w})
#define N_W ({out_c} * ({in_c} / {groups}) * {k_h} * {k_w})
#define N_OUT ({out_c} * {out_h} * {out_w})
static const eb_tfl_conv_params layer = {{{in_c}, {in_h}, {in_w}, {out_c}, {out_h}, {out_w},
    {k_h}, {k_w}, {s_h}, {s_w}, {p_t}, {p_l}, {d_h}, {d_w}, {groups}, -128, -5, -128, 127}};
static int8_t input[N_IN];
static int8_t weight[N_W] __attribute__((aligned(4)));
static int32_t bias[{out_c}], mult[{out_c}], shift[{out_c}];
static int8_t out_ref[N_OUT], out_opt[N_OUT];
static int16_t scratch[SCRATCH + 2] __attribute__((aligned(4)));

int main(void)
{{
    int bad;
    fill8(input, N_IN);
    fill8(weight, N_W);
    fill_quant(bias, mult, shift, {out_c});
    if (eb_tfl_conv_scratch(&layer) > SCRATCH) {{ printf("scratch too small\n"); return 3; }}
    eb_bench_ref_begin();
    eb_tfl_conv2d(&layer, input, weight, bias, mult, shift, out_ref, NULL);
    eb_bench_ref_end();
    eb_bench_opt_begin();
    eb_tfl_conv2d_opt(&layer, input, weight, bias, mult, shift, out_opt, scratch);
    eb_bench_opt_end();
    bad = memcmp(out_ref, out_opt, sizeof out_ref) != 0;
    printf("scratch %ld int16; optimized %s portable\n", (long)eb_tfl_conv_scratch(&layer),
           bad ? "DIFFERS FROM" : "equals");
    return bad;
}}
"""

FC_MAIN = r"""
static const eb_tfl_fc_params layer = {{{in_f}, {out_f}, -3, 7, -128, 127}};
static int8_t input[{in_f}];
static int8_t weight[{in_f} * {out_f}] __attribute__((aligned(4)));
static int32_t bias[{out_f}], mult[{out_f}], shift[{out_f}];
static int8_t out_ref[{out_f}], out_opt[{out_f}];
static int16_t scratch[SCRATCH + 2] __attribute__((aligned(4)));

int main(void)
{{
    int bad;
    fill8(input, {in_f});
    fill8(weight, {in_f} * {out_f});
    fill_quant(bias, mult, shift, {out_f});
    eb_bench_ref_begin();
    eb_tfl_linear(&layer, input, weight, bias, mult, shift, out_ref, NULL);
    eb_bench_ref_end();
    eb_bench_opt_begin();
    eb_tfl_linear_opt(&layer, input, weight, bias, mult, shift, out_opt, scratch);
    eb_bench_opt_end();
    bad = memcmp(out_ref, out_opt, sizeof out_ref) != 0;
    printf("optimized %s portable\n", bad ? "DIFFERS FROM" : "equals");
    return bad;
}}
"""


CMSIS_MAIN = r"""
#include <stdio.h>
#include "arm_nnfunctions.h"

volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_opt_begin(void) {{ eb_bench_marker = 3; }}
__attribute__((noinline)) void eb_bench_opt_end(void) {{ eb_bench_marker = 4; }}
static uint32_t seed = 12345u;
static int32_t next(void) {{ seed = seed * 1103515245u + 12345u; return (int32_t)(seed >> 8); }}
static int8_t input[{n_in}], weight[{n_w}], output[{n_out}];
static int32_t bias[{ch}], mult[{ch}], shift[{ch}];
static int32_t scratch[{scratch} / 4];
static const cmsis_nn_context ctx = {{scratch, {scratch}}};
static const cmsis_nn_per_channel_quant_params quant = {{mult, shift}};
static const cmsis_nn_per_tensor_quant_params tensor_quant = {{1317094531, -8}};
{decls}

int main(void)
{{
    arm_cmsis_nn_status status;
    int32_t i;
    for (i = 0; i < (int32_t)sizeof input; ++i) input[i] = (int8_t)next();
    for (i = 0; i < (int32_t)sizeof weight; ++i) weight[i] = (int8_t)next();
    for (i = 0; i < {ch}; ++i) {{
        bias[i] = (next() % 20000) - 10000;
        mult[i] = (int32_t)(0x40000000u + ((uint32_t)next() & 0x3FFFFFFFu));
        shift[i] = -7 - (int32_t)((uint32_t)next() % 4u);
    }}
    if ({need} > {scratch}) {{ printf("scratch too small\\n"); return 3; }}
    eb_bench_opt_begin();
    status = {call};
    eb_bench_opt_end();
    return status != ARM_CMSIS_NN_SUCCESS;
}}
"""


def cmsis_source(layer: Conv | Fc) -> str:
    """A firmware running CMSIS-NN's kernel for `layer` between the opt markers."""
    def dims(n: int, h: int, w: int, c: int) -> str:
        return f"{{.n = {n}, .h = {h}, .w = {w}, .c = {c}}}"

    if isinstance(layer, Fc):
        decls = ("static const cmsis_nn_fc_params P = {.input_offset = 3, .filter_offset = 0, "
                 ".output_offset = 7, .activation = {.min = -128, .max = 127}};\n"
                 f"static const cmsis_nn_dims I = {dims(1, 1, 1, layer.in_f)};\n"
                 f"static const cmsis_nn_dims F = {dims(layer.in_f, 1, 1, layer.out_f)};\n"
                 f"static const cmsis_nn_dims B = {dims(1, 1, 1, layer.out_f)};\n"
                 f"static const cmsis_nn_dims O = {dims(1, 1, 1, layer.out_f)};")
        return CMSIS_MAIN.format(n_in=layer.in_f, n_w=layer.in_f * layer.out_f, n_out=layer.out_f,
                                 ch=layer.out_f, scratch=CMSIS_SCRATCH, decls=decls,
                                 need="arm_fully_connected_s8_get_buffer_size(&F)",
                                 call="arm_fully_connected_s8(&ctx, &P, &tensor_quant, &I, input, "
                                      "&F, weight, &B, bias, &O, output)")
    oh, ow = layer.out_hw()
    dw = layer.groups > 1 and layer.groups == layer.in_c
    geometry = (f".stride = {{.w = {layer.stride[1]}, .h = {layer.stride[0]}}}, "
                f".padding = {{.w = {layer.pad[1]}, .h = {layer.pad[0]}}}, "
                f".dilation = {{.w = {layer.dil[1]}, .h = {layer.dil[0]}}}, "
                ".activation = {.min = -128, .max = 127}")
    if dw:
        decls = ("static const cmsis_nn_dw_conv_params P = {.input_offset = 128, "
                 f".output_offset = -5, .ch_mult = {layer.out_c // layer.in_c}, {geometry}}};\n"
                 f"static const cmsis_nn_dims F = {dims(1, *layer.k, layer.out_c)};\n")
        kernel = "arm_depthwise_conv_wrapper_s8"
    else:
        decls = ("static const cmsis_nn_conv_params P = {.input_offset = 128, "
                 f".output_offset = -5, {geometry}}};\n"
                 f"static const cmsis_nn_dims F = "
                 f"{dims(layer.out_c, *layer.k, layer.in_c // layer.groups)};\n")
        kernel = "arm_convolve_wrapper_s8"
    decls += (f"static const cmsis_nn_dims I = {dims(1, layer.in_h, layer.in_w, layer.in_c)};\n"
              f"static const cmsis_nn_dims B = {dims(1, 1, 1, layer.out_c)};\n"
              f"static const cmsis_nn_dims O = {dims(1, oh, ow, layer.out_c)};")
    return CMSIS_MAIN.format(
        n_in=layer.in_c * layer.in_h * layer.in_w,
        n_w=layer.out_c * layer.k[0] * layer.k[1] * (layer.in_c // layer.groups),
        n_out=layer.out_c * oh * ow, ch=layer.out_c, scratch=CMSIS_SCRATCH, decls=decls,
        need=f"{kernel}_get_buffer_size(&P, &I, &F, &O)",
        call=f"{kernel}(&ctx, &P, &quant, &I, input, &F, weight, &B, bias, &O, output)")


def compile_cmsis(build: Path) -> list[Path]:
    """CMSIS-NN's int8 sources as objects (once per build directory)."""
    into = build / "cmsis"
    into.mkdir(exist_ok=True)
    sources = sorted(p for d in CMSIS_DIRS for p in (CMSIS / "Source" / d).glob("*.c")
                     if not any(tag in p.name for tag in ("_f16", "_f32", "flt")))

    def one(source: Path) -> Path:
        obj = into / f"{source.stem}.o"
        if not obj.exists():
            subprocess.run(["arm-none-eabi-gcc", *M4_FLAGS, "-O2", "-std=c99",
                            "-ffunction-sections", "-fdata-sections", "-I", str(CMSIS / "Include"),
                            "-I", str(CMSIS / "core"), "-c", str(source), "-o", str(obj)],
                           check=True, capture_output=True, timeout=300)
        return obj

    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        return list(pool.map(one, sources))


def measure_cmsis(build: Path, plugin: Path, objects: list[Path], name: str,
                  layer: Conv | Fc) -> float:
    """CMSIS-NN's instructions per MAC on `layer`."""
    stem = "cmsis_" + "".join(ch if ch.isalnum() else "_" for ch in name)
    c = build / f"{stem}.c"
    c.write_text(cmsis_source(layer))
    elf = build / f"{stem}.elf"
    result = subprocess.run(
        ["arm-none-eabi-gcc", *M4_FLAGS, "-O2", "-std=c99", "-I", str(CMSIS / "Include"), "-I",
         str(CMSIS / "core"), *LINK, "-Wl,--gc-sections", f"-Wl,-T,{build / 'link.ld'}", "-o",
         str(elf), str(build / "startup_m4.c"), str(c), *map(str, objects)],
        capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"CMSIS-NN firmware {name}:\n{result.stderr}")
    sym = symbols(elf)
    insns, _ = count(plugin, elf, sym["eb_bench_opt_begin"], sym["eb_bench_opt_end"],
                     build / f"{stem}.txt")
    return insns / layer.macs()


def source(layer: Conv | Fc) -> str:
    if isinstance(layer, Fc):
        return f"#define SCRATCH {layer.in_f + 4}\n" + COMMON + FC_MAIN.format(
            in_f=layer.in_f, out_f=layer.out_f)
    oh, ow = layer.out_hw()
    fields = dict(in_c=layer.in_c, in_h=layer.in_h, in_w=layer.in_w, out_c=layer.out_c,
                  out_h=oh, out_w=ow, k_h=layer.k[0], k_w=layer.k[1], s_h=layer.stride[0],
                  s_w=layer.stride[1], p_t=layer.pad[0], p_l=layer.pad[1], d_h=layer.dil[0],
                  d_w=layer.dil[1], groups=layer.groups)
    return f"#define SCRATCH {scratch_of(layer)}\n" + COMMON + CONV_MAIN.format(**fields)


def scratch_of(layer: Conv) -> int:
    from edgebuild.formats.tflite import kernels

    oh, ow = layer.out_hw()
    return kernels.conv_scratch(layer.in_c, layer.in_h, layer.in_w, layer.out_c, oh, ow,
                                *layer.k, *layer.stride, *layer.dil, layer.groups)


def prepare(build: Path) -> Path:
    """startup_m4.c, the rendered link.ld and the plugin in build/; returns the plugin."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = (PROJECT / "link.ld.j2").read_text()
    (build / "link.ld").write_text(env.from_string(template).render(**LINK_VARS))
    shutil.copy(PROJECT / "startup_m4.c", build / "startup_m4.c")
    plugin = build / "insn_count.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(plugin), str(PLUGIN_SRC)],
                   check=True, capture_output=True, text=True)
    return plugin


def build_firmware(build: Path, name: str, text: str, extra: tuple[str, ...] = ()) -> Path:
    c = build / f"{name}.c"
    c.write_text(text)
    elf = build / f"{name}.elf"
    result = subprocess.run(
        ["arm-none-eabi-gcc", *M4_FLAGS, *CFLAGS, *extra, f"-I{KERNELS}", *LINK,
         f"-Wl,-T,{build / 'link.ld'}", "-o", str(elf), str(build / "startup_m4.c"), str(c),
         str(KERNELS / "eb_tfl.c"), str(KERNELS / "eb_tfl_opt.c")],
        capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"arm-none-eabi-gcc failed for {name}:\n{result.stderr}")
    return elf


def symbols(elf: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True,
                         check=True).stdout
    return {f[2]: int(f[0], 16) & ~1 for f in (line.split() for line in out.splitlines())
            if len(f) == 3}


def count(plugin: Path, elf: Path, start: int, stop: int, out: Path) -> tuple[int, int]:
    """(instructions, estimated cycles) from start to stop."""
    result = subprocess.run(["timeout", "300", "qemu-system-arm", *QEMU, "-plugin",
                             f"{plugin},start={start:#x},stop={stop:#x},out={out}", "-kernel",
                             str(elf)], stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=330)
    if result.returncode != 0 or not out.is_file():
        raise RuntimeError(f"{elf.name}: exit {result.returncode}\n{result.stdout}"
                           f"{result.stderr}")
    insns, cycles = out.read_text().split()[:2]
    return int(insns), int(cycles)


def measure(build: Path, plugin: Path, name: str, layer: Conv | Fc,
            extra: tuple[str, ...] = ()) -> dict[str, float]:
    """Per MAC: portable and optimized instructions and cycles."""
    stem = "".join(ch if ch.isalnum() else "_" for ch in name)
    elf = build_firmware(build, stem, source(layer), extra)
    sym = symbols(elf)
    figures: dict[str, float] = {"macs": layer.macs()}
    for kind in ("ref", "opt"):
        insns, cycles = count(plugin, elf, sym[f"eb_bench_{kind}_begin"],
                              sym[f"eb_bench_{kind}_end"], build / f"{stem}_{kind}.txt")
        figures[f"{kind}_insn"] = insns / layer.macs()
        figures[f"{kind}_cyc"] = cycles / layer.macs()
    return figures


def table(rows: dict[str, dict[str, float]]) -> str:
    head = (f"{'layer':<26} {'MACs':>9} {'portable':>9} {'opt insn':>9} {'opt cyc':>8} "
            f"{'CMSIS-NN':>9}  stands for")
    lines = [head, "-" * len(head)]
    for name, f in rows.items():
        cmsis = f"{f['cmsis_insn']:>9.3f}" if "cmsis_insn" in f else f"{'-':>9}"
        lines.append(f"{name:<26} {int(f['macs']):>9} {f['ref_insn']:>9.2f} "
                     f"{f['opt_insn']:>9.3f} {f['opt_cyc']:>8.3f} {cmsis}  {SHAPES[name][1]}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="shape names (default: all)")
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it")
    parser.add_argument("--no-cmsis", action="store_true", help="leave out CMSIS-NN's column")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    names = args.only or list(SHAPES)
    with tempfile.TemporaryDirectory() as tmp:
        build = args.keep or Path(tmp)
        build.mkdir(parents=True, exist_ok=True)
        plugin = prepare(build)
        rows = {name: measure(build, plugin, name, SHAPES[name][0]) for name in names}
        if not args.no_cmsis and (CMSIS / "Source").is_dir():
            objects = compile_cmsis(build)
            for name in names:
                rows[name]["cmsis_insn"] = measure_cmsis(build, plugin, objects, name,
                                                         SHAPES[name][0])
    print("instructions per MAC (optimized: also estimated cycles), Cortex-M4 under QEMU "
          "(insn_count plugin), arm-none-eabi-gcc -O2:")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
