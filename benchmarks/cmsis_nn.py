"""edgebuild's kernels against ARM's CMSIS-NN, layer by layer, on the Cortex-M4 (issue 20).

For each example (each target of each manifest in manifests/), every planned layer's
instructions and estimated cycles per multiply-accumulate with edgebuild's reference
kernels and its optimized kernels — the per-layer figures of the `kat` stage (kat.json),
both counted on the KAT firmware under QEMU — and with the CMSIS-NN s8 kernel(s) doing the
same layer on the same shape, counted by the same QEMU plugin between the same markers
(its cycle model: templates/tools/insn_count.c). A whole-model row per example.

CMSIS-NN is built here only, from ../shared/reference/cmsis-nn (--cmsis; its PROVENANCE.md: -O2,
-mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16, so __ARM_FEATURE_DSP selects the SMLAD
paths), into one firmware per example that calls, between layer markers:
  conv2d, conv1d (as a 1 x L conv2d)  arm_convolve_wrapper_s8 (NHWC, per-channel requant)
  depthwise (groups = channels)       arm_depthwise_conv_wrapper_s8
  linear                              arm_fully_connected_s8 (per-tensor, like edgebuild)
  pool1d/pool2d, a fused input pool   arm_max_pool_s8 / arm_avgpool_s8 (before the conv)
  add                                 arm_elementwise_add_s8 (one call per extra input)
Data are random int8, biases small, multipliers in [2^30, 2^31) with shifts -7..-10, zero
points 0 (edgebuild is symmetric); parameter structs are static const and scratch buffers
sized by the kernels' own get_buffer_size, all set up before the start marker, as an
application would after its prepare step. Layers without an equivalent (concat, buffer,
transposed convolution) have no CMSIS-NN figure and do not count in its whole-model row;
activations CMSIS-NN lacks (abs) run as none.

    python benchmarks/cmsis_nn.py [--manifests NAME ...] [--build PROJECT] [--out PATH]

Without --build the examples are built (through `kat`) in a temporary project with this
checkout's edgebuild and the cache in $EDGEBUILD_CACHE, else ./cache of this repository.
--build reads PROJECT/build/ as it is (its kat.json files need per-layer figures). Writes
PATH.json and PATH.md (default: ./cmsis_nn) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CMSIS_NN = Path("shared") / "reference" / "cmsis-nn"  # beside the repository
CMSIS_DIRS = ("ConvolutionFunctions", "FullyConnectedFunctions", "PoolingFunctions",
              "BasicMathFunctions", "NNSupportFunctions")
CMSIS_FLAGS = ("-O2", "-std=c99", "-ffunction-sections", "-fdata-sections")
BOARD_BYTES = 4 * 1024 * 1024  # mps2-an386: 4 MiB of "flash" and 4 MiB of RAM
SCRATCH_BYTES = 256 * 1024
RUN_TIMEOUT_S = 300


# ---- the CMSIS-NN calls of a layer ---------------------------------------------------------

@dataclass
class Firmware:
    """The C of one example's CMSIS-NN firmware, built up layer by layer."""

    decls: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # scratch needs, before the markers
    layers: list[tuple[str, list[str]]] = field(default_factory=list)  # (layer, calls)
    sizes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("in", "aux", "out", "weights", "channels"), 1))

    def need(self, **sizes: int) -> None:
        for buffer, size in sizes.items():
            self.sizes[buffer] = max(self.sizes[buffer], size)


def horizontal(window: Any, one_d: bool) -> Any:
    """edgebuild lays 1-D layers as an L x 1 column; CMSIS-NN runs them as 1 x L rows."""
    if not one_d or window.in_w != 1:
        return window
    return replace(window, in_h=window.in_w, in_w=window.in_h, out_h=window.out_w,
                   out_w=window.out_h, k_h=window.k_w, k_w=window.k_h, stride_h=window.stride_w,
                   stride_w=window.stride_h, pad_h=window.pad_w, pad_w=window.pad_h,
                   dil_h=window.dil_w, dil_w=window.dil_h)


