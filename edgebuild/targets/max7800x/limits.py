"""The operator limits of a MAX7800x-style device, checked on the hardware layers at `check`.

Every figure comes from the device profile (targets/max7800x/profiles/<name>.yaml); this module
holds only the rules that use them, so a new device is a data change. Every violated limit
is reported, each naming the layer, the field, the value and the limit, at a path into the
manifest document (`("model", "layers", 3, "kernel")`, `("placement", "conv1", "streaming")`),
and what to do about it (`Problem.advice`, worded by `advice`): a restructuring the rule
allows and, found by running the same rule on every other device profile, the devices that
allow what this one refuses.
Processor maps and memories are `placement`'s concern; this module needs no placement
except each layer's `streaming` and the first layer's `data_format`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from edgebuild.targets.max7800x import advice
from edgebuild.targets.max7800x import profile as profiles
from edgebuild.targets.max7800x.hwlayer import HwLayer, interleaved, manifest_index, pixels
from edgebuild.targets.max7800x.operators import runnable, runnable_operations

if TYPE_CHECKING:
    from edgebuild.manifest import Manifest
    from edgebuild.manifest.placement import LayerPlacement
    from edgebuild.targets.max7800x.records import Conv2dRules, ConvTranspose2dRules, Profile

# A path into the manifest document: keys and list indices (`("model", "layers", 3)`).
ManifestPath = tuple[str | int, ...]

# Conv1d dilation: kernels of up to this length may dilate (the manual: "1 to 1023 for
# kernel lengths 1, 2, or 3"). The profile has no field for it yet (same on both devices).
CONV1D_SHORT_KERNEL = 3
# taps of the 1-D hardware's longest kernel: a dilated kernel spanning more runs in 2-D
CONV1D_TAPS = 9


@dataclass(frozen=True)
class Problem:
    """One violated rule at `path` (a path into the manifest document): `message` says
    what is wrong, `advice` what to do (not part of the problem's identity: two problems
    are the same rule broken at the same place); `text` is what a user reads."""

    path: ManifestPath
    message: str
    advice: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        return advice.join(self.message, self.advice)

    def advised(self, more: str) -> Problem:
        return replace(self, advice=advice.join(self.advice, more))


@dataclass(frozen=True)
class _Context:
    profile: Profile
    manifest: Manifest
    index: dict[str, int]
    layers: tuple[HwLayer, ...]

    def at(self, layer: HwLayer, *field: str) -> ManifestPath:
        return ("model", "layers", self.index[layer.anchor], *field)

    def eltwise_at(self, layer: HwLayer) -> ManifestPath:
        return ("model", "layers", self.index[layer.eltwise or layer.anchor])

    def op(self, layer: HwLayer) -> str:
        """The manifest op of the layer a hardware layer is anchored at."""
        return self.manifest.model.layers[self.index[layer.anchor]].op

    def on(self, other: Profile) -> _Context:
        return replace(self, profile=other)


Rule = Callable[[HwLayer, _Context], Iterator[Problem]]
ModelRule = Callable[[_Context], Iterator[Problem]]


def check(hw_layers: tuple[HwLayer, ...], manifest: Manifest, profile: Profile
          ) -> list[Problem]:
    """Every device limit `hw_layers` (from mapping.map_layers) violate, in layer order,
    each advised with the other devices that allow it."""
    ctx = _Context(profile, manifest, manifest_index(manifest.model.layers), tuple(hw_layers))
    others = [ctx.on(profiles.profile(name)) for name in profiles.DEVICE_NAMES
              if name != profile.name]
    problems: list[Problem] = []
    for layer in hw_layers:
        found = [p for rule in LAYER_RULES for p in rule(layer, ctx)]
        problems.extend(_elsewhere(found, others, functools.partial(_layer_problems, layer),
                                   whole_layer=True))
    for model_rule in MODEL_RULES:
        problems.extend(_elsewhere(list(model_rule(ctx)), others, model_rule,
                                   whole_layer=False))
    return problems


def _layer_problems(layer: HwLayer, ctx: _Context) -> list[Problem]:
    return [p for rule in LAYER_RULES for p in rule(layer, ctx)]


def _elsewhere(found: list[Problem], others: list[_Context],
               rerun: Callable[[_Context], Iterable[Problem]], whole_layer: bool
               ) -> list[Problem]:
    """`found` advised with the devices whose profiles raise no problem at the same path
    (the same rules on the same hardware layers; per layer, those that raise none at all
    run the layer as it is)."""
    if not found or not others:
        return found
    verdicts = [(other.profile.name, list(rerun(other))) for other in others]
    advised = []
    for problem in found:
        clean = [name for name, theirs in verdicts if all(t.path != problem.path for t in theirs)]
        whole = whole_layer and all(not theirs for name, theirs in verdicts if name in clean)
        advised.append(problem.advised(advice.devices(clean, whole)) if clean else problem)
    return advised


def _listing(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


def _dims(values: tuple[int, ...]) -> str:
    return "x".join(str(v) for v in values)


def _in(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= value <= bounds[1]


def _range(bounds: tuple[int, int]) -> str:
    return f"{bounds[0]}..{bounds[1]}"


# --- per-layer rules ----------------------------------------------------------------------

def _op(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if not runnable(layer.op):
        what = {"flatten": "a flatten that does not feed a linear layer (the hardware flattens "
                           "inside the linear layer)",
                "reshape": _reshape_problem(layer)}.get(layer.op, f"op {layer.op!r}")
        yield Problem(ctx.at(layer, "op"), f"layer {layer.name!r}: {what} cannot run on "
                      f"{ctx.profile.name} (it runs {_listing(runnable_operations())})",
                      advice.op(layer.op))


def _reshape_problem(layer: HwLayer) -> str:
    """Why a reshape is not a view on the device (mapping keeps only those as layers)."""
    if layer.in_channels != layer.out_channels:
        return (f"a reshape from {layer.in_channels} to {layer.out_channels} channels (the "
                "hardware reshapes only height x width = length, per channel: `in_dim`)")
    return ("a reshape that feeds no layer, or feeds a layer with several inputs (the "
            "hardware reshapes the input of the single-input layer that reads it: `in_dim`)")


def _conv_transpose2d(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if layer.op != "conv_transpose2d":
        return
    rules = ctx.profile.conv_transpose2d
    assert layer.output_pad is not None  # a transposed convolution's (operators)
    output_pad = _members(layer, ctx, "output_pad", layer.output_pad, rules.output_pad,
                          how=advice.output_pad(rules.output_pad))
    yield from _conv2d_rules(layer, ctx, rules, " for a transposed convolution", output_pad)


def _conv2d(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if layer.op == "conv2d":
        yield from _conv2d_rules(layer, ctx, ctx.profile.conv2d, "", iter(()))


def _conv2d_rules(layer: HwLayer, ctx: _Context, rules: Conv2dRules | ConvTranspose2dRules,
                  what: str, extra: Iterator[Problem]) -> Iterator[Problem]:
    """Kernel, pad, stride, dilation and groups: the rules 2-D and transposed convolutions
    share (each with its own allowed values); `extra` problems come after the stride's."""
    # a convolution's hardware layer has its whole geometry (operators._conv)
    assert layer.kernel is not None and layer.pad is not None
    assert layer.stride is not None and layer.dilation is not None
    name = ctx.profile.name
    transposed = bool(what)
    if layer.kernel not in rules.kernels:
        yield Problem(ctx.at(layer, "kernel"), f"layer {layer.name!r}: kernel "
                      f"{_dims(layer.kernel)} is not supported{what} on {name} (allowed: "
                      f"{_listing(_dims(k) for k in rules.kernels)})",
                      advice.kernel_2d(layer.kernel, rules.kernels, transposed))
    yield from _members(layer, ctx, "pad", layer.pad, rules.pad, how=advice.pad(rules.pad, 0))
    yield from _members(layer, ctx, "stride", layer.stride, rules.stride,
                        how=advice.stride(rules.stride, transposed))
    yield from extra
    if not all(_in(d, rules.dilation) for d in layer.dilation):
        yield Problem(ctx.at(layer, "dilation"), f"layer {layer.name!r}: dilation "
                      f"{_dims(layer.dilation)} is not supported on {name} (allowed: "
                      f"{_range(rules.dilation)})", advice.dilation(rules.dilation))
    yield from _groups(layer, ctx, rules.depthwise)


