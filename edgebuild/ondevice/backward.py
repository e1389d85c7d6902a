"""The backward graph of the trainable part: which layers run in float32, which tensors
carry gradients, and the ordered forward and backward steps the generated C executes.

The model is cut at the first trainable layer (in execution order): every layer before
it is the *frozen prefix* and runs the int8 inference kernels; the tensors it hands over
(its *boundary*, possibly several with skip connections) are converted to float32 as
q/128. Every layer from the cut on runs float32 with the dequantized weights
w = w_int x 2^shift and b = b_acc x 2^shift / 128 (shift = scale_exp - (bits - 1)): the same
real values the integer model approximates. Every layer whose deployed output is int8
(all but `wide` ones and pools, whose outputs stay in their inputs' range) clamps to that
range, [-1, 127/128], after its activation (`<act>_clamp`): the deployed layer saturates
there and float training clamped there (numerics.torch_clamp_float), so without it the
float part would be another function -- a layer saturating 28 % of its outputs in int8
fed values of 5 or 10 onward, and the logits grew until the loss was 0 or 100. It does
not requantize, so training gradients are the exact gradients of that float function.

Gradient rules (the bugs the references describe are ruled out by construction):
- a tensor read by several layers gets the *sum* of their input gradients: every
  backward kernel accumulates (`+=`), and every gradient buffer is zeroed exactly once,
  at the start of the step (`zeroed`), never inside a layer or a tile -- but a
  pre-activation's, which its activation writes (its one contribution);
- a pass that does not fit L1 runs in tiles (ondevice.tiling, `passes`): a weight
  gradient adds each tile's partial sum into the same once-zeroed buffer, an input
  gradient each tile's into its input window.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, cast

from edgebuild.core.geometry import Plane, Shape
from edgebuild.model import graph as graphs
from edgebuild.ondevice.operators import OPERATORS, TrainKernel, TrainOp
from edgebuild.ondevice.schedule import Schedule, TrainStep
from edgebuild.ondevice.tiling import (
    Geometry,
    Pass,
    TilingError,
    conv_operands,
    plan,
    pool_operands,
)
from edgebuild.ops.operator import ComputeLayer, Unsupported

if TYPE_CHECKING:
    from edgebuild.manifest import Layer

FLOAT = 4  # bytes per float32
KEEPS_PRE = frozenset({"abs", "abs_clamp"})  # activations whose gradient needs their input


class TrainGraphError(ValueError):
    """The manifest asks for something the trainable part cannot do; the message says why."""


class TrainTilingError(TrainGraphError, TilingError):
    """A pass of the trainable part does not fit L1 even in its smallest tile."""


def train_facet(layer: Layer) -> TrainOp:
    """How the op trains (ondevice.operators), or a TrainGraphError with the reason."""
    facet = OPERATORS.for_op(layer.op)
    if isinstance(facet, Unsupported):
        raise TrainGraphError(f"layer '{layer.name}' ({layer.op}) cannot train on the device: "
                              f"{facet.reason}")
    return facet


def weighted(layer: Layer) -> bool:
    """A layer whose weights the training kernels can train (a convolution kernel)."""
    facet = OPERATORS.get(layer.op)
    return facet is not None and facet.weighted


@dataclass(frozen=True)
class TrainLayer:
    """One float-part layer. Tensor names: `input`, a layer name, `<layer>.pre` (before an
    activation that needs it, see `pre`) or `<layer>.pooled` (fused input pooling)."""

    name: str
    op: str
    inputs: tuple[str, ...]
    sizes: tuple[int, ...]  # per-sample elements of each input
    out_size: int
    act: str = "none"
    scope: str | None = None  # "all" / "bias" when trainable
    kernel: TrainKernel = TrainKernel.add
    conv: Plane | None = None  # the convolution kernels' geometry (a linear layer: 1 x 1)
    pool: Plane | None = None  # standalone pool, or the fused pool of a conv's input
    pool_mode: str | None = None
    fully_connected: bool = False  # the PyTorch reference computes it with F.linear
    weight_shape: tuple[int, ...] = ()
    bias: bool = False

    @property
    def weighted(self) -> bool:
        return self.kernel is TrainKernel.conv

    @property
    def pre(self) -> str:
        """The tensor the activation reads: `<layer>.pre` when its gradient needs the value
        before it (abs: the sign); otherwise the layer's output, the activation running in
        place (relu and the clamps give the same gradient mask from their output: 0 < y and
        y strictly inside the clamp's range exactly where the input is), which spares a
        tensor and its gradient the size of the output."""
        return f"{self.name}.pre" if self.act in KEEPS_PRE else self.name

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
    passes: tuple[Pass, ...] = ()  # how each convolution and pooling pass fits L1

    def tiling(self, layer: str, phase: str) -> Pass:
        """The plan of one pass (ondevice.tiling)."""
        return next(p for p in self.passes if (p.layer, p.phase) == (layer, phase))

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

    @property
    def zeroed(self) -> frozenset[str]:
        """Tensors whose gradient is zeroed once per step: every one a gradient reaches but
        the pre-activations, whose one contribution (the activation's) is written."""
        return self.needs_grad - {layer.pre for layer in self.layers if layer.act in KEEPS_PRE}

    def schedule(self) -> Schedule:
        """What one training step runs (backward.json)."""
        return Schedule(self.frozen, self.frozen_steps, self.boundary, self.output,
                        {layer.name: layer.scope for layer in self.trainable
                         if layer.scope is not None},
                        tuple(self.parameters()), tuple(forward_steps(self)),
                        tuple(backward_steps(self)),
                        tuple(sorted(f"d:{t}" for t in self.zeroed))
                        + tuple(f"d:{n}" for n, _ in self.parameters()))


def weighted_layers(layers: Iterable[Layer]) -> list[str]:
    return [layer.name for layer in layers if weighted(layer)]


def build(layers: tuple[Layer, ...], input_shape: Shape, scopes: dict[str, str],
          batch: int, l1: int) -> TrainGraph:
    """The train graph for deployed (folded) `layers` with `scopes` {name: all|bias}."""
    graph, _ = graphs.build(tuple(input_shape), layers)
    assert graph is not None  # the deployed layers of a valid manifest build
    nodes = {node.name: node for node in graph.nodes}
    order = [layer.name for layer in layers]
    unknown = [name for name in scopes if name not in nodes]
    if unknown:
        raise TrainGraphError(f"no layer named {', '.join(unknown)}")
    first = min(order.index(name) for name in scopes)
    alias: dict[str, str] = {}
    frozen = order[:first]
    for layer in layers[:first]:
        if _is_view(layer):
            assert layer.inputs is not None  # deployed layers name their inputs (folding)
            alias[layer.name] = alias.get(layer.inputs[0], layer.inputs[0])
    produced = {alias.get(name, name) for name in frozen} | {graphs.INPUT}
    boundary: dict[str, int] = {}
    train_layers: list[TrainLayer] = []
    tensors: dict[str, int] = {}
    for layer in layers[first:]:
        facet = train_facet(layer)
        node = nodes[layer.name]
        inputs = tuple(alias.get(name, name) for name in node.inputs)
        for name, shape in zip(inputs, node.in_shapes, strict=True):
            if name in produced:
                boundary.setdefault(name, math.prod(shape))
                tensors[name] = math.prod(shape)
        if facet.kernel is TrainKernel.view:
            alias[layer.name] = inputs[0]
            continue
        train_layers.append(_train_layer(layer, facet, node, inputs, scopes.get(layer.name)))
        for name, size in _outputs(train_layers[-1]):
            tensors[name] = size
    if not train_layers:
        raise TrainGraphError("nothing to train after the cut")
    output = alias.get(order[-1], order[-1])
    needs = frozenset(_needs_grad(train_layers))
    return TrainGraph(tuple(frozen), first, tuple(boundary.items()), tuple(train_layers),
                      output, tensors[output], needs, tensors,
                      tile_passes(train_layers, needs, batch, l1))


def _is_view(layer: Layer) -> bool:
    facet = OPERATORS.get(layer.op)
    return facet is not None and facet.kernel is TrainKernel.view


class _Kernel(TypedDict):
    """TrainLayer's kernel and geometry fields (from the op's training facet)."""

    kernel: TrainKernel
    conv: Plane | None
    pool: Plane | None
    pool_mode: str | None
    fully_connected: bool


def _train_layer(layer: Layer, facet: TrainOp, node: graphs.Node, inputs: tuple[str, ...],
                 scope: str | None) -> TrainLayer:
    out_size = math.prod(node.out_shape)
    sizes = tuple(math.prod(s) for s in node.in_shapes)
    geometry = facet.geometry(layer, node.in_shapes, node.out_shape)
    common: _Kernel = dict(kernel=facet.kernel, conv=geometry.conv, pool=geometry.pool,
                           pool_mode=geometry.pool_mode, fully_connected=geometry.fully_connected)
    if facet.kernel is TrainKernel.conv:
        conv = geometry.conv
        assert conv is not None
        weight_shape = (conv.out_c, conv.in_c // conv.groups, conv.k_h, conv.k_w)
        # the conv kernel trains compute layers (convolutions, linear): ComputeLayer's fields
        weights = cast(ComputeLayer, layer)
        if scope == "bias" and not weights.bias:
            raise TrainGraphError(f"layer '{layer.name}' has no bias (bias: false), so "
                                  "`scope: bias` leaves nothing to train; use all")
        return TrainLayer(layer.name, layer.op, inputs, sizes, out_size,
                          clamped(weights.act.value, not weights.wide), scope,
                          weight_shape=weight_shape, bias=weights.bias, **common)
    if scope is not None:
        raise TrainGraphError(f"layer '{layer.name}' ({layer.op}) has no weights to train; "
                              f"layers with weights: "
                              f"{', '.join(n for n, op in OPERATORS.items() if op.weighted)}")
    act = getattr(getattr(layer, "act", None), "value", "none")
    # an add saturates its int8 sum (ops.add); pools and views keep their inputs' range
    clamp = facet.kernel is TrainKernel.add and not getattr(layer, "wide", False)
    return TrainLayer(layer.name, layer.op, inputs, sizes, out_size, clamped(act, clamp),
                      **common)


CLAMP = "clamp"


def clamped(act: str, clamp: bool) -> str:
    """The float part's activation of a layer: its own (`relu`, `abs`, `none`), followed
    by the clamp to the int8 range when its deployed output saturates: `relu_clamp`,
    `abs_clamp`, `clamp`."""
    if not clamp:
        return act
    return CLAMP if act == "none" else f"{act}_{CLAMP}"


def unclamped(act: str) -> tuple[str, bool]:
    """(the layer's own activation, whether it clamps) of a float-part activation."""
    if act == CLAMP:
        return "none", True
    base = act.removesuffix(f"_{CLAMP}")
    return base, base != act


def _outputs(layer: TrainLayer) -> list[tuple[str, int]]:
    """Float tensors a layer writes: output, pre-activation, pooled input."""
    found = [(layer.name, layer.out_size)]
    if layer.pre != layer.name:
        found.append((layer.pre, layer.out_size))
    if layer.pool is not None and layer.weighted:
        found.append((layer.conv_input, layer.pool.in_c * layer.pool.out_h * layer.pool.out_w))
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


def forward_steps(graph: TrainGraph) -> list[TrainStep]:
    steps = [TrainStep("dequantize", tensor=name) for name, _ in graph.boundary]
    for layer in graph.layers:
        if layer.pool is not None and layer.weighted:
            steps.append(TrainStep("pool", layer.conv_input, layer.name))
        steps.append(TrainStep(layer.op, layer.pre, layer.name, inputs=layer.inputs))
        if layer.act != "none":
            steps.append(TrainStep(layer.act, layer.name, layer.name))
    return steps


def backward_steps(graph: TrainGraph) -> list[TrainStep]:
    """Reverse order; every `*_grad` step accumulates into a once-zeroed buffer."""
    steps = [TrainStep("loss_grad", f"d:{graph.output}")]
    for layer in reversed(graph.layers):
        if layer.name in graph.needs_grad:
            steps += _layer_backward(layer, graph.needs_grad)
    return steps


def _layer_backward(layer: TrainLayer, needs: frozenset[str]) -> list[TrainStep]:
    """The activation's gradient, then the parameters', then the inputs'."""
    steps: list[TrainStep] = []
    if layer.act != "none":
        steps.append(TrainStep(f"{layer.act}_grad", f"d:{layer.pre}", layer.name))
    dy = f"d:{layer.pre}"
    if layer.scope == "all":
        steps.append(TrainStep("weight_grad", f"d:{layer.name}.weight", layer.name,
                               reads=(dy, layer.conv_input)))
    if layer.scope is not None and layer.bias:
        steps.append(TrainStep("bias_grad", f"d:{layer.name}.bias", layer.name, reads=(dy,)))
    return steps + (_conv_input_backward(layer, needs) if layer.weighted
                    else _input_backward(layer, needs))


def _conv_input_backward(layer: TrainLayer, needs: frozenset[str]) -> list[TrainStep]:
    """A convolution's input gradient, through its fused input pooling when it has one."""
    steps: list[TrainStep] = []
    if layer.conv_input in needs:
        steps.append(TrainStep("input_grad", f"d:{layer.conv_input}", layer.name))
    if layer.pool is not None and layer.inputs[0] in needs:
        steps.append(TrainStep("pool_grad", f"d:{layer.inputs[0]}", layer.name))
    return steps


def _input_backward(layer: TrainLayer, needs: frozenset[str]) -> list[TrainStep]:
    """One gradient step per input read (a tensor may be an input twice)."""
    return [TrainStep(f"{layer.op}_grad", f"d:{name}", layer.name, input=index)
            for index, name in enumerate(layer.inputs) if name in needs]


def tile_passes(layers: list[TrainLayer], needs: frozenset[str], batch: int,
                l1: int) -> tuple[Pass, ...]:
    """The L1 plan of every convolution and pooling pass a step runs (ondevice.tiling):
    forward passes of every layer, backward passes of the layers a gradient reaches.
    TrainTilingError when one cannot fit."""
    try:
        return tuple(_passes(layers, needs, batch, l1))
    except TilingError as error:
        raise TrainTilingError(str(error)) from None


def _passes(layers: list[TrainLayer], needs: frozenset[str], batch: int,
            l1: int) -> list[Pass]:
    found = []
    for layer in layers:
        backward = layer.name in needs
        if layer.pool is not None:
            pooling = Geometry.pool(layer.pool, batch)
            mode = layer.pool_mode or "max"
            found.append(plan(layer.name, "pool_forward", "pool", pooling,
                              pool_operands("pool_forward", mode), l1))
            if backward and layer.inputs[0] in needs:
                found.append(plan(layer.name, "pool_input", "pool", pooling,
                                  pool_operands("pool_input", mode), l1))
        if layer.conv is None:
            continue
        conv = Geometry.conv(layer.conv, batch)
        found.append(plan(layer.name, "forward", "conv", conv,
                          conv_operands("forward", layer.bias), l1))
        if backward and layer.scope is not None:
            found.append(plan(layer.name, "weight", "conv", conv,
                              conv_operands("weight", layer.bias, layer.scope == "all"), l1))
        if backward and layer.conv_input in needs:
            found.append(plan(layer.name, "input", "conv", conv,
                              conv_operands("input", False), l1))
    return found
