"""Instructions (and estimated Cortex-M4 cycles) per MAC of the float32 training kernels
(templates/train/eb_train.c) on layer shapes: SpeechNet's, common 1-D and 2-D ones that no
example has, and (--generated N) layers of benchmarks/shapes.py's generator. Each pass (forward, input gradient, weight gradient) of each shape is one
firmware, counted under QEMU (mps2-an386) by edgebuild's instruction-count plugin between
two markers around the one call; cycles are the plugin's model (zero wait states), not a
measurement. MACs count every tap of the kernel, padding included, as ondevice_kat.json's
MAC-equivalents and benchmarks/shapes.py do. Last, the median, p90 and worst over every pass.

With --twin each pass is also built with -DEBT_NO_ASM (the portable C twin of the assembly
in eb_train_asm.h, the same sums in the same order) to show what the assembly buys.

    python benchmarks/train_kernels.py [--twin] [--only NAME ...] [--generated N [--seed S]]

Needs arm-none-eabi-gcc (newlib), qemu-system-arm and gcc (for the plugin); prints a table.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from edgebuild.targets import toolchain

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shapes  # noqa: E402  (benchmarks/shapes.py: issue 32's layer record and generator)
from shapes import Layer  # noqa: E402
from tfl_kernels import prepare  # noqa: E402  (startup, link.ld and the counting plugin)

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "templates" / "train"
M4 = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16", "-std=c99", "-O2",
      "-DEB_STANDALONE", "-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs")
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


def fields(layer: Layer) -> tuple[int, ...]:
    """ebt_conv's fields (batch 1) for a generated layer: a linear one is a 1x1 convolution
    of 1x1 planes, a conv1d one row."""
    if layer.op == "linear":
        return (1, layer.cin, 1, 1, layer.cout, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1)
    return (1, layer.cin, *layer.size, layer.cout, *layer.out_size(), *layer.kernel,
            *layer.stride, *layer.pad, *layer.dilation, layer.groups)


def conv(cin: int, size: tuple[int, int], cout: int, kernel: tuple[int, int],
         stride: tuple[int, int] = (1, 1), pad: tuple[int, int] = (0, 0), groups: int = 1,
         one_d: bool = False) -> Layer:
    return Layer("conv1d" if one_d else "conv2d", cin, cout, size, kernel, stride, (1, 1), pad,
                 groups)


SHAPES = {
    # SpeechNet's blocks (manifests/speechnet.yaml), batch 1
    "speechnet b0": conv(1, (14, 700), 8, (1, 15), pad=(0, 7)),
    "speechnet b1": conv(8, (14, 700), 16, (14, 1), groups=8),
    "speechnet b2": conv(16, (1, 350), 16, (1, 15), pad=(0, 7), groups=16, one_d=True),
    "speechnet b3": conv(16, (1, 175), 16, (1, 1), one_d=True),
    "speechnet b4": conv(16, (1, 87), 64, (1, 5), one_d=True),
    "speechnet fc": Layer("linear", 64, 9),
    # 1-D along a row, and as the training code lays a conv1d out (along the rows)
    "conv1d k3 row": conv(16, (1, 128), 32, (1, 3), pad=(0, 1), one_d=True),
    "conv1d k3 rows": conv(16, (128, 1), 32, (3, 1), pad=(1, 0)),
    "conv1d k9 dw": conv(32, (1, 250), 32, (1, 9), pad=(0, 4), groups=32, one_d=True),
    # 2-D
    "conv 3x3 16x16": conv(16, (16, 16), 16, (3, 3), pad=(1, 1)),
    "conv 3x3 s2": conv(8, (32, 32), 16, (3, 3), stride=(2, 2), pad=(1, 1)),
    "dw 3x3 16x16": conv(32, (16, 16), 32, (3, 3), pad=(1, 1), groups=32),
    "pw 8x8": conv(32, (8, 8), 64, (1, 1)),
    "linear 256-64": Layer("linear", 256, 64),
}


def firmware(build: Path, tools: toolchain.ArmTools, name: str, layer: Layer, phase: str,
             twin: bool) -> Path:
    f = fields(layer)
    sizes = {"x": f[1] * f[2] * f[3], "y": f[4] * f[5] * f[6],
             "w": f[4] * (f[1] // f[15]) * f[7] * f[8], "c": f[4]}
    text = MAIN % {"geometry": ", ".join(map(str, f)), "call": CALLS[phase], **sizes}
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


def measure(build: Path, tools: toolchain.ArmTools, plugin: Path, name: str, layer: Layer,
            phase: str, twin: bool) -> tuple[int, int]:
    elf = firmware(build, tools, name, layer, phase, twin)
    start = toolchain.symbol_address(tools.nm, elf, "bench_begin")
    stop = toolchain.symbol_address(tools.nm, elf, "bench_end")
    run = toolchain.run_qemu(tools, elf, timeout=600, plugin=plugin, start=start, stop=stop)
    if run.exit_code != 0 or run.instructions is None or run.cycles is None:
        sys.exit(f"{name} {phase}: the firmware failed (exit {run.exit_code})")
    return run.instructions, run.cycles


def generated(seed: int, count: int) -> dict[str, Layer]:
    """benchmarks/shapes.py's convolutions and linear layers (issue 32's generator) whose
    tensors fit the firmware."""
    layers = [layer for layer in shapes.generate(seed, count)
              if not layer.op.startswith("pool") and layer.macs() >= 4096
              and layer.activation_bytes() + layer.weight_count() <= 120_000]
    return {f"g{i} {layer.kind()}": layer for i, layer in enumerate(layers)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--twin", action="store_true", help="also the portable C twin")
    parser.add_argument("--only", nargs="*", choices=sorted(SHAPES), help="these shapes")
    parser.add_argument("--generated", type=int, default=0, metavar="N",
                        help="also N layers of benchmarks/shapes.py's generator")
    parser.add_argument("--seed", type=int, default=1, help="the generator's seed")
    args = parser.parse_args()
    tools = toolchain.arm_toolchain()
    if tools is None:
        sys.exit("needs arm-none-eabi-gcc and qemu-system-arm")
    layers = {name: SHAPES[name] for name in args.only or SHAPES}
    layers.update(generated(args.seed, args.generated) if args.generated else {})
    print("Cortex-M4 instructions per MAC (estimated cycles per MAC), one call of each pass, "
          "batch 1" + ("; C twin after the slash" if args.twin else ""))
    print(f"{'shape':<26} {'MACs':>9}  " + "  ".join(f"{p:>22}" for p in PASSES))
    per_mac: list[float] = []
    with tempfile.TemporaryDirectory(prefix="train-kernels-") as temp:
        build = Path(temp)
        plugin = prepare(build)
        for name, layer in layers.items():
            macs = layer.macs()
            cells = []
            for phase in PASSES:
                insn, cycles = measure(build, tools, plugin, name, layer, phase, False)
                per_mac.append(insn / macs)
                cell = f"{insn / macs:.2f} ({cycles / macs:.2f})"
                if args.twin:
                    twin, _ = measure(build, tools, plugin, name, layer, phase, True)
                    cell += f" / {twin / macs:.2f}"
                cells.append(f"{cell:>22}")
            print(f"{name[:26]:<26} {macs:>9}  " + "  ".join(cells), flush=True)
    print(f"passes: {len(per_mac)}; instructions per MAC: median "
          f"{shapes.quantile(per_mac, 0.5):.2f}, p90 {shapes.quantile(per_mac, 0.9):.2f}, "
          f"worst {max(per_mac):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
