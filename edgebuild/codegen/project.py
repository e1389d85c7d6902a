"""Rendering the C project: static kernels copied, glue rendered from jinja2 templates.

A pure function of (plan, quantized model, KAT vectors, target): no clocks, no absolute
paths, sorted everything — two renders of the same inputs are byte-identical. Templates
hold loops; each layer's declarations and calls come from its operator's `c` facet
(ops/<op>.py), given a `CStep` built here from the plan.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from edgebuild.codegen.header import InputFormat
from edgebuild.codegen.header import context as header_context
from edgebuild.core import packing
from edgebuild.core.resources import templates_dir
from edgebuild.formats import numbers
from edgebuild.memory import plan as plans
from edgebuild.memory.plan import MemoryPlan, Step, TileChoice
from edgebuild.model import graph as graphs
from edgebuild.model.quantized import QuantizedModel
from edgebuild.ops.c import OPTIONAL_PATHS, PATH_FILES, CStep, Tile, weight_symbol
from edgebuild.ops.operator import Unsupported

if TYPE_CHECKING:
    import jinja2
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer

STACK_BYTES = 8192
HEAP_BYTES = 4096
VALUES_PER_LINE = 16
# Kernel files per CPU: the reference kernels are always there (they define the arithmetic);
# a Cortex-M4 (a `cortex-m4` target, or the core beside a MAX7800x accelerator, where the C
# emulates the device's number format: targets.cpu) adds the dual-MAC (SMLAD) variants,
# which the same project's host build compiles with portable intrinsics — so the host KAT
# over every test sample checks the optimized algorithm and QEMU checks the real
# instructions.
OPTIMIZED_CPUS = ("cortex-m4",)
# Headers copied into model/ that only a kernel source includes (not cnn.c).
PRIVATE_HEADERS = ("eb_gemm_asm.h", "eb_simd.h", "eb_dw_line.h")


def kernel_files(cpu: str, tiled: bool, paths: Iterable[str] = ()
                 ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(C sources, headers) copied into model/ for this CPU (+ the tiling driver, + the
    files of the optional kernel paths the steps run: ops.c.PATH_FILES)."""
    sources, headers = ["eb_kernels.c"], ["eb_kernels.h"]
    if cpu in OPTIMIZED_CPUS:
        sources.extend(("eb_kernels_opt.c", "eb_dw_opt.c", "eb_pool_opt.c"))
        headers.extend(("eb_kernels_opt.h", "eb_dw_opt.h", "eb_simd.h", "eb_gemm_asm.h",
                        "eb_dw_line.h"))
    for path in sorted(set(paths) & PATH_FILES.keys()):  # any CPU (global_pool's are portable)
        sources.extend(PATH_FILES[path][0])
        headers.extend(PATH_FILES[path][1])
    if tiled:
        sources.append("eb_tiling.c")
        headers.append("eb_tiling.h")
    return tuple(sources), tuple(headers)


def kat_frames(spec: ProjectSpec, input_size: int) -> int:
    """Frames per known-answer vector: a clip's (the model's window), or fewer for a model
    with a buffer whose known answer is one frame into an empty window (model.knownanswer)."""
    if not len(spec.kat_inputs):
        return graphs.frames(spec.model.layers)
    return int(spec.kat_inputs[0].size) // input_size


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    model: QuantizedModel
    plan: MemoryPlan
    # int8 (K, *sample shape): clips (K, frames, *input) with a buffer, or one frame each
    # (K, *input): the first inference after a reset (model.knownanswer)
    kat_inputs: NDArray[np.integer[Any]]
    kat_expected: NDArray[np.integer[Any]]  # int64 (K, outputs)
    flash_bytes: int
    ram_bytes: int
    device: str  # the CPU that runs the C: `host`, `cortex-m4` (an accelerator's: targets.cpu)
    inputs: InputFormat | None = None  # normalization and class names (no dataset: None)


def environment() -> jinja2.Environment:
    """The jinja2 environment of every rendered file (glue only: templates hold loops)."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def macro(tensor: str) -> str:
    return f"T_{tensor}"


def _lines(values: Iterable[int | np.integer[Any]]) -> list[str]:
    text = [str(int(v)) for v in values]
    return [", ".join(text[i:i + VALUES_PER_LINE]) + ","
            for i in range(0, len(text), VALUES_PER_LINE)]


class WeightArray(TypedDict):
    """One array of weights.c (templates/project/weights.c.j2)."""

    symbol: str
    ctype: str
    count: int
    lines: list[str]
    comment: str
    packed: bool


class RenderedStep(TypedDict):
    """One step of cnn.c (templates/project/cnn.c.j2): its operator's C."""

    index: int
    comment: str
    decls: list[str]
    calls: list[str]


