"""Rendering the C project: static kernels copied, glue rendered from jinja2 templates.

A pure function of (plan, quantized model, KAT vectors, target): no clocks, no absolute
paths, sorted everything — two renders of the same inputs are byte-identical. Templates
hold loops; the per-op C calls are built here, one emitter per op (explicit registry).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from edgebuild.core.numerics import pool_rounding, requantize_rounding
from edgebuild.core.resources import templates_dir
from edgebuild.model import graph as graphs
from edgebuild.model.quantized import QuantizedModel
from edgebuild.ops.operator import pair

STACK_BYTES = 8192
HEAP_BYTES = 4096
VALUES_PER_LINE = 16
ROUNDING = {"half_up": "EB_ROUND_HALF_UP", "floor": "EB_ROUND_FLOOR", "trunc": "EB_ROUND_TRUNC"}
ACT = {"none": "EB_ACT_NONE", "relu": "EB_ACT_RELU", "abs": "EB_ACT_ABS"}
POOL = {"max": "EB_POOL_MAX", "avg": "EB_POOL_AVG"}
# Kernel files per target device: the reference kernels are always there (they define the
# arithmetic); `cortex-m4` adds the dual-MAC (SMLAD) variants, which the same project's host
# build compiles with portable intrinsics — so the host KAT over every test sample checks
# the optimized algorithm and QEMU checks the real instructions.
OPTIMIZED_DEVICES = ("cortex-m4",)


def kernel_files(device: str, tiled: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(C sources, headers) copied into model/ for this device (+ the tiling driver)."""
    sources, headers = ["eb_kernels.c"], ["eb_kernels.h"]
    if device in OPTIMIZED_DEVICES:
        sources.append("eb_kernels_opt.c")
        headers.append("eb_kernels_opt.h")
    if tiled:
        sources.append("eb_tiling.c")
        headers.append("eb_tiling.h")
    return tuple(sources), tuple(headers)


def _tiled(step: dict, key: str = "tile") -> dict | None:
    tile = step.get(key)
    return tile if tile and tile["tiled"] else None


def _tile_decl(symbol: str, tile: dict, double_buffer: bool) -> str:
    return (f"static const eb_tile {symbol} = {{{tile['rows']}, {tile['channels']}, "
            f"{1 if double_buffer else 0}}};")


@dataclass(frozen=True)
class ProjectSpec:
    name: str
    model: QuantizedModel
    plan: dict
    kat_inputs: object  # int8 (K, *sample shape): clips (K, frames, *input) with a buffer
    kat_expected: object  # int64 (K, outputs)
    flash_bytes: int
    ram_bytes: int
    device: str


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def macro(tensor: str) -> str:
    return f"T_{tensor}"


def _lines(values) -> list[str]:
    text = [str(int(v)) for v in values]
    return [", ".join(text[i:i + VALUES_PER_LINE]) + ","
            for i in range(0, len(text), VALUES_PER_LINE)]


def weight_arrays(model: QuantizedModel) -> list[dict]:
    arrays = []
    for layer in model.layers:
        quant = model.params.get(layer.name)
        if quant is None:
            continue
        arrays.append({"symbol": f"W_{layer.name}", "ctype": "int8_t",
                       "count": quant.weight.size, "lines": _lines(quant.weight.ravel()),
                       "comment": f"{layer.name}: {quant.bits}-bit weights, shape "
                                  f"{list(quant.weight.shape)}, scale 2^{quant.scale_exp}"})
        if quant.bias is not None:
            arrays.append({"symbol": f"B_{layer.name}", "ctype": "int32_t",
                           "count": quant.bias.size, "lines": _lines(quant.bias.ravel()),
                           "comment": f"{layer.name}: bias, accumulator units"})
    return arrays


