"""The backward graph of the trainable part: which layers run in float32, which tensors
carry gradients, and the ordered forward and backward steps the generated C executes.

The model is cut at the first trainable layer (in execution order): every layer before
it is the *frozen prefix* and runs the int8 inference kernels; the tensors it hands over
(its *boundary*, possibly several with skip connections) are converted to float32 as
q/128. Every layer from the cut on runs float32 with the dequantized weights
w = w_int x 2^shift and b = b_acc x 2^shift / 128 (shift = scale_exp - (bits - 1)): the same
real values the integer model approximates. The float part does not clamp or requantize,
so training gradients are the exact gradients of that float function.

Gradient rules (the bugs the references describe are ruled out by construction):
- a tensor read by several layers gets the *sum* of their input gradients: every
  backward kernel accumulates (`+=`), and every gradient buffer is zeroed exactly once,
  at the start of the step (`zero` below), never inside a layer or a tile;
- a weight gradient is accumulated over row tiles when the layer's saved input and
  output gradient do not fit L1 (`tiles`), into the same once-zeroed buffer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from edgebuild.model import graph as graphs
from edgebuild.ops.operator import pair

WEIGHTED = ("conv1d", "conv2d", "linear")
SUPPORTED = (*WEIGHTED, "pool1d", "pool2d", "add", "concat", "flatten", "passthrough", "reshape")
VIEWS = ("flatten", "passthrough", "reshape")  # float tensors are flat per sample
FLOAT = 4  # bytes per float32


class TrainGraphError(ValueError):
    """The manifest asks for something the trainable part cannot do; the message says why."""


@dataclass(frozen=True)
class Conv:
    """Geometry of the training kernels' ebt_conv (a 1-D signal runs as L x 1 so that row
    tiles are spans of time; linear is a 1 x 1 convolution)."""

    in_c: int
    in_h: int
    in_w: int
    out_c: int
    out_h: int
    out_w: int
    k_h: int = 1
    k_w: int = 1
    stride_h: int = 1
    stride_w: int = 1
    pad_h: int = 0
    pad_w: int = 0
    dil_h: int = 1
    dil_w: int = 1
    groups: int = 1


@dataclass(frozen=True)
class Pool:
    c: int
    in_h: int
    in_w: int
    out_h: int
    out_w: int
    k_h: int
    k_w: int
    stride_h: int
    stride_w: int
    mode: str


@dataclass(frozen=True)
class TrainLayer:
    """One float-part layer. Tensor names: `input`, a layer name, `<layer>.pre` (before the
    activation) or `<layer>.pooled` (fused input pooling)."""

    name: str
    op: str
    inputs: tuple[str, ...]
    sizes: tuple[int, ...]  # per-sample elements of each input
    out_size: int
    act: str = "none"
    scope: str | None = None  # "all" / "bias" when trainable
    conv: Conv | None = None
    pool: Pool | None = None  # standalone pool, or the fused pool of a conv's input
    weight_shape: tuple[int, ...] = ()
    bias: bool = False
    tiles: tuple[tuple[int, int], ...] = ()  # weight-gradient row tiles

    @property
    def weighted(self) -> bool:
        return self.op in WEIGHTED

    @property
    def pre(self) -> str:
        """The tensor the activation reads (the layer output when there is none)."""
        return f"{self.name}.pre" if self.act != "none" else self.name

    @property
    def conv_input(self) -> str:
        return f"{self.name}.pooled" if self.pool is not None and self.weighted else self.inputs[0]


@dataclass(frozen=True)
class TrainGraph:
    frozen: tuple[str, ...]  # deployed layers of the int8 prefix, in order
    frozen_steps: int  # how many deployed layers the prefix is (cnn_run_steps argument)
    boundary: tuple[tuple[str, int], ...]  # (tensor, elements) converted int8 -> float
    layers: tuple[TrainLayer, ...]
    output: str
    output_size: int
    needs_grad: frozenset[str]  # tensors that carry a gradient
    tensors: dict[str, int] = field(default_factory=dict)  # float tensor -> elements per sample

    @property
    def trainable(self) -> tuple[TrainLayer, ...]:
        return tuple(layer for layer in self.layers if layer.scope is not None)

    def parameters(self) -> list[tuple[str, tuple[int, ...]]]:
        """The trainable tensors in file order: (name, shape); the weight-only file layout."""
        found = []
        for layer in self.trainable:
            if layer.scope == "all":
                found.append((f"{layer.name}.weight", layer.weight_shape))
            if layer.bias:
                found.append((f"{layer.name}.bias", (layer.weight_shape[0],)))
        return found

    def to_json(self) -> dict:
        return {"frozen": list(self.frozen), "frozen_steps": self.frozen_steps,
                "boundary": [list(b) for b in self.boundary], "output": self.output,
                "trainable": {layer.name: layer.scope for layer in self.trainable},
                "parameters": [[n, list(s)] for n, s in self.parameters()],
                "forward": forward_steps(self), "backward": backward_steps(self),
                "zero_once_per_step": sorted(f"d:{t}" for t in self.needs_grad)
                + [f"d:{n}" for n, _ in self.parameters()]}


def weighted_layers(layers) -> list[str]:
    return [layer.name for layer in layers if layer.op in WEIGHTED]


def _conv_geometry(layer, in_shape, out_shape) -> tuple[Conv, Pool | None]:
    """Training-kernel geometry of a conv1d/conv2d/linear, with its fused input pool."""

    if layer.op == "linear":
        return Conv(math.prod(in_shape), 1, 1, layer.out, 1, 1), None
    dims = len(in_shape) - 1
    pool = None
    shape = in_shape
    if layer.pool is not None:
        pool = _pool(layer.pool, shape)
        shape = (shape[0], pool.out_h, pool.out_w) if dims == 2 else (shape[0], pool.out_h)
    if dims == 1:
        return Conv(shape[0], shape[1], 1, layer.out, out_shape[1], 1, layer.kernel, 1,
                    layer.stride, 1, layer.pad, 0, layer.dilation, 1, layer.groups), pool
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (pair(v) for v in (
        layer.kernel, layer.stride, layer.pad, layer.dilation))
    return Conv(shape[0], shape[1], shape[2], layer.out, out_shape[1], out_shape[2], kh, kw,
                sh, sw, ph, pw, dh, dw, layer.groups), pool


def _pool(window, shape) -> Pool:
    from edgebuild.ops.pooling import geometry

    dims = len(shape) - 1
    sizes, strides = geometry(window, dims)
    if dims == 1:  # L x 1, like the convolutions
        k, s, hw = (sizes[0], 1), (strides[0], 1), (shape[1], 1)
    else:
        k, s, hw = tuple(sizes), tuple(strides), (shape[1], shape[2])
    oh, ow = (hw[0] - k[0]) // s[0] + 1, (hw[1] - k[1]) // s[1] + 1
    return Pool(shape[0], hw[0], hw[1], oh, ow, k[0], k[1], s[0], s[1], window.mode.value)


def weight_tiles(conv: Conv, batch: int, l1: int) -> tuple[tuple[int, int], ...]:
    """Output-row tiles of a weight gradient: the rows whose output gradient and input
    rows (for the whole batch) fit `l1` bytes together; one tile when all fit."""
    per_row = batch * FLOAT * (conv.out_c * conv.out_w + conv.in_c * conv.stride_h * conv.in_w)
    halo = batch * FLOAT * conv.in_c * conv.dil_h * (conv.k_h - 1) * conv.in_w
    rows = max(1, min(conv.out_h, (l1 - halo) // per_row if l1 > halo else 1))
    return tuple((r, min(r + rows, conv.out_h)) for r in range(0, conv.out_h, rows))


def build(layers, input_shape, scopes: dict[str, str], batch: int, l1: int) -> TrainGraph:
    """The train graph for deployed (folded) `layers` with `scopes` {name: all|bias}."""
    graph, _ = graphs.build(tuple(input_shape), layers)
    nodes = {node.name: node for node in graph.nodes}
    order = [layer.name for layer in layers]
    unknown = [name for name in scopes if name not in nodes]
    if unknown:
        raise TrainGraphError(f"no layer named {', '.join(unknown)}")
    first = min(order.index(name) for name in scopes)
    alias: dict[str, str] = {}
    frozen = order[:first]
    for layer in layers[:first]:
        if layer.op in VIEWS:
            alias[layer.name] = alias.get(layer.inputs[0], layer.inputs[0])
    produced = {alias.get(name, name) for name in frozen} | {graphs.INPUT}
    boundary: dict[str, int] = {}
    train_layers: list[TrainLayer] = []
    tensors: dict[str, int] = {}
    for layer in layers[first:]:
        if layer.op not in SUPPORTED:
            raise TrainGraphError(f"layer '{layer.name}' ({layer.op}) cannot train on the "
                                  f"device: supported ops are {', '.join(SUPPORTED)}")
        node = nodes[layer.name]
        inputs = tuple(alias.get(name, name) for name in node.inputs)
        for name, shape in zip(inputs, node.in_shapes, strict=True):
            if name in produced:
                boundary.setdefault(name, math.prod(shape))
                tensors[name] = math.prod(shape)
        if layer.op in VIEWS:
            alias[layer.name] = inputs[0]
            continue
        train_layers.append(_train_layer(layer, node, inputs, scopes.get(layer.name), batch, l1))
        for name, size in _outputs(train_layers[-1]):
            tensors[name] = size
    if not train_layers:
        raise TrainGraphError("nothing to train after the cut")
    output = alias.get(order[-1], order[-1])
    needs = _needs_grad(train_layers)
    return TrainGraph(tuple(frozen), first, tuple(boundary.items()), tuple(train_layers),
                      output, tensors[output], frozenset(needs), tensors)


def _train_layer(layer, node, inputs, scope, batch: int, l1: int) -> TrainLayer:
    out_size = math.prod(node.out_shape)
    sizes = tuple(math.prod(s) for s in node.in_shapes)
    if layer.op in WEIGHTED:
        conv, pool = _conv_geometry(layer, node.in_shapes[0], node.out_shape)
        weight_shape = (conv.out_c, conv.in_c // conv.groups, conv.k_h, conv.k_w)
        if scope == "bias" and not layer.bias:
            raise TrainGraphError(f"layer '{layer.name}' has no bias (bias: false), so "
                                  "`scope: bias` leaves nothing to train; use all")
        tiles = weight_tiles(conv, batch, l1) if scope == "all" else ()
        return TrainLayer(layer.name, layer.op, inputs, sizes, out_size, layer.act.value,
                          scope, conv, pool, weight_shape, layer.bias, tiles)
    if layer.op in ("pool1d", "pool2d"):
        from edgebuild.ops.pool import window

        return TrainLayer(layer.name, layer.op, inputs, sizes, out_size,
                          pool=_pool(window(layer), node.in_shapes[0]))
    if scope is not None:
        raise TrainGraphError(f"layer '{layer.name}' ({layer.op}) has no weights to train; "
                              f"layers with weights: conv1d, conv2d, linear")
    return TrainLayer(layer.name, layer.op, inputs, sizes, out_size,
                      act=getattr(getattr(layer, "act", None), "value", "none"))


def _outputs(layer: TrainLayer) -> list[tuple[str, int]]:
    """Float tensors a layer writes: output, pre-activation, pooled input."""
    found = [(layer.name, layer.out_size)]
    if layer.act != "none":
        found.append((layer.pre, layer.out_size))
    if layer.pool is not None and layer.weighted:
        found.append((layer.conv_input, layer.pool.c * layer.pool.out_h * layer.pool.out_w))
    return found


def _needs_grad(layers: list[TrainLayer]) -> set[str]:
    """Tensors downstream of a trainable parameter (their gradients reach one)."""
    needs: set[str] = set()
    for layer in layers:
        upstream = any(name in needs for name in layer.inputs)
        if layer.scope is not None or upstream:
            needs.update({layer.name, layer.pre})
        if upstream and layer.pool is not None and layer.weighted:
            needs.add(layer.conv_input)
    return needs


def forward_steps(graph: TrainGraph) -> list[dict]:
    steps = [{"op": "dequantize", "tensor": name} for name, _ in graph.boundary]
    for layer in graph.layers:
        if layer.pool is not None and layer.weighted:
            steps.append({"op": "pool", "layer": layer.name, "output": layer.conv_input})
        steps.append({"op": layer.op, "layer": layer.name, "inputs": list(layer.inputs),
                      "output": layer.pre})
        if layer.act != "none":
            steps.append({"op": layer.act, "layer": layer.name, "output": layer.name})
    return steps


def backward_steps(graph: TrainGraph) -> list[dict]:
    """Reverse order; every `*_grad` step accumulates into a once-zeroed buffer."""
    steps = [{"op": "loss_grad", "output": f"d:{graph.output}"}]
    needs = graph.needs_grad
    for layer in reversed(graph.layers):
        if layer.name not in needs:
            continue
        if layer.act != "none":
            steps.append({"op": f"{layer.act}_grad", "layer": layer.name,
                          "output": f"d:{layer.pre}"})
        dy = f"d:{layer.pre}"
        if layer.scope == "all":
            steps.append({"op": "weight_grad", "layer": layer.name, "reads": [dy, layer.conv_input],
                          "output": f"d:{layer.name}.weight", "tiles": [list(t) for t in layer.tiles]})
        if layer.scope is not None and layer.bias:
            steps.append({"op": "bias_grad", "layer": layer.name, "reads": [dy],
                          "output": f"d:{layer.name}.bias"})
        if layer.weighted:
            target = layer.conv_input
            if target in needs:
                steps.append({"op": "input_grad", "layer": layer.name, "output": f"d:{target}"})
            if layer.pool is not None and layer.inputs[0] in needs:
                steps.append({"op": "pool_grad", "layer": layer.name,
                              "output": f"d:{layer.inputs[0]}"})
            continue
        for index, name in enumerate(layer.inputs):  # a tensor may be an input twice
            if name in needs:
                steps.append({"op": f"{layer.op}_grad", "layer": layer.name, "input": index,
                              "output": f"d:{name}"})
    return steps
