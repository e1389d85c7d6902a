"""From a folded model to its MAX7800x hardware layers (hwlayer.HwLayer), read from the
target's own table of ops (operators.py).

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

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from edgebuild.core.geometry import Shape
from edgebuild.model.graph import INPUT, Graph, Node
from edgebuild.ops import OPS
from edgebuild.ops.c import Activated
from edgebuild.ops.operator import Role
from edgebuild.targets.max7800x.hwlayer import Fields, HwLayer, inputs_of, interleaved, pixels
from edgebuild.targets.max7800x.operators import extension

if TYPE_CHECKING:
    from edgebuild.manifest import Layer


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
    view = extension(layer).view
    readers = [by_name[r] for r in consumers.get(layer.name, [])]
    if view == "flatten":
        return pixels(shapes[inputs_of(layer)[0]]) == 1 or (bool(readers) and all(
            extension(r).flattens_input for r in readers))
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
        if (extension(layer).operation == "add" and cast(Activated, layer).act.value == "none"
                and extension(following).inflight and layer.name not in placed
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
        if extension(layer).operation != "concat" or layer.name in placed or len(readers) != 1:
            continue
        reader = by_name[readers[0]]
        if extension(reader).reads_concat and reader.inputs == (layer.name,):
            merged[layer.name] = reader.name
    return merged


def _layer(layer: Layer, node: Node, front: Layer | None, where: dict[str, str],
           flattened: dict[str, str], shapes: dict[str, Shape], bits: dict[str, int]
           ) -> HwLayer:
    """`front`: the add or concat merged into `layer` (None: it reads its own inputs)."""
    ext = extension(layer)
    source = front if front is not None else layer
    inputs = tuple(where[name] for name in inputs_of(source))
    in_shape = tuple(shapes[inputs_of(source)[0]])
    members = (front.name, layer.name) if front is not None else (layer.name,)
    common: Fields = dict(name=layer.name, op=ext.operation, inputs=inputs,
                          in_channels=in_shape[0], in_shape=in_shape, pooled_shape=in_shape,
                          out_channels=node.out_shape[0], out_shape=tuple(node.out_shape),
                          anchor=layer.name, members=members,
                          has_weights=OPS[layer.op].role is Role.compute, copies=ext.copies)
    if front is not None and extension(front).operation == "add":
        common.update({"eltwise_operands": len(inputs), "eltwise": front.name})
    elif front is not None:
        in_shape = tuple(shapes[front.name])
        common.update({"concat": front.name, "in_channels": in_shape[0], "in_shape": in_shape,
                       "pooled_shape": in_shape})
    # passthrough, or a view the device cannot absorb (limits says why)
    return HwLayer(**common) if ext.build is None else ext.build(layer, node, common,
                                                                  flattened, shapes, bits)



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