def graph_nodes(model: QuantizedModel) -> dict[str, graphs.Node]:
    """The model's graph nodes by layer name (their shapes: what the C emitters and the
    weights' storage ask)."""
    graph, _ = graphs.build(model.input_shape, model.layers)
    assert graph is not None
    return {node.name: node for node in graph.nodes}


def weight_arrays(model: QuantizedModel, prefix: str,
                  nodes: dict[str, graphs.Node]) -> list[WeightArray]:
    """weights.c's arrays: each compute layer's weights as its C stores them (its op's
    `stored`: a convolution's cut to the taps its outputs reach), bias and, in TFLite's
    number format, requantization."""
    arrays: list[WeightArray] = []
    for layer in model.layers:
        quant = model.params.get(layer.name)
        if quant is None:
            continue
        c = numbers.c(layer.op, model.numbers)
        weight = quant.weight if isinstance(c, Unsupported) else \
            c.stored(layer, nodes[layer.name].in_shapes, quant.weight)
        scale = "per-channel scales" if model.numbers != numbers.OWN else f"scale 2^{quant.scale_exp}"
        shape = f"shape {list(weight.shape)}, {scale}"
        if packing.packed(quant.bits):  # the bytes as int8 values (weights.h: the layout)
            stored = packing.pack(weight, quant.bits).view("int8")
            comment = (f"{layer.name}: {quant.bits}-bit weights packed {8 // quant.bits} per "
                       f"byte, {shape}")
        else:
            stored, comment = weight.ravel(), f"{layer.name}: {quant.bits}-bit weights, {shape}"
        arrays.append({"symbol": weight_symbol(prefix, "w", layer.name), "ctype": "int8_t",
                       "count": int(stored.size), "lines": _lines(stored), "comment": comment,
                       "packed": packing.packed(quant.bits)})
        if quant.bias is not None:
            arrays.append({"symbol": weight_symbol(prefix, "b", layer.name), "ctype": "int32_t",
                           "count": quant.bias.size, "lines": _lines(quant.bias.ravel()),
                           "comment": f"{layer.name}: bias, accumulator units", "packed": False})
        arrays += requantization_arrays(model, layer.name, prefix)
    return arrays


def requantization_arrays(model: QuantizedModel, layer: str, prefix: str) -> list[WeightArray]:
    """In TFLite's number format, a compute layer's per-channel fixed-point multipliers
    ("m") and shifts ("s"): x * m * 2^(s - 31) (tflite.arith)."""
    record = model.records.get(layer)
    if record is None or getattr(record, "multiplier", None) is None:
        return []
    return [{"symbol": weight_symbol(prefix, part, layer), "ctype": "int32_t",
             "count": int(values.size), "lines": _lines(values.ravel()),
             "comment": f"{layer}: per-channel {what}", "packed": False}
            for part, values, what in (("m", record.multiplier, "multipliers (Q0.31)"),
                                       ("s", record.shift, "shifts (positive: left)"))]


def prefix(name: str) -> str:
    """What every global C symbol of a model starts with: its manifest name and "_" (macros
    use it in upper case), so several models link into one firmware."""
    return f"{name}_"


# A function declared or defined at file scope: `type name(` at the start of a line;
# static functions, macros and function-pointer typedefs do not match.
PROTOTYPE = re.compile(r"^(?!static\b|typedef\b|#)[A-Za-z_][\w \t\*]*?\b([a-z]\w*)\s*\(", re.M)


def global_symbols(texts: list[str]) -> list[str]:
    """The global functions of kernel files (headers and sources): what eb_config.h renames
    (tests/test_cproject.py checks the compiled objects define no other global symbol)."""
    return sorted({name for text in texts for name in PROTOTYPE.findall(text)})


def state_symbol(layer: str) -> str:
    return f"S_{layer}"


def _tile(choice: TileChoice | None) -> Tile | None:
    return None if choice is None else Tile(choice.rows, choice.channels)