def _spatial(shape, vertical: bool = False) -> tuple[int, int]:
    """(height, width) of a channels-first shape. A 1-D signal [C][L] is the same bytes as
    [C][1][L] and as [C][L][1]: it runs as one row (1 x L), or — when tiled, so that tiles
    of output rows are spans of time — as one column (L x 1)."""
    if len(shape) == 3:
        return shape[1], shape[2]
    return (shape[1], 1) if vertical else (1, shape[1])


def _pool_params(symbol: str, pool, shape, rounding: str,
                 vertical: bool = False) -> tuple[str, tuple[int, int]]:
    from edgebuild.ops.pooling import geometry

    dims = len(shape) - 1
    sizes, strides = geometry(pool, dims)
    if dims == 1:
        k, s = ((sizes[0], 1), (strides[0], 1)) if vertical else ((1, sizes[0]), (1, strides[0]))
    else:
        k, s = sizes, strides
    h, w = _spatial(shape, vertical)
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    decl = (f"static const eb_pool_params {symbol} = {{{shape[0]}, {h}, {w}, {oh}, {ow}, "
            f"{k[0]}, {k[1]}, {s[0]}, {s[1]}, {POOL[pool.mode.value]}, {ROUNDING[pool_rounding(rounding)]}}};")
    return decl, (oh, ow)


def _geometry(layer, dims: int, vertical: bool = False) -> list[tuple[int, int]]:
    """(h, w) pairs of kernel, stride, pad, dilation; a 1-D layer's other axis has size 1,
    pad 0 (see _spatial for the orientation)."""
    fields = (layer.kernel, layer.stride, layer.pad, layer.dilation)
    if dims == 1:
        other = (1, 1, 0, 1)
        return [(v, o) if vertical else (o, v) for v, o in zip(fields, other, strict=True)]
    return [pair(v) for v in fields]


def fused_pool(step: dict, layer, shape, source: str, rounding: str):
    """(decls, calls, new source, pooled shape) of a layer's fused input pooling, into its
    scratch tensor, whole or tiled; unchanged source and shape when there is none."""
    if layer.pool is None:
        return [], [], source, shape
    pool_tile = _tiled(step, "pool_tile")
    decl, (h, w) = _pool_params(f"Q_{layer.name}", layer.pool, shape, rounding, bool(pool_tile))
    scratch = macro(step["scratch"]["name"])
    if pool_tile:
        decls = [decl, _tile_decl(f"TP_{layer.name}", pool_tile, step["double_buffer"])]
        calls = [f"eb_pool2d_tiled(&Q_{layer.name}, &TP_{layer.name}, {source}, {scratch}, "
                 f"eb_l1.bytes);"]
    else:
        decls, calls = [decl], [f"eb_pool2d(&Q_{layer.name}, {source}, {scratch});"]
    return decls, calls, scratch, (shape[0], h, w) if len(shape) == 3 else (shape[0], h * w)


def emit_conv(step: dict, layer, node, model: QuantizedModel, source: str,
              optimized: bool) -> tuple[list, list]:
    quant = model.params[layer.name]
    decls, calls, source, shape = fused_pool(step, layer, node.in_shapes[0], source,
                                             model.rounding)
    tile = _tiled(step)
    vertical = bool(tile)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _geometry(layer, len(shape) - 1, vertical)
    h, w = _spatial(shape, vertical)
    oh, ow = _spatial(node.out_shape, vertical)
    shift = quant.scale_exp - (quant.bits - 1)
    decls.append(f"static const eb_conv_params P_{layer.name} = {{{shape[0]}, {h}, {w}, "
                 f"{layer.out}, {oh}, {ow}, {kh}, {kw}, {sh}, {sw}, {ph}, {pw}, {dh}, {dw}, "
                 f"{layer.groups}, {shift}, {ROUNDING[requantize_rounding(model.rounding)]}, {ACT[layer.act.value]}}};")
    bias = f"B_{layer.name}" if quant.bias is not None else "NULL"
    if tile:
        decls.append(_tile_decl(f"T_TILE_{layer.name}", tile, step["double_buffer"]))
        kernel = "eb_k_conv_wide" if layer.wide else "eb_k_conv"
        calls.append(f"eb_conv2d_tiled(&P_{layer.name}, &T_TILE_{layer.name}, {kernel}, "
                     f"{1 if layer.wide else 0}, {source}, W_{layer.name}, {bias}, "
                     f"{macro(step['output'])}, eb_l1.bytes);")
        return decls, calls
    out = macro(step["output"]) if not layer.wide else f"(int32_t *){macro(step['output'])}"
    kernel = "eb_conv2d_wide" if layer.wide else "eb_conv2d"
    if optimized:
        kernel = "EB_CONV2D_WIDE" if layer.wide else "EB_CONV2D"
    calls.append(f"{kernel}(&P_{layer.name}, {source}, W_{layer.name}, {bias}, {out});")
    return decls, calls


