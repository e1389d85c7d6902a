"""Rendering the on-device training code: static kernels copied (eb_train, eb_wof), glue
rendered from the train graph (edgebuild/backward.py), one line of C per step.

The backward steps come from `backward.backward_steps`, the same list written to
`backward.json`, so the artifact describes exactly what the C does. A pure function of
its inputs: no clocks, no paths, sorted everything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from edgebuild.codegen.project import environment, global_symbols, prefix
from edgebuild.core.resources import templates_dir
from edgebuild.ondevice import backward
from edgebuild.ondevice.memory import Buffer
from edgebuild.ondevice.operators import TrainKernel
from edgebuild.ops.c import initializer

if TYPE_CHECKING:
    from numpy.typing import NDArray

POOL = {"max": 0, "avg": 1}
VALUES_PER_LINE = 8
STATIC = ("eb_train.c", "eb_train.h", "eb_train_asm.h", "eb_train_tiles.c", "eb_train_tiles.h",
          "eb_wof.c", "eb_wof.h")
L1 = "ebt_l1"  # the L1 buffer tiled passes stage through (memory.L1_BUFFER)


@dataclass(frozen=True)
class TrainSpec:
    name: str
    graph: backward.TrainGraph
    buffers: list[Buffer]
    params: dict[str, NDArray[np.float32]]  # initial values of every float-part weight
    optimizer: str  # sgd / adam
    hyper: dict[str, Any]  # the optimizer's settings as JSON: lr, momentum / betas, eps
    loss: str
    batch: int
    inputs: NDArray[np.integer[Any]]  # int8 (steps, batch, input elements)
    labels: NDArray[np.integer[Any]]  # (steps, batch)
    offsets: dict[str, int]  # arena offset of each boundary tensor
    layout_id: int
    input_size: int


def act_name(act: str) -> str:
    """EBT_ACT_NONE / EBT_ACT_RELU / EBT_ACT_ABS, with _CLAMP (eb_train.h)."""
    return f"EBT_ACT_{act.upper()}"


def symbol(prefix: str, tensor: str) -> str:
    """C name of a buffer: `.` in tensor names (conv1.pre) becomes `__`."""
    return f"{prefix}_{tensor.replace('.', '__')}"


def x(tensor: str) -> str:
    return symbol("x", tensor)


def d(tensor: str) -> str:
    return symbol("d", tensor)


def float_literal(value: float | np.floating[Any]) -> str:
    """Exact: the shortest decimal of the float32 value, read back as float by C."""
    text = repr(float(np.float32(value)))
    return f"{text}f" if any(c in text for c in ".e") else f"{text}.0f"


def _lines(values: NDArray[np.floating[Any]], literal: Callable[[float], str]) -> list[str]:
    text = [literal(v) for v in np.asarray(values).ravel()]
    return [", ".join(text[i:i + VALUES_PER_LINE]) + ","
            for i in range(0, len(text), VALUES_PER_LINE)]


def weight_symbol(layer: backward.TrainLayer, part: str) -> str:
    trainable = layer.scope == "all" if part == "weight" else layer.scope is not None
    return symbol("p" if trainable else "c", f"{layer.name}.{part}")


def _bias(layer: backward.TrainLayer) -> str:
    return weight_symbol(layer, "bias") if layer.bias else "NULL"


def _conv_decl(layer: backward.TrainLayer, batch: int) -> str:
    """The ebt_conv of a layer (eb_train.h)."""
    c = layer.conv
    assert c is not None
    return initializer("ebt_conv", f"K_{layer.name}", [("n", batch)] + [
        (name, getattr(c, name)) for name in (
            "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h",
            "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups")])


def _pool_decl(layer: backward.TrainLayer, batch: int) -> str:
    """The ebt_pool of a layer's pooling (eb_train.h)."""
    p = layer.pool
    assert p is not None and layer.pool_mode is not None
    return initializer("ebt_pool", f"Q_{layer.name}", [("n", batch), ("c", p.in_c)] + [
        (name, getattr(p, name)) for name in (
            "in_h", "in_w", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w")] + [
        ("mode", POOL[layer.pool_mode])])


def declarations(spec: TrainSpec) -> list[str]:
    found = []
    for layer in spec.graph.layers:
        if layer.pool is not None:
            found.append(_pool_decl(layer, spec.batch))
        if layer.conv is not None:
            found.append(_conv_decl(layer, spec.batch))
        if layer.kernel is TrainKernel.concat:
            elems = ", ".join(str(s) for s in layer.sizes)
            found.append(f"static const int E_{layer.name}[{len(layer.sizes)}] = {{{elems}}};")
    found += [initializer("ebt_tile", p.symbol, [("rows", p.rows), ("channels", p.channels)])
              + f"  /* {p.tiles} tiles, {p.l1_bytes} bytes of L1 */"
              for p in spec.graph.passes if p.tiled]
    return found


def _tiled(graph: backward.TrainGraph, layer: backward.TrainLayer, phase: str) -> str | None:
    """`&T_<layer>_<phase>` when the pass runs in tiles, else None."""
    found = graph.tiling(layer.name, phase)
    return f"&{found.symbol}" if found.tiled else None


def _pool_call(graph: backward.TrainGraph, layer: backward.TrainLayer, x_in: str,
               y_out: str) -> str:
    tile = _tiled(graph, layer, "pool_forward")
    if tile is None:
        return f"ebt_pool_forward(&Q_{layer.name}, {x_in}, {y_out});"
    return f"ebt_pool_forward_tiled(&Q_{layer.name}, {tile}, {x_in}, {y_out}, {L1});"


def _pool_gradient_call(graph: backward.TrainGraph, layer: backward.TrainLayer, x_in: str,
                        dy: str, dx: str) -> str:
    tile = _tiled(graph, layer, "pool_input")
    if tile is None:
        return f"ebt_pool_backward(&Q_{layer.name}, {x_in}, {dy}, {dx});"
    return f"ebt_pool_backward_tiled(&Q_{layer.name}, {tile}, {x_in}, {dy}, {dx}, {L1});"


def _conv_forward(graph: backward.TrainGraph, layer: backward.TrainLayer, n: int) -> list[str]:
    calls = []
    if layer.pool is not None:
        calls.append(_pool_call(graph, layer, x(layer.inputs[0]), x(layer.conv_input)))
    args = (f"{x(layer.conv_input)}, {weight_symbol(layer, 'weight')}, {_bias(layer)}, "
            f"{x(layer.pre)}")
    tile = _tiled(graph, layer, "forward")
    calls.append(f"ebt_conv_forward(&K_{layer.name}, {args});" if tile is None else
                 f"ebt_conv_forward_tiled(&K_{layer.name}, {tile}, {args}, {L1});")
    return calls


def _pool_forward(graph: backward.TrainGraph, layer: backward.TrainLayer, n: int) -> list[str]:
    return [_pool_call(graph, layer, x(layer.inputs[0]), x(layer.name))]


def _add_forward(graph: backward.TrainGraph, layer: backward.TrainLayer, n: int) -> list[str]:
    count = n * layer.out_size
    first, second, *rest = layer.inputs
    return [f"ebt_add_forward({count}, {x(first)}, {x(second)}, {x(layer.pre)});"] + [
        f"ebt_add_forward({count}, {x(layer.pre)}, {x(other)}, {x(layer.pre)});"
        for other in rest]


def _concat_forward(graph: backward.TrainGraph, layer: backward.TrainLayer,
                    n: int) -> list[str]:
    parts = ", ".join(x(name) for name in layer.inputs)
    return [f"{{ const float *const xs[{len(layer.inputs)}] = {{{parts}}}; "
            f"ebt_concat_forward({n}, {len(layer.inputs)}, E_{layer.name}, xs, "
            f"{x(layer.name)}); }}"]


# The forward call of each training kernel (templates/train/eb_train.h).
FORWARD = {TrainKernel.conv: _conv_forward, TrainKernel.pool: _pool_forward,
           TrainKernel.add: _add_forward, TrainKernel.concat: _concat_forward}


class Segment(TypedDict):
    """A stretch of one training step that the Cortex-M4 count reports apart
    (`train/segments.json`): a layer's forward pass, its input gradient (with its
    activation's and pooling's) or its weight gradient (with its bias's), or the step's
    own parts -- the int8 prefix, zeroing the gradients, the loss, the optimizer -- and
    the multiply-accumulates of its convolution (0 for the rest)."""

    layer: str
    phase: str  # forward / input / weight / prefix / zero / loss / update
    macs: int


SEGMENT = "EBT_SEGMENT();"  # train_model.c: eb_train_segment() in counted builds


def _macs(layer: backward.TrainLayer, n: int) -> int:
    """Multiply-accumulates of a layer's convolution (or linear layer) over a batch."""
    c = layer.conv
    if c is None:
        return 0
    return n * c.out_c * c.out_h * c.out_w * (c.in_c // c.groups) * c.k_h * c.k_w


def _forward_groups(spec: TrainSpec) -> list[tuple[Segment, list[str]]]:
    n = spec.batch
    groups = []
    for layer in spec.graph.layers:
        calls = [f"/* {layer.name}: {layer.op} */",
                 *FORWARD[layer.kernel](spec.graph, layer, n)]
        if layer.act != "none":
            calls.append(f"ebt_act_forward({act_name(layer.act)}, {n * layer.out_size}, "
                         f"{x(layer.pre)}, {x(layer.name)});")
        groups.append((Segment(layer=layer.name, phase="forward", macs=_macs(layer, n)), calls))
    return groups


def _backward_groups(spec: TrainSpec) -> list[tuple[Segment, list[str]]]:
    """The backward steps, a group per layer and phase in the order they run."""
    layers = {layer.name: layer for layer in spec.graph.layers}
    n = spec.batch
    groups: list[tuple[Segment, list[str]]] = []
    for step in backward.backward_steps(spec.graph):
        if step.op == "loss_grad":
            groups.append((Segment(layer=spec.graph.output, phase="loss", macs=0), _loss(spec)))
            continue
        assert step.layer is not None and step.output is not None  # every gradient step has both
        layer = layers[step.layer]
        phase = "weight" if step.op in ("weight_grad", "bias_grad") else "input"
        macs = _macs(layer, n) if step.op in ("weight_grad", "input_grad") else 0
        calls = _backward(spec.graph, step.op, layer, step.output[2:], n, step.input or 0)
        if groups and (groups[-1][0]["layer"], groups[-1][0]["phase"]) == (layer.name, phase):
            last, before = groups[-1]
            groups[-1] = (Segment(layer=layer.name, phase=phase, macs=last["macs"] + macs),
                          before + calls)
        else:
            groups.append((Segment(layer=layer.name, phase=phase, macs=macs), calls))
    return groups


def _marked(groups: list[tuple[Segment, list[str]]]) -> list[str]:
    return [call for _, calls in groups for call in (SEGMENT, *calls)]


def forward_calls(spec: TrainSpec) -> list[str]:
    return _marked(_forward_groups(spec))


def backward_calls(spec: TrainSpec) -> list[str]:
    return _marked(_backward_groups(spec))


def segments(spec: TrainSpec) -> list[Segment]:
    """The counted stretches of a training step in order: each starts at an
    EBT_SEGMENT() of train_model.c (the prefix's in train_forward, the zeroing's and the
    optimizer's in train_step)."""
    return [Segment(layer="", phase="prefix", macs=0),
            *(segment for segment, _ in _forward_groups(spec)),
            Segment(layer="", phase="zero", macs=0),
            *(segment for segment, _ in _backward_groups(spec)),
            Segment(layer="", phase="update", macs=0)]


def _backward(graph: backward.TrainGraph, op: str, layer: backward.TrainLayer, target: str,
              n: int, index: int) -> list[str]:
    count = n * layer.out_size
    if op == f"{layer.act}_grad" and layer.act != "none":
        return [f"ebt_act_backward({act_name(layer.act)}, {count}, {x(layer.pre)}, "
                f"{d(layer.name)}, {d(layer.pre)});"]
    if op in ("weight_grad", "bias_grad"):
        return _parameter_gradient(graph, op, layer)
    if op == "input_grad":
        args = f"{d(layer.pre)}, {weight_symbol(layer, 'weight')}, {d(target)}"
        tile = _tiled(graph, layer, "input")
        return [f"ebt_conv_backward_input(&K_{layer.name}, {args});" if tile is None else
                f"ebt_conv_backward_input_tiled(&K_{layer.name}, {tile}, {args}, {L1});"]
    if op == "pool_grad":
        return [_pool_gradient_call(graph, layer, x(target), d(layer.conv_input), d(target))]
    if op == f"{layer.op}_grad" and layer.kernel in INPUT_GRADIENT:
        return INPUT_GRADIENT[layer.kernel](graph, layer, target, n, index)
    raise ValueError(f"no C for backward step {op}")


def _parameter_gradient(graph: backward.TrainGraph, op: str,
                        layer: backward.TrainLayer) -> list[str]:
    """A weight or bias gradient; a tiled pass computes both in one walk over its tiles,
    at the first of the two steps."""
    dy, x_in = d(layer.pre), x(layer.conv_input)
    weight = symbol("g", f"{layer.name}.weight") if layer.scope == "all" else "NULL"
    bias = symbol("g", f"{layer.name}.bias") if layer.bias else "NULL"
    tile = _tiled(graph, layer, "weight")
    if tile is not None:
        first = "weight_grad" if layer.scope == "all" else "bias_grad"
        return [f"ebt_conv_backward_weight_tiled(&K_{layer.name}, {tile}, {dy}, {x_in}, "
                f"{weight}, {bias}, {L1});"] if op == first else []
    if op == "weight_grad":
        assert layer.conv is not None
        return [f"ebt_conv_backward_weight(&K_{layer.name}, {dy}, {x_in}, {weight}, 0, "
                f"{layer.conv.out_h});"]
    return [f"ebt_conv_backward_bias(&K_{layer.name}, {dy}, {bias});"]


def _pool_gradient(graph: backward.TrainGraph, layer: backward.TrainLayer, target: str, n: int,
                   index: int) -> list[str]:
    return [_pool_gradient_call(graph, layer, x(target), d(layer.name), d(target))]


def _add_gradient(graph: backward.TrainGraph, layer: backward.TrainLayer, target: str, n: int,
                  index: int) -> list[str]:
    return [f"ebt_accumulate({n * layer.out_size}, {d(layer.pre)}, {d(target)});"]


def _concat_gradient(graph: backward.TrainGraph, layer: backward.TrainLayer, target: str,
                     n: int, index: int) -> list[str]:
    offset, size = sum(layer.sizes[:index]), layer.sizes[index]
    return [f"for (s = 0; s < {n}; ++s) ebt_accumulate({size}, {d(layer.name)} + s * "
            f"{layer.out_size} + {offset}, {d(target)} + s * {size});"]


# The input gradient of each training kernel without weights (one step per input read).
INPUT_GRADIENT = {TrainKernel.pool: _pool_gradient, TrainKernel.add: _add_gradient,
                  TrainKernel.concat: _concat_gradient}


def _loss(spec: TrainSpec) -> list[str]:
    out, k, n = spec.graph.output, spec.graph.output_size, spec.batch
    if spec.loss == "mse":
        return [f"for (s = 0; s < {n} * {k}; ++s) batch_target[s] = 0.0f;",
                f"for (s = 0; s < {n}; ++s) batch_target[s * {k} + labels[s]] = 1.0f;",
                f"loss = ebt_mse({n}, {k}, {x(out)}, batch_target, {d(out)});"]
    return [f"loss = ebt_softmax_cross_entropy({n}, {k}, {x(out)}, labels, {d(out)});"]


def optimizer_calls(spec: TrainSpec) -> list[str]:
    calls = []
    for name, shape in spec.graph.parameters():
        count = math.prod(shape)
        p, g = symbol("p", name), symbol("g", name)
        if spec.optimizer == "adam":
            b1, b2 = spec.hyper["betas"]
            calls.append(f"ebt_adam_step({count}, {p}, {g}, {symbol('s0', name)}, "
                         f"{symbol('s1', name)}, {float_literal(spec.hyper['lr'])}, "
                         f"{float_literal(b1)}, {float_literal(b2)}, "
                         f"{float_literal(spec.hyper['eps'])}, train_steps_done);")
        else:
            momentum = spec.hyper["momentum"]
            state = symbol("s0", name) if momentum > 0 else "NULL"
            calls.append(f"ebt_sgd_step({count}, {p}, {g}, {state}, "
                         f"{float_literal(spec.hyper['lr'])}, {float_literal(momentum)});")
    return calls


class RamArray(TypedDict):
    """A zero-initialized buffer of train_model.c."""

    symbol: str
    count: int
    comment: str


class FlashArray(TypedDict):
    """A float constant of train_model.c (initial or frozen values)."""

    symbol: str
    count: int
    lines: list[str]
    comment: str


def _arrays(spec: TrainSpec) -> tuple[list[RamArray], list[FlashArray]]:
    """RAM buffers (zero-initialized) and flash constants (initial/frozen values)."""
    ram: list[RamArray] = []
    flash: list[FlashArray] = []
    for buffer in spec.buffers:
        if buffer.kind == "frozen":
            flash.append({"symbol": symbol("c", buffer.name[2:]), "count": buffer.elements,
                          "lines": _lines(spec.params[buffer.name[2:]], float_literal),
                          "comment": f"{buffer.name[2:]}: frozen, float"})
        elif buffer.kind != "batch":
            ram.append({"symbol": buffer.name.replace(".", "__"), "count": buffer.elements,
                        "comment": buffer.kind})
    for name, _ in spec.graph.parameters():
        flash.append({"symbol": symbol("i", name), "count": spec.params[name].size,
                      "lines": _lines(spec.params[name], float_literal),
                      "comment": f"{name}: initial value"})
    return ram, flash


def context(spec: TrainSpec) -> dict[str, Any]:
    ram, flash = _arrays(spec)
    parameters = [{"name": name, "count": math.prod(shape), "p": symbol("p", name),
                   "g": symbol("g", name), "init": symbol("i", name),
                   "state": [symbol(f"s{slot}", name) for slot in range(_slots(spec))]}
                  for name, shape in spec.graph.parameters()]
    steps, batch = spec.inputs.shape[:2]
    return {
        "name": spec.name, "p": prefix(spec.name), "P": prefix(spec.name).upper(),
        "batch": spec.batch, "steps": steps,
        "input_size": spec.input_size, "outputs": spec.graph.output_size,
        "frozen_steps": spec.graph.frozen_steps,
        "boundary": [{"symbol": x(name), "size": size, "offset": spec.offsets[name]}
                     for name, size in spec.graph.boundary],
        "ram": ram, "flash": flash, "decls": declarations(spec),
        "forward": forward_calls(spec), "backward": backward_calls(spec),
        "optimizer": optimizer_calls(spec), "parameters": parameters,
        "gradients": [d(name) for name in sorted(spec.graph.zeroed)],
        "output": x(spec.graph.output), "mse": spec.loss == "mse",
        "layout_id": f"0x{spec.layout_id:08x}u",
        "wof_bytes": _wof_bytes(spec),
        "ram_bytes": sum(b.bytes for b in spec.buffers if b.kind != "frozen"),
        "data_inputs": [", ".join(str(int(v)) for v in batch_inputs.ravel())
                        for batch_inputs in spec.inputs],
        "data_labels": [", ".join(str(int(v)) for v in labels) for labels in spec.labels],
        "trainable": [f"{layer.name} ({layer.scope})" for layer in spec.graph.trainable],
    }


def _slots(spec: TrainSpec) -> int:
    if spec.optimizer == "adam":
        return 2
    return 1 if spec.hyper["momentum"] > 0 else 0


def _wof_bytes(spec: TrainSpec) -> int:
    from edgebuild.ondevice import wof

    sizes = [math.prod(shape) for _, shape in spec.graph.parameters()]
    return len(wof.encode([np.zeros(s, np.float32) for s in sizes], spec.layout_id))


def render(spec: TrainSpec) -> dict[str, str]:
    """Every file of the training code (relative to the C project's train/ directory)."""
    values = context(spec)
    env = environment()
    files = {name: env.get_template(f"train/{name}.j2").render(values)
             for name in ("train_model.h", "train_model.c", "train_data.h", "train_main.c",
                          "Makefile", "README.md")}
    root = templates_dir() / "train"
    for name in STATIC:
        files[name] = (root / name).read_text()
    files["segments.json"] = json.dumps(segments(spec), indent=1) + "\n"
    files["eb_train_config.h"] = env.get_template("project/eb_config.h.j2").render(
        values, kernel_symbols=global_symbols([files[name] for name in STATIC]),
        config_guard="EBT_CONFIG_H", left_out=[])
    return dict(sorted(files.items()))