def dims(n: int, h: int, w: int, c: int) -> str:
    return f"{{.n = {n}, .h = {h}, .w = {w}, .c = {c}}}"


def tile(h: int, w: int) -> str:
    return f"{{.w = {w}, .h = {h}}}"


def activation(layer: Any) -> str:
    act = getattr(layer, "act", "none")
    low = 0 if getattr(act, "value", act) == "relu" else -128
    return f"{{.min = {low}, .max = 127}}"


BUFFERS = {"in_buf": "in", "aux_buf": "aux", "out_buf": "out"}


def pool_call(fw: Firmware, tag: str, w: Any, mode: str, src: str, dst: str) -> str:
    """A max or average pool of `src` into `dst` (NHWC, channels independent)."""
    fw.decls += [
        f"static const cmsis_nn_pool_params P_{tag} = {{.stride = {tile(w.stride_h, w.stride_w)}"
        f", .padding = {tile(w.pad_h, w.pad_w)}, .activation = {{.min = -128, .max = 127}}}};",
        f"static const cmsis_nn_dims I_{tag} = {dims(1, w.in_h, w.in_w, w.in_c)};",
        f"static const cmsis_nn_dims F_{tag} = {dims(1, w.k_h, w.k_w, 1)};",
        f"static const cmsis_nn_dims O_{tag} = {dims(1, w.out_h, w.out_w, w.out_c)};"]
    if mode == "avg":
        fw.checks.append(f"need(arm_avgpool_s8_get_buffer_size({w.out_w}, {w.in_c}));")
        kernel = "arm_avgpool_s8"
    else:
        kernel = "arm_max_pool_s8"
    fw.need(**{BUFFERS[src]: w.in_h * w.in_w * w.in_c, BUFFERS[dst]: w.out_h * w.out_w * w.out_c})
    return f"failed |= {kernel}(&ctx, &P_{tag}, &I_{tag}, {src}, &F_{tag}, &O_{tag}, {dst});"