def conv_scratch(layer, node) -> str:
    """C expression: int16 scratch elements the optimized conv needs (0 when not used)."""
    kh, kw = _geometry(layer, len(node.in_shapes[0]) - 1)[0]
    return f"EB_CONV_OPT_SCRATCH({node.in_shapes[0][0] // layer.groups}, {kh}, {kw})"


def emit_linear(step, layer, node, model: QuantizedModel, source: str, optimized: bool):
    quant = model.params[layer.name]
    features = math.prod(node.in_shapes[0])
    bias = f"B_{layer.name}" if quant.bias is not None else "NULL"
    out = macro(step["output"])
    name = "EB_LINEAR" if optimized else "eb_linear"
    tile = _tiled(step)
    if tile:
        wrapper = f"eb_k_{layer.name}"
        shift = quant.scale_exp - (quant.bits - 1)
        body = (f"{name}{'_WIDE' if optimized else '_wide'}(n, m, in, w, b, (int32_t *)out);"
                if layer.wide else
                f"{name}(n, m, in, w, b, {shift}, {ROUNDING[requantize_rounding(model.rounding)]}, "
                f"{ACT[layer.act.value]}, (int8_t *)out);")
        decls = [f"static void {wrapper}(int n, int m, const int8_t *in, const int8_t *w, "
                 f"const int32_t *b, void *out) {{ {body} }}",
                 _tile_decl(f"T_TILE_{layer.name}", tile, step["double_buffer"])]
        return decls, [f"eb_linear_tiled({features}, {layer.out}, &T_TILE_{layer.name}, "
                       f"{wrapper}, {1 if layer.wide else 0}, {source}, W_{layer.name}, {bias}, "
                       f"{out}, eb_l1.bytes);"]
    if layer.wide:
        return [], [f"{name}{'_WIDE' if optimized else '_wide'}({features}, {layer.out}, {source}, "
                    f"W_{layer.name}, {bias}, (int32_t *){out});"]
    shift = quant.scale_exp - (quant.bits - 1)
    return [], [f"{name}({features}, {layer.out}, {source}, W_{layer.name}, {bias}, "
                f"{shift}, {ROUNDING[requantize_rounding(model.rounding)]}, {ACT[layer.act.value]}, {out});"]


def linear_scratch(layer, node) -> str:
    return f"EB_LINEAR_OPT_SCRATCH({math.prod(node.in_shapes[0])})"


def emit_pool(step, layer, node, model: QuantizedModel, source: str, optimized: bool):
    from edgebuild.ops.pool import window

    tile = _tiled(step)
    decl, _ = _pool_params(f"Q_{layer.name}", window(layer), node.in_shapes[0], model.rounding,
                           bool(tile))
    if tile:
        return [decl, _tile_decl(f"T_TILE_{layer.name}", tile, step["double_buffer"])], [
            f"eb_pool2d_tiled(&Q_{layer.name}, &T_TILE_{layer.name}, {source}, "
            f"{macro(step['output'])}, eb_l1.bytes);"]
    return [decl], [f"eb_pool2d(&Q_{layer.name}, {source}, {macro(step['output'])});"]


