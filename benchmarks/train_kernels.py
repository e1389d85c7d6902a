"""Instructions (and estimated Cortex-M4 cycles) per MAC of the float32 training kernels
(templates/train/eb_train.c) on layer shapes: SpeechNet's, and common 1-D and 2-D ones that
no example has. Each pass (forward, input gradient, weight gradient) of each shape is one
firmware, counted under QEMU (mps2-an386) by edgebuild's instruction-count plugin between
two markers around the one call; cycles are the plugin's model (zero wait states), not a
measurement. MACs count the taps that read inside the input, as ondevice_kat.json's
MAC-equivalents do.

With --twin each pass is also built with -DEBT_NO_ASM (the portable C twin of the assembly
in eb_train_asm.h, the same sums in the same order) to show what the assembly buys.

    python benchmarks/train_kernels.py [--twin] [--only NAME ...]

Needs arm-none-eabi-gcc (newlib), qemu-system-arm and gcc (for the plugin); prints a table.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2

from edgebuild.targets import toolchain

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "templates" / "train"
PROJECT = REPO / "templates" / "project"
M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-std=c99", "-O2",
      "-DEB_STANDALONE", "-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs")
LINK_VARS = {"flash_bytes": 4194304, "ram_bytes": 4194304, "stack_bytes": 16384,
             "heap_bytes": 4096}
PASSES = ("forward", "input", "weight")

MAIN = r"""
#include <stdio.h>
#include "eb_train.h"
static const ebt_conv K = {%(geometry)s};
static float x[%(x)d], y[%(y)d], w[%(w)d], b[%(c)d], dy[%(y)d], dx[%(x)d], dw[%(w)d];
void bench_begin(void) __attribute__((noinline));
void bench_begin(void) { __asm__ volatile(""); }
void bench_end(void) __attribute__((noinline));
void bench_end(void) { __asm__ volatile(""); }
int main(void)
{
    int i;
    for (i = 0; i < %(x)d; ++i) x[i] = (float)(i %% 17) * 0.01f - 0.05f;
    for (i = 0; i < %(w)d; ++i) w[i] = (float)(i %% 7) * 0.1f - 0.3f;
    for (i = 0; i < %(y)d; ++i) dy[i] = (float)(i %% 5) * 0.1f - 0.2f;
    bench_begin();
    %(call)s;
    bench_end();
    printf("%%f %%f %%f\n", (double)y[0], (double)dx[0], (double)dw[0]);
    return 0;
}
"""
CALLS = {"forward": "ebt_conv_forward(&K, x, w, b, y)",
         "input": "ebt_conv_backward_input(&K, dy, w, dx)",
         "weight": "ebt_conv_backward_weight(&K, dy, x, dw, 0, K.out_h)"}


@dataclass(frozen=True)
class Shape:
    """One convolution (batch 1) in ebt_conv's terms; a conv1d along a row has in_h 1."""

    in_c: int
    in_h: int
    in_w: int
    out_c: int
    k: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)
    groups: int = 1

    def out(self, axis: int) -> int:
        size = (self.in_h, self.in_w)[axis]
        return (size + 2 * self.pad[axis] - self.k[axis]) // self.stride[axis] + 1

    def fields(self) -> tuple[int, ...]:
        return (1, self.in_c, self.in_h, self.in_w, self.out_c, self.out(0), self.out(1),
                *self.k, *self.stride, *self.pad, 1, 1, self.groups)

    def macs(self) -> int:
        """Multiply-adds whose input exists (padding taps left out)."""
        total = 0
        for oy in range(self.out(0)):
            rows = sum(0 <= oy * self.stride[0] - self.pad[0] + ky < self.in_h
                       for ky in range(self.k[0]))
            for ox in range(self.out(1)):
                cols = sum(0 <= ox * self.stride[1] - self.pad[1] + kx < self.in_w
                           for kx in range(self.k[1]))
                total += rows * cols
        return total * self.out_c * (self.in_c // self.groups)


SHAPES = {
    # SpeechNet's blocks (manifests/speechnet.yaml), batch 1
    "speechnet b0": Shape(1, 14, 700, 8, (1, 15), pad=(0, 7)),
    "speechnet b1": Shape(8, 14, 700, 16, (14, 1), groups=8),
    "speechnet b2": Shape(16, 1, 350, 16, (1, 15), pad=(0, 7), groups=16),
    "speechnet b3": Shape(16, 1, 175, 16, (1, 1)),
    "speechnet b4": Shape(16, 1, 87, 64, (1, 5)),
    "speechnet fc": Shape(64, 1, 1, 9, (1, 1)),
    # 1-D along a row, and as conv1d is laid out by the training code (along the rows)
    "conv1d k3 row": Shape(16, 1, 128, 32, (1, 3), pad=(0, 1)),
    "conv1d k3 rows": Shape(16, 128, 1, 32, (3, 1), pad=(1, 0)),
    "conv1d k9 dw": Shape(32, 1, 250, 32, (1, 9), pad=(0, 4), groups=32),
    # 2-D
    "conv 3x3 16x16": Shape(16, 16, 16, 16, (3, 3), pad=(1, 1)),
    "conv 3x3 s2": Shape(8, 32, 32, 16, (3, 3), stride=(2, 2), pad=(1, 1)),
    "dw 3x3 16x16": Shape(32, 16, 16, 32, (3, 3), pad=(1, 1), groups=32),
    "pw 8x8": Shape(32, 8, 8, 64, (1, 1)),
    "linear 256-64": Shape(256, 1, 1, 64, (1, 1)),
}


def prepare(build: Path) -> Path:
    """startup_m4.c and the rendered link.ld in build/; returns the plugin."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    (build / "link.ld").write_text(
        env.from_string((PROJECT / "link.ld.j2").read_text()).render(**LINK_VARS))
    (build / "startup_m4.c").write_text((PROJECT / "startup_m4.c").read_text())
    return toolchain.build_plugin(build)


def firmware(build: Path, tools: toolchain.ArmTools, name: str, shape: Shape, phase: str, twin: bool) -> Path:
    fields = shape.fields()
    sizes = {"x": fields[1] * fields[2] * fields[3], "y": fields[4] * fields[5] * fields[6],
             "w": fields[4] * (fields[1] // fields[15]) * fields[7] * fields[8],
             "c": fields[4]}
    text = MAIN % {"geometry": ", ".join(map(str, fields)), "call": CALLS[phase], **sizes}
    stem = f"{name.replace(' ', '_')}_{phase}{'_twin' if twin else ''}"
    (build / f"{stem}.c").write_text(text)
    elf = build / f"{stem}.elf"
    result = subprocess.run(
        [str(tools.gcc), *M4, *(("-DEBT_NO_ASM",) if twin else ()), f"-I{TRAIN}",
         f"-Wl,-T,{build / 'link.ld'}", "-o", str(elf), str(build / "startup_m4.c"),
         str(build / f"{stem}.c"), str(TRAIN / "eb_train.c"), "-lm"],
        capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        sys.exit(f"arm-none-eabi-gcc {stem} failed:\n{result.stderr}")
    return elf


def measure(build: Path, tools: toolchain.ArmTools, plugin: Path, name: str, phase: str,
            twin: bool) -> tuple[int, int]:
    elf = firmware(build, tools, name, SHAPES[name], phase, twin)
    start = toolchain.symbol_address(tools.nm, elf, "bench_begin")
    stop = toolchain.symbol_address(tools.nm, elf, "bench_end")
    run = toolchain.run_qemu(tools, elf, timeout=600, plugin=plugin, start=start, stop=stop)
    if run.exit_code != 0 or run.instructions is None or run.cycles is None:
        sys.exit(f"{name} {phase}: the firmware failed (exit {run.exit_code})")
    return run.instructions, run.cycles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--twin", action="store_true", help="also the portable C twin")
    parser.add_argument("--only", nargs="*", choices=sorted(SHAPES), help="these shapes")
    args = parser.parse_args()
    tools = toolchain.arm_toolchain()
    if tools is None:
        sys.exit("needs arm-none-eabi-gcc and qemu-system-arm")
    names = args.only or list(SHAPES)
    print("Cortex-M4 instructions per MAC (estimated cycles per MAC), one call of each pass, "
          "batch 1" + ("; C twin after the slash" if args.twin else ""))
    print(f"{'shape':<16} {'MACs':>9}  " + "  ".join(f"{p:>22}" for p in PASSES))
    with tempfile.TemporaryDirectory(prefix="train-kernels-") as temp:
        build = Path(temp)
        plugin = prepare(build)
        for name in names:
            macs = SHAPES[name].macs()
            cells = []
            for phase in PASSES:
                insn, cycles = measure(build, tools, plugin, name, phase, False)
                cell = f"{insn / macs:.2f} ({cycles / macs:.2f})"
                if args.twin:
                    twin, _ = measure(build, tools, plugin, name, phase, True)
                    cell += f" / {twin / macs:.2f}"
                cells.append(f"{cell:>22}")
            print(f"{name:<16} {macs:>9}  " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