def conv_call(fw: Firmware, tag: str, layer: Any, w: Any, src: str) -> str:
    """A (grouped) convolution, or a depthwise one when groups = input channels."""
    depthwise = w.groups > 1 and w.groups == w.in_c
    geometry = (f".stride = {tile(w.stride_h, w.stride_w)}, .padding = {tile(w.pad_h, w.pad_w)}"
                f", .dilation = {tile(w.dil_h, w.dil_w)}, .activation = {activation(layer)}")
    if depthwise:
        fw.decls.append(f"static const cmsis_nn_dw_conv_params P_{tag} = {{.input_offset = 0, "
                        f".output_offset = 0, .ch_mult = {w.out_c // w.in_c}, {geometry}}};")
        filters = dims(1, w.k_h, w.k_w, w.out_c)
        kernel = "arm_depthwise_conv_wrapper_s8"
    else:
        fw.decls.append(f"static const cmsis_nn_conv_params P_{tag} = {{.input_offset = 0, "
                        f".output_offset = 0, {geometry}}};")
        filters = dims(w.out_c, w.k_h, w.k_w, w.in_c // w.groups)
        kernel = "arm_convolve_wrapper_s8"
    fw.decls += [f"static const cmsis_nn_dims I_{tag} = {dims(1, w.in_h, w.in_w, w.in_c)};",
                 f"static const cmsis_nn_dims F_{tag} = {filters};",
                 f"static const cmsis_nn_dims B_{tag} = {dims(1, 1, 1, w.out_c)};",
                 f"static const cmsis_nn_dims O_{tag} = {dims(1, w.out_h, w.out_w, w.out_c)};"]
    fw.checks.append(f"need({kernel}_get_buffer_size(&P_{tag}, &I_{tag}, &F_{tag}, &O_{tag}));")
    fw.need(**{BUFFERS[src]: w.in_h * w.in_w * w.in_c}, out=w.out_h * w.out_w * w.out_c,
            channels=w.out_c,
            weights=w.out_c * w.k_h * w.k_w * (w.in_c // w.groups))
    return (f"failed |= {kernel}(&ctx, &P_{tag}, &quant, &I_{tag}, {src}, &F_{tag}, weights, "
            f"&B_{tag}, bias, &O_{tag}, out_buf);")


def linear_call(fw: Firmware, tag: str, layer: Any, w: Any) -> str:
    fw.decls += [
        f"static const cmsis_nn_fc_params P_{tag} = {{.input_offset = 0, .filter_offset = 0, "
        f".output_offset = 0, .activation = {activation(layer)}}};",
        f"static const cmsis_nn_dims I_{tag} = {dims(1, 1, 1, w.in_c)};",
        f"static const cmsis_nn_dims F_{tag} = {dims(w.in_c, 1, 1, w.out_c)};",
        f"static const cmsis_nn_dims B_{tag} = {dims(1, 1, 1, w.out_c)};",
        f"static const cmsis_nn_dims O_{tag} = {dims(1, 1, 1, w.out_c)};"]
    fw.checks.append(f"need(arm_fully_connected_s8_get_buffer_size(&F_{tag}));")
    fw.need(weights=w.in_c * w.out_c, out=w.out_c, channels=w.out_c, **{"in": w.in_c})
    return (f"failed |= arm_fully_connected_s8(&ctx, &P_{tag}, &tensor_quant, &I_{tag}, in_buf, "
            f"&F_{tag}, weights, &B_{tag}, bias, &O_{tag}, out_buf);")


def add_calls(fw: Firmware, inputs: int, size: int) -> list[str]:
    """TFLite-style int8 add (left shift 20, doubled multipliers): one call per extra input."""
    fw.need(aux=size, out=size, **{"in": size})
    call = ("failed |= arm_elementwise_add_s8({a}, aux_buf, 0, 1073741824, 0, 0, 1073741824, "
            f"0, 20, out_buf, 0, 1073741824, -19, -128, 127, {size});")
    return [call.format(a="in_buf" if i == 0 else "out_buf") for i in range(inputs - 1)]


def layer_calls(fw: Firmware, tag: str, layer: Any, node: Any) -> list[str]:
    """The CMSIS-NN calls doing `layer` (none: no equivalent)."""
    from edgebuild.ops import OPS

    one_d = len(node.in_shapes[0]) == 2
    windows = dict(OPS[layer.op].windows(layer, node.in_shapes, node.out_shape))
    if layer.op in ("conv1d", "conv2d"):
        calls, src = [], "in_buf"
        if "pool_tile" in windows:
            pool = horizontal(windows["pool_tile"], one_d)
            calls.append(pool_call(fw, f"{tag}p", pool, layer.pool.mode.value, src, "aux_buf"))
            src = "aux_buf"
        return [*calls, conv_call(fw, tag, layer, horizontal(windows["tile"], one_d), src)]
    if layer.op in ("pool1d", "pool2d"):
        pool = horizontal(windows["tile"], one_d)
        return [pool_call(fw, tag, pool, layer.mode.value, "in_buf", "out_buf")]
    if layer.op == "linear":
        return [linear_call(fw, tag, layer, windows["tile"])]
    if layer.op == "add":
        return add_calls(fw, len(node.in_shapes), math.prod(node.out_shape))
    return []


def firmware_for(target: Path) -> Firmware:
    """The CMSIS-NN calls of every planned layer of a build target, in plan order."""
    from edgebuild.manifest import Model
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model import folding
    from edgebuild.model import graph as graphs

    model = Model.load(target / "validate")
    layers, _ = folding.fold_layers(model.layers)
    graph, _ = graphs.build(tuple(model.input), layers)
    assert graph is not None
    nodes = {node.name: node for node in graph.nodes}
    by_name = {layer.name: layer for layer in layers}
    fw = Firmware()
    for index, step in enumerate(MemoryPlan.load(target / "plan").steps):
        calls = layer_calls(fw, f"L{index}", by_name[step.layer], nodes[step.layer])
        if calls:
            fw.layers.append((step.layer, calls))
    return fw


MAIN = """\
/* CMSIS-NN on one example's layer shapes (generated by benchmarks/cmsis_nn.py). */
#include <stdint.h>
#include <stdio.h>

#include "arm_nnfunctions.h"

__attribute__((noinline)) void eb_marker_start(void) {{ __asm__ volatile(""); }}
__attribute__((noinline)) void eb_marker_stop(void) {{ __asm__ volatile(""); }}
__attribute__((noinline)) void eb_marker_layer(void) {{ __asm__ volatile(""); }}

static int8_t in_buf[{in}], aux_buf[{aux}], out_buf[{out}], weights[{weights}];
static int32_t bias[{channels}], multiplier[{channels}], shift[{channels}];
static int32_t scratch[{scratch} / 4];
static const cmsis_nn_context ctx = {{scratch, {scratch}}};
static const cmsis_nn_per_channel_quant_params quant = {{multiplier, shift}};
static const cmsis_nn_per_tensor_quant_params tensor_quant = {{1317094531, -8}};
static uint32_t seed = 12345u;
static int too_small;

static uint32_t next(void)
{{
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
}}

static void fill(int8_t *values, int n)
{{
    int i;
    for (i = 0; i < n; ++i) {{
        values[i] = (int8_t)(next() & 0xff);
    }}
}}

static void need(int32_t bytes)
{{
    if (bytes > {scratch}) {{
        printf("scratch too small: %ld bytes needed\\n", (long)bytes);
        too_small = 1;
    }}
}}

{decls}

int main(void)
{{
    arm_cmsis_nn_status failed = ARM_CMSIS_NN_SUCCESS;
    int i;
    fill(in_buf, sizeof in_buf);
    fill(aux_buf, sizeof aux_buf);
    fill(weights, sizeof weights);
    for (i = 0; i < {channels}; ++i) {{
        bias[i] = (int32_t)(next() % 2001u) - 1000;
        multiplier[i] = 1073741824 + (int32_t)(next() % 1073741823u);
        shift[i] = -7 - (int32_t)(next() % 4u);
    }}
{checks}
    if (too_small) {{
        return 3;
    }}
    eb_marker_start();
{body}
    eb_marker_layer();
    eb_marker_stop();
    if (failed != ARM_CMSIS_NN_SUCCESS) {{
        printf("a CMSIS-NN kernel returned %d\\n", (int)failed);
        return 4;
    }}
    printf("CMSIS-NN: %d layers\\n", {count});
    return 0;
}}
"""


def main_c(fw: Firmware) -> str:
    body = "\n".join("    eb_marker_layer();\n" + "\n".join(f"    {c}" for c in calls)
                     for _, calls in fw.layers)
    return MAIN.format(**fw.sizes, scratch=SCRATCH_BYTES, decls="\n".join(fw.decls),
                       checks="\n".join(f"    {c}" for c in fw.checks), body=body,
                       count=len(fw.layers))


# ---- building and running --------------------------------------------------------------------

def compile_cmsis(tools: Any, cmsis: Path, into: Path) -> list[Path]:
    """The CMSIS-NN int8 sources (no float/half variants) as objects, two compilers at once."""
    from edgebuild.targets import toolchain

    sources = sorted(p for d in CMSIS_DIRS for p in (cmsis / "Source" / d).glob("*.c")
                     if not any(tag in p.name for tag in ("_f16", "_f32", "flt")))
    into.mkdir(parents=True, exist_ok=True)

    def compile_one(source: Path) -> Path:
        obj = into / f"{source.stem}.o"
        subprocess.run([str(tools.gcc), *toolchain.M4_CFLAGS, *CMSIS_FLAGS,
                        "-I", str(cmsis / "Include"), "-I", str(cmsis / "core"), "-c",
                        str(source), "-o", str(obj)], check=True, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=toolchain.TOOL_TIMEOUT_S)
        return obj

    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        return list(pool.map(compile_one, sources))


def link_script(into: Path) -> Path:
    import jinja2

    from edgebuild.core.resources import templates_dir

    template = (templates_dir() / "project" / "link.ld.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    path = into / "link.ld"
    path.write_text(env.from_string(template).render(
        flash_bytes=BOARD_BYTES, ram_bytes=BOARD_BYTES, stack_bytes=16384, heap_bytes=4096))
    return path


@dataclass(frozen=True)
class Bench:
    """What running CMSIS-NN needs once: tools, the QEMU plugin, objects, a link script."""

    tools: Any
    plugin: Path
    objects: tuple[Path, ...]
    link: Path
    cmsis: Path


def run_cmsis(bench: Bench, fw: Firmware, work: Path) -> dict[str, tuple[int, int]]:
    """(instructions, estimated cycles) per layer that has CMSIS-NN calls."""
    from edgebuild.targets import toolchain

    if not fw.layers:
        return {}
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.c").write_text(main_c(fw))
    elf = toolchain.build_firmware(
        bench.tools, [work / "main.c", *bench.objects], bench.link, work / "cmsis.elf",
        flags=("-O2", "-std=c99", "-I", str(bench.cmsis / "Include"), "-I",
               str(bench.cmsis / "core"), "-Wl,--gc-sections"))
    marks = {name: toolchain.symbol_address(bench.tools.nm, elf, f"eb_marker_{name}")
             for name in ("start", "stop", "layer")}
    run = toolchain.run_qemu(bench.tools, elf, timeout=RUN_TIMEOUT_S, plugin=bench.plugin,
                             layer=marks["layer"], start=marks["start"], stop=marks["stop"])
    if run.exit_code != 0 or len(run.segments) != len(fw.layers) + 2:
        sys.exit(f"CMSIS-NN firmware {elf} failed (exit {run.exit_code}, "
                 f"{len(run.segments)} segments):\n{run.stdout}{run.stderr}")
    return {name: (s.instructions, s.cycles)
            for (name, _), s in zip(fw.layers, run.segments[1:-1], strict=True)}


def build_examples(project: Path, names: list[str]) -> None:
    """`edgebuild build --until kat` of the chosen examples, with this checkout's code."""
    (project / "manifests").mkdir(parents=True)
    for path in sorted((REPO / "manifests").iterdir()):
        target = project / "manifests" / path.name
        if path.is_dir():
            subprocess.run(["cp", "-r", str(path), str(target)], check=True)
        else:
            target.write_bytes(path.read_bytes())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "EDGEBUILD_CACHE": os.environ.get("EDGEBUILD_CACHE", str(REPO / "cache"))}
    paths = [f"manifests/{name}.yaml" for name in names]
    result = subprocess.run([sys.executable, "-m", "edgebuild", "build", "--until", "kat",
                             *paths], cwd=project, env=env, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"building the examples failed (exit {result.returncode})")


# ---- the table ----------------------------------------------------------------------------

def per_mac(count: int | None, macs: int) -> float | None:
    return None if count is None or not macs else round(count / macs, 3)


def shape_text(node: Any, layer: Any) -> str:
    """`in->out` channels first, then the window: k(ernel), s(tride), d(ilation), g(roups),
    a fused input pool."""
    def text(value: Any) -> str:
        return "x".join(str(n) for n in value) if isinstance(value, tuple | list) else str(value)

    window = [f"{tag}{text(getattr(layer, name))}" for tag, name in
              (("k", "kernel"), ("s", "stride"), ("d", "dilation"), ("g", "groups"))
              if getattr(layer, name, None) not in (None, 1, (1, 1))]
    pool = getattr(layer, "pool", None)
    if pool is not None:
        window.append(f"{pool.mode.value}pool{text(pool.size)}")
    if layer.op in ("pool1d", "pool2d"):
        window.append(f"{layer.mode.value}{text(layer.size)}")
    return f"{text(node.in_shapes[0])}->{text(node.out_shape)} {' '.join(window)}".strip()


def example_rows(label: str, target: Path, fw: Firmware, cmsis: dict[str, tuple[int, int]]
                 ) -> list[dict[str, Any]]:
    """One row per planned layer, then the whole model."""
    from edgebuild.manifest import Model
    from edgebuild.model import folding
    from edgebuild.model.graph import Graph
    from edgebuild.report.katresult import FirmwareRun, KatResult

    m4 = KatResult.load(target / "kat").cortex_m4
    if not isinstance(m4, FirmwareRun) or not m4.layers:
        sys.exit(f"{label}: kat.json has no per-layer figures (Cortex-M4 skipped, or built "
                 "before edgebuild counted layers)")
    nodes = {node.name: node for node in Graph.load(target / "validate").nodes}
    layers = {layer.name: layer for layer in
              folding.fold_layers(Model.load(target / "validate").layers)[0]}
    kernels = {name: sorted({call.split("= ")[1].split("(")[0] for call in calls})
               for name, calls in fw.layers}
    optimized = m4.kernels == "optimized"
    rows = []
    for layer in m4.layers:
        ours = (layer.instructions, layer.cycles) if optimized else (None, None)
        rows.append(_row(label, layer.layer, layer.op,
                         shape_text(nodes[layer.layer], layers[layer.layer]), layer.macs,
                         (layer.reference_instructions, layer.reference_cycles), ours,
                         cmsis.get(layer.layer)))
        rows[-1]["cmsis_nn_kernels"] = kernels.get(layer.layer, [])
    covered = [cmsis[layer.layer] for layer in m4.layers if layer.layer in cmsis]
    reference = m4.reference
    model_input = "x".join(str(n) for n in Model.load(target / "validate").input)
    rows.append(_row(label, "(model)", "", f"input {model_input}",
                     sum(layer.macs for layer in m4.layers),
                     (None, None) if reference is None else (reference.instructions,
                                                             reference.cycles),
                     (m4.instructions, m4.cycles) if optimized else (None, None),
                     (sum(c[0] for c in covered), sum(c[1] for c in covered))
                     if covered else None,
                     missing=[layer.layer for layer in m4.layers if layer.layer not in cmsis]))
    return rows


def _row(example: str, layer: str, op: str, shape: str, macs: int,
         reference: tuple[int | None, int | None], optimized: tuple[int | None, int | None],
         cmsis: tuple[int, int] | None, missing: list[str] | None = None) -> dict[str, Any]:
    counts = {"reference": reference, "optimized": optimized,
              "cmsis_nn": (None, None) if cmsis is None else cmsis}
    row: dict[str, Any] = {"example": example, "layer": layer, "op": op, "shape": shape,
                           "macs": macs}
    for kind, (insn, cycles) in counts.items():
        row[kind] = {"instructions": insn, "cycles": cycles, "insn_per_mac": per_mac(insn, macs),
                     "cycles_per_mac": per_mac(cycles, macs)}
    if missing:
        row["cmsis_nn_missing"] = missing
    return row


COLUMNS = ("example", "layer", "op", "shape", "MACs", "ref insn/MAC", "ref cyc/MAC",
           "opt insn/MAC", "opt cyc/MAC", "CMSIS insn/MAC", "CMSIS cyc/MAC")


def cells(row: dict[str, Any]) -> list[str]:
    """A layer without MACs shows its absolute counts in parentheses."""
    def figure(kind: str, what: str) -> str:
        value = row[kind][f"{what}_per_mac"]
        if value is not None:
            return f"{value:.2f}"
        count = row[kind]["instructions" if what == "insn" else "cycles"]
        return "-" if count is None else f"({count:,})"
    out = [row["example"], row["layer"], row["op"], row["shape"], f"{row['macs']:,}"]
    return out + [figure(kind, what) for kind in ("reference", "optimized", "cmsis_nn")
                  for what in ("insn", "cycles")]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    notes = [f"- {row['example']}: CMSIS-NN has no equivalent of "
             f"{', '.join(row['cmsis_nn_missing'])} (not in its whole-model figure)"
             for row in rows if row.get("cmsis_nn_missing")]
    legend = ("\nref/opt: edgebuild's reference and optimized kernels (kat.json, KAT firmware); "
              "'-': not counted (a target without optimized kernels, a layer without a CMSIS-NN "
              "equivalent); (n): absolute count of a layer without MACs. Cycles: the QEMU "
              "plugin's Cortex-M4 TRM model (zero wait states, P = 2, SDIV 7).\n")
    return "\n".join(lines) + "\n" + legend + "\n".join(notes) + ("\n" if notes else "")


def text_table(rows: list[dict[str, Any]]) -> str:
    table = [list(COLUMNS), *(cells(row) for row in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) if i >= 4 else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in table)


# ---- main -----------------------------------------------------------------------------------

def targets_of(build: Path, names: list[str]) -> list[tuple[str, Path]]:
    """(label, directory) of every built target of the chosen manifests: build/<name>/ or,
    with several targets, build/<name>/<label>/."""
    found = sorted(p.parent.parent for p in build.glob("*/kat/kat.json")) + sorted(
        p.parent.parent for p in build.glob("*/*/kat/kat.json"))
    chosen = [(d.relative_to(build).as_posix(), d) for d in found]
    return sorted((label, d) for label, d in chosen if label.split("/")[0] in names)


def default_cmsis() -> Path:
    """../shared/reference/cmsis-nn beside this repository, or beside the main checkout when
    this is a git worktree."""
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            cwd=REPO, capture_output=True, text=True).stdout.strip()
    roots = [REPO] + ([Path(common).parent] if common else [])
    found = [root.parent / CMSIS_NN for root in roots if (root.parent / CMSIS_NN).is_dir()]
    return found[0] if found else REPO.parent / CMSIS_NN


def prepare(cmsis: Path, work: Path) -> Bench:
    from edgebuild.targets import toolchain

    tools = toolchain.arm_toolchain()
    if tools is None:
        sys.exit(f"Cortex-M4 toolchain absent: {toolchain.missing_reason()}")
    if not (cmsis / "Include" / "arm_nnfunctions.h").is_file():
        sys.exit(f"CMSIS-NN not found at {cmsis} (--cmsis)")
    objects = compile_cmsis(tools, cmsis, work / "cmsis-obj")
    return Bench(tools, toolchain.build_plugin(work), tuple(objects), link_script(work), cmsis)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", nargs="+", metavar="NAME",
                        default=sorted(p.stem for p in (REPO / "manifests").glob("*.yaml")),
                        help="examples by name (manifests/NAME.yaml; default: all)")
    parser.add_argument("--build", type=Path, help="a project whose build/ to read as it is")
    parser.add_argument("--out", type=Path, default=Path("cmsis_nn"),
                        help="write OUT.json and OUT.md (default: ./cmsis_nn)")
    parser.add_argument("--cmsis", type=Path, default=None,
                        help="CMSIS-NN source tree (default: ../shared/reference/cmsis-nn)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="edgebuild-cmsis-") as temp:
        work = Path(temp)
        project = args.build
        if project is None:
            project = work / "project"
            build_examples(project, args.manifests)
        bench = prepare(args.cmsis or default_cmsis(), work)
        rows = []
        for label, target in targets_of(project / "build", args.manifests):
            fw = firmware_for(target)
            measured = run_cmsis(bench, fw, work / "fw" / label.replace("/", "_"))
            rows += example_rows(label, target, fw, measured)
    print(text_table(rows))
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(rows))
    print(f"\nwrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