def emit_add(step, layer, node, model, source, optimized):
    inputs = ", ".join(macro(name) for name in step["inputs"])
    count = len(step["inputs"])
    return [], [f"{{ const int8_t *const in_{layer.name}[{count}] = {{{inputs}}}; "
                f"eb_add({math.prod(node.out_shape)}, {count}, in_{layer.name}, "
                f"{ACT[layer.act.value]}, {macro(step['output'])}); }}"]


def emit_concat(step, layer, node, model, source, optimized):
    calls, offset = [], 0
    for name, shape in zip(step["inputs"], node.in_shapes, strict=True):
        size = math.prod(shape)
        calls.append(f"eb_copy({size}, {macro(name)}, {macro(step['output'])} + {offset});")
        offset += size
    return [], calls


def emit_conv_transpose(step, layer, node, model: QuantizedModel, source: str, optimized: bool):
    """The reference eb_conv_transpose2d(_wide) on every target (no optimized variant), whole
    or through eb_conv_transpose2d_tiled with a per-layer kernel wrapper. Fused pooling runs
    first, as for conv2d."""
    quant = model.params[layer.name]
    decls, calls, source, shape = fused_pool(step, layer, node.in_shapes[0], source,
                                             model.rounding)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _geometry(layer, 2)
    shift = quant.scale_exp - (quant.bits - 1)
    decls.append(f"static const eb_conv_params P_{layer.name} = {{{shape[0]}, {shape[1]}, "
                 f"{shape[2]}, {layer.out}, {node.out_shape[1]}, {node.out_shape[2]}, {kh}, {kw}, "
                 f"{sh}, {sw}, {ph}, {pw}, {dh}, {dw}, {layer.groups}, {shift}, "
                 f"{ROUNDING[requantize_rounding(model.rounding)]}, {ACT[layer.act.value]}}};")
    bias = f"B_{layer.name}" if quant.bias is not None else "NULL"
    kernel, ctype = ("eb_conv_transpose2d_wide", "int32_t") if layer.wide else \
        ("eb_conv_transpose2d", "int8_t")
    tile = _tiled(step)
    if tile:
        decls += [f"static void eb_kt_{layer.name}(const eb_conv_params *p, const int8_t *in, "
                  f"const int8_t *w, const int32_t *b, void *out) {{ {kernel}(p, in, w, b, "
                  f"({ctype} *)out); }}",
                  _tile_decl(f"T_TILE_{layer.name}", tile, step["double_buffer"])]
        calls.append(f"eb_conv_transpose2d_tiled(&P_{layer.name}, &T_TILE_{layer.name}, "
                     f"eb_kt_{layer.name}, {1 if layer.wide else 0}, {source}, W_{layer.name}, "
                     f"{bias}, {macro(step['output'])}, eb_l1.bytes);")
    elif layer.wide:
        calls.append(f"eb_conv_transpose2d_wide(&P_{layer.name}, {source}, W_{layer.name}, "
                     f"{bias}, (int32_t *){macro(step['output'])});")
    else:
        calls.append(f"eb_conv_transpose2d(&P_{layer.name}, {source}, W_{layer.name}, {bias}, "
                     f"{macro(step['output'])});")
    return decls, calls


def emit_buffer(step, layer, node, model, source, optimized):
    """The window lives in a static state array (outside the arena, which is reused every
    inference); each inference pushes this frame's features and copies the window out."""
    channels = node.out_shape[0]
    return [], [f"eb_buffer_push({channels}, {layer.length}, {source}, {state_symbol(layer.name)}, "
                f"{macro(step['output'])});"]


def state_symbol(layer: str) -> str:
    return f"S_{layer}"


EMITTERS = {"conv1d": emit_conv, "conv2d": emit_conv, "linear": emit_linear,
            "pool1d": emit_pool, "pool2d": emit_pool, "add": emit_add, "concat": emit_concat,
            "conv_transpose2d": emit_conv_transpose, "buffer": emit_buffer}