def _conv1d(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if layer.op != "conv1d":
        return
    rules, name = ctx.profile.conv1d, ctx.profile.name
    # a convolution's hardware layer has its whole geometry (operators._conv)
    assert layer.kernel is not None and layer.pad is not None
    assert layer.stride is not None and layer.dilation is not None
    (kernel,), (dilation,) = layer.kernel, layer.dilation
    if not _in(kernel, rules.kernel):
        yield Problem(ctx.at(layer, "kernel"), f"layer {layer.name!r}: kernel {kernel} is not "
                      f"supported on {name} (allowed: {_range(rules.kernel)})",
                      advice.kernel_1d(rules.kernel[1], CONV1D_SHORT_KERNEL,
                                       rules.dilation_short_kernel))
    wide = layer.in_channels > ctx.profile.processors
    pads = rules.pad_wide_input if wide else rules.pad
    why = f" with {layer.in_channels} input channels" if wide else ""
    yield from _members(layer, ctx, "pad", layer.pad, pads, why,
                        advice.pad(pads, ctx.profile.processors if wide else 0))
    yield from _members(layer, ctx, "stride", layer.stride, rules.stride,
                        how=advice.stride(rules.stride, False))
    short = kernel <= CONV1D_SHORT_KERNEL
    bounds = rules.dilation_short_kernel if short else rules.dilation_long_kernel
    if not _in(dilation, bounds):
        yield Problem(ctx.at(layer, "dilation"), f"layer {layer.name!r}: dilation {dilation} "
                      f"is not supported on {name} with kernel {kernel} (allowed: "
                      f"{_range(bounds)})",
                      advice.dilation_1d(kernel, CONV1D_SHORT_KERNEL, bounds))
    elif (kernel - 1) * dilation >= CONV1D_TAPS:
        yield from _columns_conv1d(layer, ctx)
    yield from _groups(layer, ctx, rules.depthwise)


def _columns_conv1d(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    """A dilated conv1d spanning more taps than the 1-D hardware has runs as a padded 3x3
    convolution over `dilation` columns: its own padding, pooling or an element-wise
    operation before it have no place there (the vendor's tool refuses them alike)."""
    assert layer.pad is not None and layer.dilation is not None
    span = f"dilation {layer.dilation[0]} (a span of more than {CONV1D_TAPS} taps runs on " \
        "the 2-D hardware)"
    shorter = f"or a dilation that spans at most {CONV1D_TAPS} taps"
    if any(layer.pad):
        yield Problem(ctx.at(layer, "pad"), f"layer {layer.name!r}: pad {_dims(layer.pad)} "
                      f"is not supported with {span}; allowed: 0", f"set pad: 0, {shorter}")
    if layer.pool is not None:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: pooling is not "
                      f"supported with {span}; pool in a layer of its own", shorter)
    if layer.eltwise_operands:
        yield Problem(ctx.eltwise_at(layer), f"layer {layer.name!r}: an element-wise "
                      f"operation in-flight is not supported with {span}",
                      f"put a passthrough layer between {layer.eltwise!r} and "
                      f"{layer.name!r} to run it as a layer of its own, {shorter}")


def _members(layer: HwLayer, ctx: _Context, field: str, values: tuple[int, ...],
             allowed: tuple[int, ...], why: str = "", how: str = "") -> Iterator[Problem]:
    if not all(v in allowed for v in values):
        yield Problem(ctx.at(layer, field), f"layer {layer.name!r}: {field} {_dims(values)} "
                      f"is not supported on {ctx.profile.name}{why} (allowed: "
                      f"{_listing(allowed)})", how)


def _groups(layer: HwLayer, ctx: _Context, depthwise: bool) -> Iterator[Problem]:
    if layer.groups == 1 or depthwise and layer.depthwise:
        return
    allowed = "1, or groups = input = output channels (depthwise)" if depthwise else "1"
    yield Problem(ctx.at(layer, "groups"), f"layer {layer.name!r}: groups {layer.groups} "
                  f"with {layer.in_channels} input and {layer.out_channels} output channels "
                  f"is not supported on {ctx.profile.name} (allowed: {allowed})",
                  advice.groups(depthwise))


def _pool(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if layer.pool is None:
        return
    rules, name, pool = ctx.profile.pool, ctx.profile.name, layer.pool
    if ctx.op(layer) == "global_pool":  # its window is the map; a stride it chooses
        yield from _global_pool(layer, ctx)
        return
    fields = ("size",) if layer.op == "pool" else ("pool", "size")
    if not all(_in(s, rules.size) for s in pool.size):
        yield Problem(ctx.at(layer, *fields), f"layer {layer.name!r}: pool size "
                      f"{_dims(pool.size)} is not supported on {name} (allowed: "
                      f"{_range(rules.size)} per dimension)",
                      advice.pool_size(pool.size, rules.size[1], pool.stride == pool.size,
                                       rules.square_stride))
    at = ctx.at(layer, *fields[:-1], "stride")
    if not all(_in(s, rules.stride) for s in pool.stride):
        yield Problem(at, f"layer {layer.name!r}: pool stride {_dims(pool.stride)} is not "
                      f"supported on {name} (allowed: {_range(rules.stride)})",
                      advice.pool_stride(rules.stride[1]))
    if rules.square_stride and len(set(pool.stride)) > 1:
        yield Problem(at, f"layer {layer.name!r}: pool stride {_dims(pool.stride)} differs "
                      f"between dimensions; {name} uses one stride for both",
                      advice.square_stride())


def _global_pool(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    """A global pool runs as one window over its input map: within the pool sizes."""
    rules, pool = ctx.profile.pool, layer.pool
    assert pool is not None  # a pool layer's (operators.pool_layer)
    if not all(_in(s, rules.size) for s in pool.size):
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: a global pool over a map of "
                      f"{_dims(pool.size)} is not supported on {ctx.profile.name} (its "
                      f"pooling window takes {_range(rules.size)} per dimension)",
                      advice.shrink_map(pool.size, rules.size[1]))


def _unfused_pool(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    """Pooling many channels needs a convolution in the same layer, unless it pools to 1x1."""
    limit = ctx.profile.limits.pool_unfused_channels
    if layer.op == "pool" and layer.in_channels > limit and pixels(layer.pooled_shape) > 1:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: pooling {layer.in_channels} "
                      f"channels without a convolution is not supported on {ctx.profile.name} "
                      f"(at most {limit} channels, unless the result is 1x1); fuse the "
                      "pooling into the next convolution (its `pool:` field)")


def _channels(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    limits, name = ctx.profile.limits, ctx.profile.name
    if layer.in_channels > limits.in_channels:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: {layer.in_channels} input "
                      f"channels exceed {name}'s limit of {limits.in_channels}",
                      advice.channels_in(limits.in_channels))
    if layer.out_channels > limits.out_channels:
        yield Problem(ctx.at(layer, "out"), f"layer {layer.name!r}: {layer.out_channels} "
                      f"output channels exceed {name}'s limit of {limits.out_channels}",
                      advice.channels_out(limits.out_channels))
    if layer.has_bias and layer.out_channels > limits.bias_channels:
        yield Problem(ctx.at(layer, "bias"), f"layer {layer.name!r}: bias on "
                      f"{layer.out_channels} output channels exceeds {name}'s limit of "
                      f"{limits.bias_channels}; set `bias: false`",
                      f"or {advice.channels_out(limits.bias_channels)}")


def _dimensions(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    limit = ctx.profile.limits.dimension
    for what, shape in (("input", layer.in_shape), ("output", layer.out_shape)):
        if any(d > limit for d in shape[1:]):
            yield Problem(ctx.at(layer), f"layer {layer.name!r}: {what} of "
                          f"{_dims(shape[1:])} exceeds {ctx.profile.name}'s limit of {limit} "
                          "rows or columns", advice.dimension(limit))


def _linear(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if layer.op != "linear":
        return
    limits, name = ctx.profile.limits, ctx.profile.name
    elements = math.prod(layer.in_shape)
    if layer.flatten and elements > limits.flatten_elements:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: flattening "
                      f"{_dims(layer.in_shape)} = {elements} values exceeds {name}'s limit of "
                      f"{limits.flatten_elements}", advice.flatten_elements(
                          limits.flatten_elements))
    if layer.in_channels > limits.linear_in:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: {layer.in_channels} input "
                      f"features exceed {name}'s linear limit of {limits.linear_in}",
                      advice.linear_in(limits.linear_in))
    if layer.out_channels > limits.linear_out:
        yield Problem(ctx.at(layer, "out"), f"layer {layer.name!r}: {layer.out_channels} "
                      f"outputs exceed {name}'s linear limit of {limits.linear_out}",
                      f"use at most {limits.linear_out} outputs")


def _eltwise(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    if not layer.eltwise_operands:
        return
    limits, name, n = ctx.profile.limits, ctx.profile.name, layer.eltwise_operands
    if not _in(n, limits.eltwise_operands):
        yield Problem(ctx.eltwise_at(layer), f"layer {layer.eltwise!r}: an element-wise "
                      f"operation of {n} operands is not supported on {name} (allowed: "
                      f"{_range(limits.eltwise_operands)})",
                      advice.operands(limits.eltwise_operands))
    if not layer.inflight:
        return
    limit = (limits.eltwise_inflight_channels_two_operands if n == 2
             else limits.eltwise_inflight_channels)
    if layer.in_channels > limit:
        yield Problem(ctx.eltwise_at(layer), f"layer {layer.eltwise!r}: the element-wise "
                      f"operation runs in-flight in {layer.name!r} over {layer.in_channels} "
                      f"channels, but {name} allows at most {limit} with {n} operands "
                      f"({limits.eltwise_inflight_channels} channels, "
                      f"{limits.eltwise_inflight_channels_two_operands} with two operands); "
                      f"put a passthrough layer between {layer.eltwise!r} and "
                      f"{layer.name!r} to run it as a layer of its own")


def _concat(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    """Output data is packed 4 channels per word, so only the last part may end mid-word.
    (A concatenation read in several passes has its own rule, one input per pass: see
    placement.)"""
    if not layer.concatenates or interleaved(layer, ctx.profile.processors):
        return
    group = ctx.profile.processors_per_memory
    channels = {other.name: other.out_channels for other in ctx.layers}
    channels["input"] = ctx.manifest.model.input[0]
    for source in layer.inputs[:-1]:
        if channels.get(source, 0) % group:
            at = ("model", "layers", ctx.index[layer.concat or layer.anchor], "inputs")
            yield Problem(at, f"layer {layer.concat or layer.name!r}: concatenated "
                          f"input {source!r} has {channels[source]} channels; on "
                          f"{ctx.profile.name} every part but the last needs a multiple of "
                          f"{group} channels", advice.concat_part(source, group))


def _weight_bits(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    allowed = ctx.profile.numbers.weight_bits
    if layer.weight_bits is None or layer.weight_bits in allowed:
        return
    override = ctx.manifest.qat.overrides.get(layer.name)
    path = (("qat", "overrides", layer.name, "weight_bits")
            if override is not None and override.weight_bits is not None
            else ("qat", "weight_bits"))
    yield Problem(path, f"layer {layer.name!r}: {layer.weight_bits}-bit weights are not "
                  f"supported on {ctx.profile.name} (allowed: {_listing(allowed)})",
                  f"set {'.'.join(map(str, path))} to {max(allowed)}, or another of them")


def _buffer(layer: HwLayer, ctx: _Context) -> Iterator[Problem]:
    """A buffer's window is moved by one passthrough, one word per frame: one pass."""
    if layer.persistent and layer.in_channels > ctx.profile.processors:
        yield Problem(ctx.at(layer), f"layer {layer.name!r}: a buffer of {layer.in_channels} "
                      f"channels needs several passes, but {ctx.profile.name} shifts a buffer in "
                      f"one pass: at most {ctx.profile.processors} channels",
                      advice.buffer(ctx.profile.processors))


LAYER_RULES: tuple[Rule, ...] = (_op, _conv2d, _conv1d, _conv_transpose2d, _pool, _unfused_pool, _channels,
                                 _dimensions, _linear, _eltwise, _concat, _weight_bits, _buffer)


# --- whole-model rules --------------------------------------------------------------------

def _layer_count(ctx: _Context) -> Iterator[Problem]:
    limit, count = ctx.profile.limits.layers, len(ctx.layers)
    if count <= limit:
        return
    copies = sum(layer.synthetic for layer in ctx.layers)
    extra = (f" (including {copies} copy layer{'s' * (copies > 1)} that interleave "
             "element-wise operands)") if copies else ""
    yield Problem(("model", "layers"), f"the model needs {count} hardware layers{extra}, "
                  f"{ctx.profile.name} runs at most {limit}", advice.layer_count())


def _entry(ctx: _Context, name: str) -> LayerPlacement | None:
    return ctx.manifest.placement.get(name)


def _streams(ctx: _Context, layer: HwLayer) -> bool:
    entry = _entry(ctx, layer.name)
    return entry is not None and entry.streaming


def _chw(ctx: _Context) -> bool:
    entry = _entry(ctx, ctx.layers[0].name) if ctx.layers else None
    return entry is not None and entry.data_format == "CHW"


def _streaming(ctx: _Context) -> Iterator[Problem]:
    """Streaming layers run first and in a row; their data obeys the elements rule; the
    first one reads FIFOs of limited width."""
    rules, name = ctx.profile.streaming, ctx.profile.name
    flags = [_streams(ctx, layer) for layer in ctx.layers]
    count = sum(flags)
    if not count:
        return
    for i, layer in enumerate(ctx.layers):
        if flags[i] and not all(flags[:i]):
            gap = ctx.layers[flags.index(False)].name
            yield Problem(("placement", layer.name, "streaming"), f"layer {layer.name!r}: "
                          f"streaming layers must run first and in a row, but {gap!r} before "
                          "it does not stream", advice.streaming_order(layer.name))
    if count > rules.layers:
        last = ctx.layers[max(i for i, f in enumerate(flags) if f)].name
        yield Problem(("placement", last, "streaming"), f"{count} layers stream, {name} "
                      f"streams at most {rules.layers}", advice.streaming_count(rules.layers))
    for layer, flag in zip(ctx.layers, flags, strict=True):
        passes = math.ceil(layer.in_channels / ctx.profile.processors)
        elements = pixels(layer.in_shape) * passes
        if flag and elements >= rules.elements:
            yield Problem(("placement", layer.name, "streaming"), f"layer {layer.name!r}: a "
                          f"streaming input of {_dims(layer.in_shape[1:])} x {passes} pass(es) "
                          f"= {elements} elements must stay below {rules.elements} on {name}",
                          advice.streaming_elements())
    yield from _streaming_ops(ctx, [layer for layer, f in zip(ctx.layers, flags, strict=True)
                                    if f])
    if flags[0]:
        first = ctx.layers[0]
        limit = rules.fifo_channels_chw if _chw(ctx) else rules.fifo_channels_hwc
        if first.in_channels > limit:
            yield Problem(("placement", first.name, "streaming"), f"layer {first.name!r}: "
                          f"{first.in_channels} input channels exceed the {limit} channels "
                          f"the {name} FIFOs stream in {'CHW' if _chw(ctx) else 'HWC'}",
                          advice.streaming_fifo(limit, rules.fifo_channels_hwc
                                                if _chw(ctx) else None))


def _streaming_ops(ctx: _Context, streaming: list[HwLayer]) -> Iterator[Problem]:
    """Which operations may stream: convolutions only (MAX78002); the last streaming layer
    pads (MAX78000; the toolchain turns an unpadded 1x1 convolution into a padded 3x3)."""
    rules, name = ctx.profile.streaming, ctx.profile.name
    convolutions = ("conv1d", "conv2d", "conv_transpose2d")
    if rules.convolutions_only:
        for layer in streaming:
            if layer.op not in convolutions:
                yield Problem(("placement", layer.name, "streaming"), f"layer {layer.name!r}: "
                              f"a {layer.op} layer cannot stream on {name} (only "
                              f"{', '.join(convolutions)} do)",
                              advice.streaming_op(", ".join(convolutions)))
    last = streaming[-1]
    unpadded_1x1 = (last.kernel is not None and set(last.kernel) == {1}
                    and last.pad is not None and not any(last.pad))
    if rules.last_padded and not unpadded_1x1 and not (last.pad and any(last.pad)):
        pad = f"pad {max(last.pad)}" if last.pad else f"a {last.op} layer has no padding"
        yield Problem(("placement", last.name, "streaming"), f"layer {last.name!r}: the last "
                      f"streaming layer must use padding on {name} ({pad})",
                      advice.streaming_pad())


def _data_size(ctx: _Context) -> Iterator[Problem]:
    """Without streaming every channel of every tensor must fit one data memory instance."""
    rules = ctx.profile.streaming
    readers: dict[str, list[HwLayer]] = {}
    for layer in ctx.layers:
        for source in layer.inputs:
            readers.setdefault(source, []).append(layer)
    shapes = {"input": tuple(ctx.manifest.model.input),
              **{layer.name: layer.out_shape for layer in ctx.layers}}
    for tensor, shape in shapes.items():
        chw = tensor == "input" and _chw(ctx)
        limit = rules.chw_pixels if chw else rules.hwc_pixels
        streamed = readers.get(tensor) and all(_streams(ctx, r) for r in readers[tensor])
        if pixels(shape) <= limit or streamed:
            continue
        what = "the model input" if tensor == "input" else f"the output of {tensor!r}"
        path = ("model", "input") if tensor == "input" else ctx.at(
            next(layer for layer in ctx.layers if layer.name == tensor))
        hint = (f"set placement.{readers[tensor][0].name}.streaming: true"
                if readers.get(tensor) else "the model output is never streamed")
        how = "" if readers.get(tensor) else (
            "make it smaller: pool in its layer (`pool:`) or a pool layer before it")
        yield Problem(path, f"{what} has {_dims(shape[1:])} = {pixels(shape)} values per "
                      f"channel, more than {ctx.profile.name} holds without streaming "
                      f"({limit} in {'CHW' if chw else 'HWC'}); {hint}", how)


MODEL_RULES: tuple[ModelRule, ...] = (_layer_count, _streaming, _data_size)