def c_step(spec: ProjectSpec, step: Step, layer: Layer, node: graphs.Node) -> CStep[Layer]:
    """What the layer's emitter (its op's `c` facet) gets for one planned step."""
    return CStep(
        layer=layer, in_shapes=node.in_shapes, out_shape=node.out_shape,
        quant=spec.model.params.get(layer.name), rounding=spec.model.rounding,
        numbers=spec.model.records.get(layer.name),
        inputs=tuple(macro(name) for name in step.inputs), output=macro(step.output),
        scratch=None if step.scratch is None else macro(step.scratch.name),
        tile=_tile(step.tile()), pool_tile=_tile(step.tile("pool_tile")),
        double_buffer=step.double_buffer, optimized=spec.device in OPTIMIZED_CPUS,
        state=state_symbol(layer.name) if step.state_bytes else None,
        prefix=prefix(spec.name))


@dataclass(frozen=True)
class Steps:
    """The rendered layer steps and what they need of the project: the optimized kernels'
    scratch sizes, the preludes (once each), the optional kernel paths they run."""

    rendered: list[RenderedStep]
    scratch: list[str]
    preludes: list[str]
    paths: frozenset[str]


def c_steps(spec: ProjectSpec, nodes: dict[str, graphs.Node]) -> Steps:
    """Every planned step through its op's C emitter."""
    layers = {layer.name: layer for layer in spec.model.layers}
    optimized = spec.device in OPTIMIZED_CPUS
    rendered: list[RenderedStep] = []
    scratch: list[str] = []
    preludes: set[tuple[int, str]] = set()
    paths: set[str] = set()
    for step in spec.plan.steps:
        layer, node = layers[step.layer], nodes[step.layer]
        c = numbers.c(layer.op, spec.model.numbers)
        if isinstance(c, Unsupported):  # validation refuses such a layer before any stage
            raise ValueError(f"layer {layer.name!r}: {c.reason}")
        code = c.emit(c_step(spec, step, layer, node))
        size = c.scratch(layer, node.in_shapes) if optimized else None
        if size is not None:
            scratch.append(size)
        scratch.extend(code.scratch)
        preludes.update(code.preludes)
        paths.update(code.paths)
        rendered.append({"index": step.step,
                         "comment": f"{layer.name}: {layer.op} {list(node.in_shapes[0])} -> "
                                    f"{list(node.out_shape)}", "decls": list(code.decls),
                         "calls": list(code.calls)})
    return Steps(rendered, scratch, [text for _, text in sorted(preludes)], frozenset(paths))


def scratch_expression(sizes: list[str]) -> str:
    """The largest of the scratch sizes, as a C constant expression: a balanced tree of
    EB_MAX. The macro names each argument twice, so a chain of N nested calls expands to
    2^N copies (a 25-layer model's took the compiler minutes and 15 GB); a balanced tree
    is N x 2^log2(N) = N^2 at most."""
    if len(sizes) == 1:
        return sizes[0]
    half = len(sizes) // 2
    return f"EB_MAX({scratch_expression(sizes[:half])}, {scratch_expression(sizes[half:])})"


def _workspace(spec: ProjectSpec, step: Step) -> int:
    """The step's workspace bytes in the plan (a plan made for no target, as tests make
    them: memory.plan.workspace, what the plan stage records)."""
    if step.workspace_bytes is not None or spec.plan.memory is not None:
        return step.workspace_bytes or 0
    graph, _ = graphs.build(spec.model.input_shape, spec.model.layers)
    assert graph is not None
    layer = next(layer for layer in spec.model.layers if layer.name == step.layer)
    node = next(node for node in graph.nodes if node.name == step.layer)
    return plans.workspace(layer, node, step.tile(), spec.model.numbers) or 0