SCRATCH = {"conv1d": conv_scratch, "conv2d": conv_scratch, "linear": linear_scratch}


def c_steps(spec: ProjectSpec) -> tuple[list[dict], list[str]]:
    """(rendered steps, scratch-size expressions of the optimized kernels used)."""
    graph, _ = graphs.build(spec.model.input_shape, spec.model.layers)
    nodes = {node.name: node for node in graph.nodes}
    layers = {layer.name: layer for layer in spec.model.layers}
    optimized = spec.device in OPTIMIZED_DEVICES
    rendered, scratch = [], []
    for step in spec.plan["steps"]:
        layer, node = layers[step["layer"]], nodes[step["layer"]]
        decls, calls = EMITTERS[layer.op](step, layer, node, spec.model,
                                          macro(step["inputs"][0]), optimized)
        if optimized and layer.op in SCRATCH:
            scratch.append(SCRATCH[layer.op](layer, node))
        rendered.append({"index": step["step"],
                         "comment": f"{layer.name}: {layer.op} {list(node.in_shapes[0])} -> "
                                    f"{list(node.out_shape)}", "decls": decls, "calls": calls})
    return rendered, scratch


def scratch_expression(sizes: list[str]) -> str:
    """The largest of the scratch sizes, as a C constant expression."""
    expression = sizes[0]
    for size in sizes[1:]:
        expression = f"EB_MAX({expression}, {size})"
    return expression


def render(spec: ProjectSpec) -> dict[str, str]:
    """Every file of the C project: relative path -> text."""
    env = _environment()
    wide = bool(getattr(spec.model.output, "wide", False))
    outputs = int(spec.kat_expected.shape[1])
    steps, scratch = c_steps(spec)
    l1_bytes = max((tile["l1_bytes"] for step in spec.plan["steps"]
                    for tile in (_tiled(step), _tiled(step, "pool_tile")) if tile), default=0)
    layers = {layer.name: layer for layer in spec.model.layers}
    conv_tiled = {"wide" if layers[step["layer"]].wide else "narrow"
                  for step in spec.plan["steps"]
                  if _tiled(step) and step["op"] in ("conv1d", "conv2d")}
    sources, headers = kernel_files(spec.device, l1_bytes > 0)
    context = {
        "name": spec.name, "input_size": math.prod(spec.model.input_shape),
        "frames": graphs.frames(spec.model.layers),
        "states": [{"symbol": state_symbol(step["layer"]), "bytes": step["state_bytes"],
                    "layer": step["layer"]} for step in spec.plan["steps"] if step.get("state_bytes")],
        "layers": len(spec.model.layers),
        "input_shape": list(spec.model.input_shape), "output_size": outputs,
        "output_shape": [outputs], "output_kind": "int32" if wide else "int8",
        "output_ctype": "int32_t" if wide else "int8_t", "arena_bytes": max(spec.plan["arena_bytes"], 4),
        "tensors": [{"macro": macro(t["name"]), **t} for t in spec.plan["tensors"]],
        "steps": steps, "output_macro": macro(spec.plan["output"]),
        "scratch": scratch_expression(scratch) if scratch else None,
        "l1_bytes": l1_bytes, "conv_tiled": conv_tiled,
        "optimized": spec.device in OPTIMIZED_DEVICES,
        "kernel_headers": list(headers),
        "arrays": weight_arrays(spec.model),
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
        "kat/kat_vectors.h": env.get_template("project/kat_vectors.h.j2").render(context),
    }
    root = templates_dir()
    for static in ("project/main.c", "project/startup_m4.c"):
        files[Path(static).name] = (root / static).read_text()
    for kernel in (*headers, *sources):
        files[f"model/{kernel}"] = (root / "kernels" / kernel).read_text()
    return dict(sorted(files.items()))
