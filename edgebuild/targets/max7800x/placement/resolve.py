"""`resolve`: the complete placement of a model's hardware layers on a device, or every
problem found. Processors come first: offsets and memories follow from them, so after a
processor problem nothing else is placed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from edgebuild.targets.max7800x.hwlayer import HwLayer
from edgebuild.targets.max7800x.limits import Problem
from edgebuild.targets.max7800x.placement.biasmemory import BiasMemory
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.datamemory import WORD, DataMemory
from edgebuild.targets.max7800x.placement.kernelmemory import KernelMemory
from edgebuild.targets.max7800x.placement.processors import ProcessorMaps
from edgebuild.targets.max7800x.placement.records import BiasSlot, KernelSlot, LayerPlan, Placement
from edgebuild.targets.max7800x.placement.sharing import Sharing

if TYPE_CHECKING:
    from edgebuild.manifest import Manifest
    from edgebuild.targets.max7800x.records import Profile


def resolve(hw_layers: tuple[HwLayer, ...], manifest: Manifest, profile: Profile,
            sharing: Sharing | None = None) -> tuple[Placement | None, list[Problem]]:
    """The complete placement of `hw_layers` on `profile`, or every problem found;
    `sharing`: what the weight values decide (None: not known yet, every layer stores its
    own kernels and bias)."""
    ctx = Context(tuple(hw_layers), manifest, profile)
    if not ctx.layers:
        return None, [Problem(("model", "layers"), "the model has no hardware layer")]
    ctx.check_fields()
    before = len(ctx.problems)
    maps = ProcessorMaps(ctx)
    maps.run()
    if len(ctx.problems) > before:  # offsets and memories follow from the processors
        return None, ctx.problems
    data = DataMemory(ctx, maps)
    data.run()
    kernels = KernelMemory(ctx, maps.procs, maps.outs, sharing)
    kernels.run()
    biases = BiasMemory(ctx, maps.procs, maps.outs, sharing)
    biases.run()
    if ctx.problems:
        return None, ctx.problems
    return _placement(ctx, maps, data, kernels.kernels, biases.biases, sharing is not None), []


def _placement(ctx: Context, maps: ProcessorMaps, data: DataMemory,
               kernels: dict[str, KernelSlot], biases: dict[str, BiasSlot],
               weights_known: bool) -> Placement:
    """The result record of a resolve without problems."""
    profile = ctx.profile
    plans = tuple(_plan(ctx, i, layer, maps, data, kernels, biases)
                  for i, layer in enumerate(ctx.layers))
    regions = tuple(sorted((r for _, placed in data.placed for r in placed),
                           key=lambda r: (r.instance, r.start, r.first)))
    memory = profile.kernel_memory
    return Placement(profile.name, plans, regions, profile.data_memory.instance_bytes,
                     tuple(memory.words_of(p) for p in range(profile.processors)),
                     profile.processors_per_quadrant, profile.bias_memory.bytes,
                     weights_known)


def _plan(ctx: Context, i: int, layer: HwLayer, maps: ProcessorMaps, data: DataMemory,
          kernels: dict[str, KernelSlot], biases: dict[str, BiasSlot]) -> LayerPlan:
    """Layer `i`'s plan: its maps, offsets, passes, slots, and which keys were given."""
    entry = ctx.entries.get(layer.name)
    bias = biases.get(layer.name)
    procs, outs = maps.procs[layer.name], maps.outs[layer.name]
    return LayerPlan(
        name=layer.name, members=layer.members, op=layer.op, inputs=layer.inputs,
        processors=procs, output_processors=outs,
        in_offset=data.offset(layer.name) + WORD if layer.persistent else
        data.offset(layer.inputs[0]), out_offset=data.offset(layer.name),
        data_format=ctx.data_format() if i == 0 else "HWC",
        write_gap=data.tensors[layer.name].gap,
        bias_group=None if bias is None else bias.group,
        streaming=bool(ctx.given(layer.name, "streaming")),
        in_passes=math.ceil(layer.in_channels / procs.bit_count()),
        out_passes=math.ceil(layer.out_channels / outs.bit_count()),
        in_channels=layer.in_channels, out_channels=layer.out_channels,
        kernel=kernels.get(layer.name), bias=bias,
        given=frozenset(entry.model_fields_set if entry is not None else ()),
        overwrites_input=layer.name in data.overlapped,
        read_gap=data.read_gaps[layer.name])