def workspace_context(spec: ProjectSpec, steps: Steps) -> dict[str, Any]:
    """The optimized kernels' workspace: as many int16 as the plan counts (its
    memory.workspace_bytes, one source of truth), and the kernels' own claim (their scratch
    macros) the C checks it against at compile time."""
    if not steps.scratch:
        return {"scratch": None}
    planned = max(_workspace(spec, step) for step in spec.plan.steps)
    if planned <= 0:
        raise AssertionError("the plan counts no workspace for the optimized kernels' calls")
    return {"scratch": planned // 2, "scratch_check": scratch_expression(steps.scratch)}



def left_out(paths: frozenset[str]) -> list[str]:
    """The optional kernel paths (ops.c OPTIONAL_PATHS) no step runs, for eb_config.h's
    EB_OPT_NO_<PATH>: of the TFLite kernels' paths ("tfl_...") only where the project has
    those kernels (a define for a file it does not compile says nothing)."""
    tflite = "tflite_opt" in paths
    return [path for path in OPTIONAL_PATHS
            if path not in paths and (tflite or not path.startswith("tfl_"))]

def render(spec: ProjectSpec) -> dict[str, str]:
    """Every file of the C project: relative path -> text."""
    env = environment()
    wide = bool(getattr(spec.model.output, "wide", False))
    outputs = int(spec.kat_expected.shape[1])
    nodes = graph_nodes(spec.model)
    steps = c_steps(spec, nodes)
    optimized = spec.device in OPTIMIZED_CPUS
    l1_bytes = max((tile.l1_bytes for step in spec.plan.steps
                    for tile in (step.tile(), step.tile("pool_tile")) if tile), default=0)
    sources, headers = kernel_files(spec.device, l1_bytes > 0, steps.paths)
    input_size = math.prod(spec.model.input_shape)
    arrays = weight_arrays(spec.model, prefix(spec.name), nodes)
    root = templates_dir()
    kernels = {kernel: (root / "kernels" / kernel).read_text() for kernel in (*headers, *sources)}
    context = {
        "name": spec.name, "p": prefix(spec.name), "P": prefix(spec.name).upper(),
        "kernel_symbols": global_symbols(list(kernels.values())), "config_guard": "EB_CONFIG_H",
        "left_out": left_out(steps.paths) if optimized else [],
        "input_size": input_size, **header_context(spec.inputs, input_size, outputs),
        "frames": graphs.frames(spec.model.layers),
        "kat_frames": kat_frames(spec, input_size),
        "states": [{"symbol": state_symbol(step.layer), "bytes": step.state_bytes,
                    "layer": step.layer} for step in spec.plan.steps if step.state_bytes],
        "layers": len(spec.model.layers),
        "input_shape": list(spec.model.input_shape), "output_size": outputs,
        "output_shape": [outputs], "output_kind": "int32" if wide else "int8",
        "output_ctype": "int32_t" if wide else "int8_t", "arena_bytes": max(spec.plan.arena_bytes, 4),
        "tensors": [{"macro": macro(t.name), **t.to_json()} for t in spec.plan.tensors],
        "steps": steps.rendered, "output_macro": macro(spec.plan.output),
        **workspace_context(spec, steps),
        "l1_bytes": l1_bytes, "preludes": steps.preludes, "optimized": optimized,
        "kernel_headers": [header for header in headers if header not in PRIVATE_HEADERS],
        "arrays": arrays, "packed": any(array["packed"] for array in arrays),
        "samples": [{"input": ", ".join(str(int(v)) for v in x.ravel()),
                     "expected": ", ".join(str(int(v)) for v in y.ravel())}
                    for x, y in zip(spec.kat_inputs, spec.kat_expected, strict=True)],
        "flash_bytes": spec.flash_bytes, "ram_bytes": spec.ram_bytes,
        "stack_bytes": STACK_BYTES, "heap_bytes": HEAP_BYTES,
        "model_sources": ["cnn.c", "weights.c", *sources],
    }
    files = {
        "Makefile": env.get_template("project/Makefile.j2").render(context),
        "README.md": env.get_template("project/README.md.j2").render(context),
        "link.ld": env.get_template("project/link.ld.j2").render(context),
        "model/cnn.h": env.get_template("project/cnn.h.j2").render(context),
        "model/cnn.c": env.get_template("project/cnn.c.j2").render(context),
        "model/weights.h": env.get_template("project/weights.h.j2").render(context),
        "model/weights.c": env.get_template("project/weights.c.j2").render(context),
        "model/eb_config.h": env.get_template("project/eb_config.h.j2").render(context),
        "kat/kat_vectors.h": env.get_template("project/kat_vectors.h.j2").render(context),
        "main.c": env.get_template("project/main.c.j2").render(context),
        "startup_m4.c": (root / "project" / "startup_m4.c").read_text(),
    }
    files.update({f"model/{kernel}": text for kernel, text in kernels.items()})
    return dict(sorted(files.items()))
