"""The accelerator's view of a folded model: one record per MAX7800x hardware layer.

The device runs a sequence of hardware layers; a manifest layer is not always one of them:

- `flatten` is not a layer: the linear layer that reads it flattens its own input (the
  hardware's `flatten: true`), so the linear gets `flatten=True` and reads the flatten's
  input. A flatten of data that is already flat (all spatial sizes 1) is a no-op alias.
- a `reshape` that keeps the channel count and whose readers read only it is not a layer
  either: the device keeps each channel's values in order, so its readers read the
  reshape's input with the new height and width (the network description's `in_dim`). This
  holds for HWC and CHW data alike: the data format only changes how channels interleave,
  never the order of one channel's values. Any other reshape (channels change, or nothing
  single-input reads it) stays a hardware layer of op "reshape", which limits.py refuses.
- an `add` without activation whose only consumer is the conv2d right after it runs
  "in-flight" inside that conv (the hardware's `eltwise`); the hardware layer is named after
  the conv and lists both names in `members`. An add the placement section names stays a
  layer of its own (see `map_layers`). Only conv2d: the manual allows in-flight
  element-wise operations with 2-D convolutions, and 1-D convolutions "without element-wise
  operations".
- a `concat` whose only consumer is a single-input convolution, pool or passthrough is
  not a layer either: that layer reads the concatenation directly (the network
  description's `in_sequences` with several entries), so the hardware layer is named after
  the consumer, lists both names in `members`, reads the concat's inputs and has the
  concat's channels as `in_channels`. A concat the placement section names stays a layer
  of its own, like an add.
- a layer reads a concatenation of more channels than the device has processors in
  several passes: pass k reads word k of every group of n words, so each part is written
  interleaved like an element-wise operand (`write_gap = n - 1`), and the copies below
  apply to it as well.
- element-wise operands are read interleaved (operand i at word i of every group of n
  words, written with `write_gap = n - 1`). A tensor that is also read as plain data by
  another layer, the model input, or a tensor used twice as an operand cannot be written
  interleaved, so a synthetic passthrough layer (`members == ()`) copies it into its slot,
  as the manual's residual example does with its "re-format data with gap" layer. It is
  named `<eltwise layer>_in<slot>` and placed right before the element-wise layer. On a
  device with `read_gap` (MAX78002), a tensor also read by one-pass single-input layers is
  written interleaved anyway: those layers skip the gap as they read.

- a `buffer` is a region of data memory that persists across inferences, (C, length) words
  on its processors. Its hardware layer is the toolchain's `buffer_shift`: a passthrough
  that moves words 1..length-1 down by one word. It runs right before its producer, which
  writes the new frame into the last word (`buffer_insert`), so the record reads
  (C, length - 1) and lists the producer as its input, which fixes its processors. The
  layers that read the buffer read all `length` words.

Shapes are per sample, channels first: (C,), (C, L) or (C, H, W).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, cast

from edgebuild.core.geometry import IntPair, Shape, pair, window_out, window_sizes
from edgebuild.model.graph import INPUT, Graph, Node
from edgebuild.ops import OPS
from edgebuild.ops.c import Activated
from edgebuild.ops.operator import Accelerator, LayerBase, Role, Unsupported
from edgebuild.ops.pool import pool_window

if TYPE_CHECKING:
    from edgebuild.manifest import Layer
    from edgebuild.ops.add import Add
    from edgebuild.ops.buffer import Buffer
    from edgebuild.ops.concat import Concat
    from edgebuild.ops.conv1d import Conv1d
    from edgebuild.ops.conv2d import Conv2d
    from edgebuild.ops.conv_transpose2d import ConvTranspose2d
    from edgebuild.ops.global_pool import GlobalPool
    from edgebuild.ops.linear import Linear
    from edgebuild.ops.pool import Pool1d, Pool2d


def accelerator(layer: Layer) -> Accelerator:
    """The op's accelerator facet (every op that reaches the device has one: folded and
    dropped ops are gone before)."""
    facet = OPS[layer.op].accelerator
    if isinstance(facet, Unsupported):
        raise ValueError(f"layer {layer.name!r}: {facet.reason}")
    return facet


def runnable(operation: str) -> bool:
    """A hardware operation the device runs as a layer (a view kept as a layer is not)."""
    return any(not isinstance(op.accelerator, Unsupported) and op.accelerator.view is None
               and op.accelerator.operation == operation for op in OPS.values())


def runnable_operations() -> list[str]:
    found = [op.accelerator.operation for op in OPS.values()
             if not isinstance(op.accelerator, Unsupported) and op.accelerator.view is None]
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Pool:
    """A pooling window over the last 1 or 2 axes (fused into a layer or standalone)."""

    mode: str
    size: tuple[int, ...]
    stride: tuple[int, ...]


@dataclass(frozen=True)
class HwLayer:
    """One hardware layer. `name` is its placement key; `anchor` the manifest layer that
    error paths point at (the layer itself, or for a synthetic copy the element-wise layer
    it feeds)."""

    name: str
    members: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    in_channels: int
    in_shape: Shape
    pooled_shape: Shape
    out_channels: int
    out_shape: Shape
    kernel: tuple[int, ...] | None = None
    pad: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    dilation: tuple[int, ...] | None = None
    output_pad: tuple[int, ...] | None = None  # transposed convolutions only
    groups: int = 1
    pool: Pool | None = None
    weight_bits: int | None = None
    has_bias: bool = False
    eltwise_operands: int = 0
    eltwise: str | None = None  # manifest name of the element-wise layer (merged or not)
    concat: str | None = None  # manifest name of a concat this layer reads directly
    flatten: bool = False
    wide: bool = False
    anchor: str = field(default="")
    has_weights: bool = False  # its op's role is compute
    copies: bool = False  # copies each channel within its processors ("operation: none")

    @property
    def synthetic(self) -> bool:
        return not self.members

    @property
    def inflight(self) -> bool:
        """An element-wise operation merged into a convolution."""
        return self.eltwise_operands > 0 and self.op != "add"

    @property
    def concatenates(self) -> bool:
        """Reads its inputs as one concatenated tensor (a concat layer, or one merged)."""
        return self.op == "concat" or self.concat is not None

    @property
    def persistent(self) -> bool:
        """Its output is kept across inferences (a buffer's window)."""
        return self.op == "buffer"

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def kernel_elements(self) -> int:
        """Weights per kernel: 9 for 3x3, L for conv1d, 1 for linear (a 1x1 convolution)."""
        return math.prod(self.kernel) if self.kernel else 1


class _Fields(TypedDict, total=False):
    """HwLayer's fields, as `_layer` and the builders collect them before making one."""

    name: str
    members: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    in_channels: int
    in_shape: Shape
    pooled_shape: Shape
    out_channels: int
    out_shape: Shape
    kernel: tuple[int, ...] | None
    pad: tuple[int, ...] | None
    stride: tuple[int, ...] | None
    dilation: tuple[int, ...] | None
    output_pad: tuple[int, ...] | None
    groups: int
    pool: Pool | None
    weight_bits: int | None
    has_bias: bool
    eltwise_operands: int
    eltwise: str | None
    concat: str | None
    flatten: bool
    wide: bool
    anchor: str
    has_weights: bool
    copies: bool


def inputs_of(layer: LayerBase) -> tuple[str, ...]:
    """What a folded layer reads: folding names every layer's inputs (model.folding)."""
    assert layer.inputs is not None
    return layer.inputs


def pixels(shape: Shape) -> int:
    """Values per channel: H*W, L, or 1 for flat data."""
    return math.prod(shape[1:])


def manifest_index(layers: tuple[LayerBase, ...]) -> dict[str, int]:
    """Index of each manifest layer name in `model.layers` (for error paths)."""
    index: dict[str, int] = {}
    for i, layer in enumerate(layers):
        index.setdefault(layer.name, i)
    return index


def map_layers(layers: tuple[Layer, ...], graph: Graph, bits: dict[str, int],
               placed: Iterable[str] = (), processors: int = 64, read_gap: bool = False
               ) -> tuple[HwLayer, ...]:
    """The hardware layers of the folded `layers` (see the module docstring).

    `placed`: names the manifest's `placement` section places. An add or concat placed by
    name is its own hardware layer (the network description's `operation: none` with
    `eltwise` or `in_sequences`), never merged into the layer that reads it: an imported
    network keeps its layers. `processors`: the device's count, above which a
    concatenation is read in several passes. `read_gap`: the device's layers can read
    interleaved data directly (fewer copies)."""
    nodes = {node.name: node for node in graph.nodes}
    shapes: dict[str, Shape] = {INPUT: tuple(graph.input),
                                **{n.name: n.out_shape for n in graph.nodes}}
    consumers = _consumers(layers)
    by_name = {layer.name: layer for layer in layers}
    where: dict[str, str] = {INPUT: INPUT}  # manifest tensor -> hardware tensor holding it
    flattened: dict[str, str] = {}  # absorbed flatten -> the tensor it flattens
    merged = _merged_adds(layers, consumers, frozenset(placed))
    merged |= _merged_concats(layers, consumers, frozenset(placed))
    hw: list[HwLayer] = []
    for layer in layers:
        if _free_view(layer, shapes, consumers, by_name):
            source = inputs_of(layer)[0]
            where[layer.name] = where[source]
            flattened[layer.name] = flattened.get(source, source)
            continue
        if layer.name in merged:
            where[layer.name] = merged[layer.name]
            continue
        first = inputs_of(layer)[0]
        front = by_name[first] if first in merged else None
        hw.append(_layer(layer, nodes[layer.name], front, where, flattened, shapes, bits))
        where[layer.name] = layer.name
    return tuple(_with_copies(hw, shapes, {layer.name for layer in layers}, processors,
                              read_gap))


def _consumers(layers: tuple[Layer, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for layer in layers:
        for name in inputs_of(layer):
            out.setdefault(name, []).append(layer.name)
    return out


def _free_view(layer: Layer, shapes: dict[str, Shape], consumers: dict[str, list[str]],
               by_name: dict[str, Layer]) -> bool:
    """A view (its op's `view`) its readers absorb, so it is no hardware layer: a flatten of
    flat data, or one read only by layers that flatten their own input (linear); a reshape
    that keeps the channels, read only by single-input layers (they read it with the new
    height and width, the description's `in_dim`)."""
    view = accelerator(layer).view
    readers = [by_name[r] for r in consumers.get(layer.name, [])]
    if view == "flatten":
        return pixels(shapes[inputs_of(layer)[0]]) == 1 or (bool(readers) and all(
            accelerator(r).flattens_input for r in readers))
    if view == "in_dim":
        return (shapes[inputs_of(layer)[0]][0] == shapes[layer.name][0] and bool(readers)
                and all(len(inputs_of(r)) == 1 for r in readers))
    return False


def _merged_adds(layers: tuple[Layer, ...], consumers: dict[str, list[str]],
                 placed: frozenset[str]) -> dict[str, str]:
    """add name -> the convolution it runs in-flight with (one whose op allows it)."""
    merged = {}
    for layer, following in zip(layers, layers[1:], strict=False):
        # the "add" operation is an add layer's: it has an activation (ops.c.Activated)
        if (accelerator(layer).operation == "add" and cast(Activated, layer).act.value == "none"
                and accelerator(following).inflight and layer.name not in placed
                and following.inputs == (layer.name,)
                and consumers.get(layer.name) == [following.name]):
            merged[layer.name] = following.name
    return merged


def _merged_concats(layers: tuple[Layer, ...], consumers: dict[str, list[str]],
                    placed: frozenset[str]) -> dict[str, str]:
    """concat name -> the one layer that reads it directly (see the module docstring)."""
    by_name = {layer.name: layer for layer in layers}
    merged = {}
    for layer in layers:
        readers = consumers.get(layer.name, [])
        if accelerator(layer).operation != "concat" or layer.name in placed or len(readers) != 1:
            continue
        reader = by_name[readers[0]]
        if accelerator(reader).reads_concat and reader.inputs == (layer.name,):
            merged[layer.name] = reader.name
    return merged


def _layer(layer: Layer, node: Node, front: Layer | None, where: dict[str, str],
           flattened: dict[str, str], shapes: dict[str, Shape], bits: dict[str, int]
           ) -> HwLayer:
    """`front`: the add or concat merged into `layer` (None: it reads its own inputs)."""
    facet = accelerator(layer)
    source = front if front is not None else layer
    inputs = tuple(where[name] for name in inputs_of(source))
    in_shape = tuple(shapes[inputs_of(source)[0]])
    members = (front.name, layer.name) if front is not None else (layer.name,)
    common: _Fields = dict(name=layer.name, op=facet.operation, inputs=inputs,
                           in_channels=in_shape[0], in_shape=in_shape, pooled_shape=in_shape,
                           out_channels=node.out_shape[0], out_shape=tuple(node.out_shape),
                           anchor=layer.name, members=members,
                           has_weights=OPS[layer.op].role is Role.compute, copies=facet.copies)
    if front is not None and accelerator(front).operation == "add":
        common.update({"eltwise_operands": len(inputs), "eltwise": front.name})
    elif front is not None:
        in_shape = tuple(shapes[front.name])
        common.update({"concat": front.name, "in_channels": in_shape[0], "in_shape": in_shape,
                       "pooled_shape": in_shape})
    build = _BUILDERS.get(facet.operation)
    # passthrough, or a view the device cannot absorb (limits says why)
    return HwLayer(**common) if build is None else build(layer, node, common, flattened,
                                                          shapes, bits)


def _conv_layer(layer: Conv1d | Conv2d, node: Node, common: _Fields,
                flattened: dict[str, str], shapes: dict[str, Shape],
                bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | _conv(layer, common["in_shape"], bits))


def _transposed_layer(layer: ConvTranspose2d, node: Node, common: _Fields,
                      flattened: dict[str, str], shapes: dict[str, Shape],
                      bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | _conv(layer, common["in_shape"], bits)
                   | {"output_pad": pair(layer.output_pad)})


def _pool_layer(layer: Pool1d | Pool2d | GlobalPool, node: Node, common: _Fields,
                flattened: dict[str, str], shapes: dict[str, Shape],
                bits: dict[str, int]) -> HwLayer:
    """A pool layer's window, or a global pool's: its whole input map (limits holds it to
    the device's pool sizes)."""
    window = pool_window(layer, common["in_shape"])
    pool = _pool(layer.mode, window.size, window.stride, len(common["in_shape"]) - 1)
    return HwLayer(**common | {"pool": pool, "pooled_shape": tuple(node.out_shape)})


def _add_layer(layer: Add, node: Node, common: _Fields, flattened: dict[str, str],
               shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | {"eltwise_operands": len(common["inputs"]), "eltwise": layer.name})


def _buffer_layer(layer: Buffer, node: Node, common: _Fields, flattened: dict[str, str],
                  shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    shifted = (node.out_shape[0], node.out_shape[1] - 1)
    return HwLayer(**common | {"in_shape": shifted, "pooled_shape": shifted})


def _concat_layer(layer: Concat, node: Node, common: _Fields, flattened: dict[str, str],
                  shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | {"in_channels": node.out_shape[0],
                               "in_shape": tuple(node.out_shape),
                               "pooled_shape": tuple(node.out_shape)})


def _linear_layer(layer: Linear, node: Node, common: _Fields, flattened: dict[str, str],
                  shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return _linear(layer, common, flattened, shapes, bits)


# A builder takes the layer record of its own op (`_conv_layer` a Conv1d or Conv2d, ...),
# hence `Any` for the layer here, as in the operator records' facets (ops.operator).
_Builder = Callable[[Any, Node, _Fields, dict[str, str], dict[str, Shape], dict[str, int]],
                    HwLayer]

# How each hardware operation's layer record is made (targets' own vocabulary: the
# operation comes from the op's accelerator facet).
_BUILDERS: dict[str, _Builder] = {
    "conv2d": _conv_layer, "conv1d": _conv_layer, "conv_transpose2d": _transposed_layer,
    "linear": _linear_layer, "pool": _pool_layer, "add": _add_layer,
    "buffer": _buffer_layer, "concat": _concat_layer}


def _conv(layer: Conv1d | Conv2d | ConvTranspose2d, in_shape: Shape, bits: dict[str, int]
          ) -> _Fields:
    dims = len(in_shape) - 1
    pool = None if layer.pool is None else _pool(layer.pool.mode, layer.pool.size,
                                                  layer.pool.stride, dims)
    pooled = in_shape if pool is None else _pooled(in_shape, pool)
    # one value per axis: a 2-D layer's fields are ints or pairs, a 1-D layer's ints (Conv1d)
    shape: Callable[[IntPair], tuple[int, ...]] = pair if dims == 2 else (
        lambda v: (cast(int, v),))
    return dict(kernel=shape(layer.kernel), pad=shape(layer.pad), stride=shape(layer.stride),
                dilation=shape(layer.dilation), groups=layer.groups, pool=pool,
                pooled_shape=pooled, weight_bits=bits.get(layer.name), has_bias=layer.bias,
                wide=layer.wide)


def _linear(layer: Linear, common: _Fields, flattened: dict[str, str],
            shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    """A flattening linear reads the tensor before the flatten: its processors see C
    channels of H x W data."""
    read = flattened.get(inputs_of(layer)[0])
    update: _Fields = dict(weight_bits=bits.get(layer.name), has_bias=layer.bias,
                           wide=layer.wide, flatten=layer.flatten or read is not None)
    if read is not None:
        shape = tuple(shapes[read])
        update.update({"in_shape": shape, "pooled_shape": shape, "in_channels": shape[0],
                       "members": (inputs_of(layer)[0], *common["members"])})
    return HwLayer(**common | update)


def _pool(mode: str, size: IntPair, stride: IntPair | None, dims: int) -> Pool:
    window = _Window(size, stride)
    sizes, strides = window_sizes(window, dims)
    return Pool(getattr(mode, "value", mode), sizes, strides)


@dataclass(frozen=True)
class _Window:
    size: int | tuple[int, int]
    stride: int | tuple[int, int] | None


def _pooled(shape: Shape, pool: Pool) -> Shape:
    return (shape[0], *(window_out(n, k, s) for n, k, s in zip(shape[1:], pool.size,
                                                                 pool.stride, strict=True)))


def interleaved(layer: HwLayer, processors: int) -> bool:
    """Reads its inputs interleaved: element-wise operands, or a concatenation of more
    channels than `processors` (read in several passes)."""
    return bool(layer.eltwise_operands) or (layer.concatenates and len(layer.inputs) > 1
                                             and layer.in_channels > processors)


def _with_copies(hw: list[HwLayer], shapes: dict[str, Shape], taken: set[str], processors: int,
                 read_gap: bool) -> list[HwLayer]:
    """Insert a passthrough before each layer that reads interleaved data for every input
    that cannot be written interleaved by its producer (see the module docstring)."""
    readers: dict[str, list[HwLayer]] = {}
    for layer in hw:
        for name in layer.inputs:
            readers.setdefault(name, []).append(layer)
    out: list[HwLayer] = []
    for layer in hw:
        if interleaved(layer, processors):
            inputs = list(layer.inputs)
            for slot, source in enumerate(layer.inputs):
                if not _interleavable(source, layer, readers, processors, read_gap):
                    copy = _copy(layer, slot, source, shapes, taken)
                    taken.add(copy.name)
                    out.append(copy)
                    inputs[slot] = copy.name
            layer = replace(layer, inputs=tuple(inputs))
        out.append(layer)
    return out


def _interleavable(source: str, layer: HwLayer, readers: dict[str, list[HwLayer]],
                   processors: int,
                   read_gap: bool) -> bool:
    """Whether `source` can be written interleaved for `layer`: the model input cannot, nor
    a tensor `layer` reads twice; a tensor others read too only where they can skip the gap
    (`read_gap`: single-input layers that read in one pass)."""
    if source == INPUT or layer.inputs.count(source) > 1:
        return False
    others = [r for r in readers[source] if r is not layer]
    return not others or read_gap and all(
        r.inputs == (source,) and not r.concatenates and r.in_channels <= processors
        for r in others)


def _copy(layer: HwLayer, slot: int, source: str, shapes: dict[str, Shape],
          taken: set[str]) -> HwLayer:
    name = f"{layer.name}_in{slot}"
    while name in taken:
        name += "_"
    shape = tuple(shapes[source])
    return HwLayer(name=name, members=(), op="passthrough", inputs=(source,),
                   in_channels=shape[0], in_shape=shape, pooled_shape=shape,
                   out_channels=shape[0], out_shape=shape, anchor=layer.eltwise or layer.name,
                   copies=True)
