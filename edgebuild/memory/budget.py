"""What a model needs of each memory budget (`target.memory`), from its architecture alone.

None of it depends on trained values: activations are int8 (int32 for a wide output), and
the generated C stores an 8-bit weight in one byte, 1-, 2- and 4-bit weights packed (rows of
whole 32-bit words, core.packing) and each bias in four bytes: the bytes the plan stage
counts against flash, from the bit widths of the quantization policy. So `edgebuild check`
tells before any training whether the `plan` stage will fit each budget, asking the
planner's own functions: the arena as memory.plan places it plus the buffer state kept
outside it, against `l2`; each tiled pass's `tiling.minimum_l1` (the budget below which
`tiling.choose` finds no tile), against `l1`; the stored weights and biases, against
`flash`. The plan stage reports its budget errors through `shortfalls` too: a budget equal
to a need reported here passes both, one byte less fails both. On a target with the
optimized kernels an L1 budget whose tiles need more RAM than the untiled build (a tiled
convolution's im2col columns) is a warning (`warnings`), with the bytes and the layer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from edgebuild.core import packing
from edgebuild.core.geometry import Shape
from edgebuild.formats import numbers
from edgebuild.memory import arena, tiling
from edgebuild.memory.plan import MemoryPlan, make_plan, tile_steps, untiled_peaks
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import ComputeLayer, Weights

if TYPE_CHECKING:
    from edgebuild.manifest import Layer, Manifest, Memory

BIAS_ITEM = 4  # bytes per stored bias: an int32 in accumulator units

Problem = tuple[tuple[str, ...], str]  # (manifest path, message)


@dataclass(frozen=True)
class LayerWeights:
    """A compute layer's stored weights and bias in bytes (its arrays in weights.c), and in
    TFLite's number format its per-channel multipliers and shifts (`requantization`)."""

    layer: str
    weights: int
    bias: int
    requantization: int = 0

    @property
    def bytes(self) -> int:
        return self.weights + self.bias + self.requantization


@dataclass(frozen=True)
class PassL1:
    """The smallest L1 budget a tiled pass of a layer runs in, and what fills it then."""

    layer: str
    key: str  # "tile"; "pool_tile": a convolution's fused input pooling
    bytes: int
    tiled: bool  # False: it runs whole, in less than the slots of its smallest tile
    slots: int
    channels: int  # output channels of the smallest tile
    parts: dict[str, int]  # one slot's regions, or the whole working set
    linear: bool = False  # a linear layer: its tiles are spans of output features
    shared_input: int = 0  # the split layout: the input row the slots overlay (bytes)

    def describe(self) -> str:
        parts = ", ".join(f"{name} {size}" for name, size in self.parts.items() if size)
        if not self.tiled:
            return f"it runs whole: {parts}; any tile needs more"
        plural = "s" if self.channels > 1 else ""
        tile = f"{self.channels} output feature{plural}" if self.linear else \
            f"1 output row x {self.channels} channel{plural}"
        slot = sum(self.parts.values())
        slots = f"double buffered: 2 x {slot} bytes" if self.slots == 2 else f"{slot} bytes"
        shared = f"; its input row, {self.shared_input} bytes, over the same bytes" \
            if self.shared_input else ""
        return f"its smallest tile: {tile}, {slots}: {parts}{shared}"


@dataclass(frozen=True)
class Ram:
    """The activation arena as the plan places it, the state kept outside it and the
    optimized kernels' workspace (one array, as large as the largest layer's)."""

    arena_bytes: int
    lower_bound: int
    state: tuple[tuple[str, int], ...]  # (layer, bytes) kept across inferences
    peak_layer: str  # the layer that runs when the most bytes are live
    live: tuple[tuple[str, int], ...]  # (tensor, aligned bytes) live then
    workspace: tuple[str, int] | None = None  # (layer, bytes) of the largest workspace

    @property
    def bytes(self) -> int:
        return self.arena_bytes + sum(size for _, size in self.state) + (
            0 if self.workspace is None else self.workspace[1])


@dataclass(frozen=True)
class TilingCost:
    """A tiled plan that needs more RAM than the same layers untiled: by how much, and the
    layer whose tiles make it so (see `tiling_cost`)."""

    ram: int  # the plan's: arena + state + workspace + L1 peak
    arena: int  # with the state
    workspace: int
    l1: int
    untiled_workspace: int
    untiled_l1: int  # also the L1 budget that runs every layer whole
    layer: str
    rows: int  # output rows of its tiles (0: the excess is L1, not its workspace)

    @property
    def untiled_ram(self) -> int:
        return self.arena + self.untiled_workspace + self.untiled_l1

    def describe(self, given: str) -> str:
        why = (f"layer {self.layer} does not fit L1 whole, and its tiles of {self.rows} output "
               f"row{'s' if self.rows > 1 else ''} build {self.workspace} bytes of im2col "
               f"columns in the kernels' workspace (untiled, the largest workspace is "
               f"{self.untiled_workspace} bytes)") if self.rows else (
            f"layer {self.layer} needs an L1 peak of {self.l1} bytes")
        return (f"{given} makes the model's RAM {self.ram - self.untiled_ram} bytes "
                f"larger than untiled: {self.ram} bytes (arena and state {self.arena}, "
                f"workspace {self.workspace}, L1 {self.l1}) against {self.untiled_ram} "
                f"(workspace {self.untiled_workspace}, L1 {self.untiled_l1}): {why}; no tiling "
                f"within this budget needs less. An l1 of {self.untiled_l1} B runs every "
                "layer whole")


@dataclass(frozen=True)
class Needs:
    """Per budget, what the model needs and which layers need it; on a target with the
    optimized kernels, what the tiles cost in RAM beyond the untiled build (None: nothing)."""

    l1: tuple[PassL1, ...]
    ram: Ram
    flash: tuple[LayerWeights, ...]
    tiling: TilingCost | None = None

    @property
    def flash_bytes(self) -> int:
        return sum(w.bytes for w in self.flash)


def _nodes(input_shape: Shape, layers: Sequence[Layer]) -> dict[str, graphs.Node]:
    graph, _ = graphs.build(tuple(input_shape), tuple(layers))
    assert graph is not None  # deployed layers of a checked manifest
    return {node.name: node for node in graph.nodes}


def layer_weights(input_shape: Shape, layers: Sequence[Layer],
                  bits: Mapping[str, int] | None = None,
                  number_format: str = numbers.OWN) -> tuple[LayerWeights, ...]:
    """The stored bytes of every compute layer of the deployed (folded) `layers`: its op's
    weight layout at its width (`bits` by layer, 8 when not given: one byte per weight;
    1, 2, 4: packed), a bias (given, or from a folded batchnorm) in int32, and in another
    number format than edgebuild's (TFLite's) an int32 multiplier and shift per output
    channel."""
    nodes = _nodes(input_shape, layers)
    found = []
    for layer in layers:
        facet = OPS[layer.op].weights
        if not OPS[layer.op].computes or not isinstance(facet, Weights):
            continue
        compute = cast(ComputeLayer, layer)  # a compute op's record has ComputeLayer's fields
        shape = facet.shape(layer, tuple(nodes[layer.name].in_shapes[0]))
        width = (bits or {}).get(layer.name, 8)
        found.append(LayerWeights(layer.name, packing.stored_bytes(tuple(shape), width),
                                  compute.out * BIAS_ITEM if compute.bias else 0,
                                  0 if number_format == numbers.OWN else 2 * 4 * compute.out))
    return tuple(found)


def l1_passes(input_shape: Shape, layers: Sequence[Layer], double_buffer: bool,
              split: bool = False, number_format: str = numbers.OWN) -> tuple[PassL1, ...]:
    """Every windowed pass (the windows memory.plan.tile_steps tiles) at its smallest L1;
    `split`: the target has the split kernels (tiling.smallest_l1)."""
    nodes = _nodes(input_shape, layers)
    found = []
    for layer in layers:
        node = nodes[layer.name]
        windows = numbers.windows(layer.op, number_format)
        for key, w in windows(layer, node.in_shapes, node.out_shape):
            need = tiling.minimum_l1(w, double_buffer, split)
            tiled = need < tiling.whole(w)
            shared = split and w.split and tiled
            if split and w.banded and tiled:  # one channel's padded rows, one buffer
                found.append(PassL1(layer.name, key, need, tiled, 1, 1,
                                    {"one channel's padded rows of a 2-row band": need}))
                continue
            found.append(PassL1(
                layer.name, key, need, tiled, 2 if double_buffer else 1, tiling.step(w),
                tiling.slot_parts(w, 1, tiling.step(w)) if tiled else tiling.whole_parts(w),
                w.linear, tiling.split_parts(w, 1, tiling.step(w))["input"] if shared else 0))
    return tuple(found)


def ram(plan: MemoryPlan) -> Ram:
    """The plan's arena and state, with the step where the most bytes are live."""
    tensors = [arena.Tensor(t.name, t.bytes, t.first, t.last) for t in plan.tensors]
    step = arena.peak(tensors)
    live = () if step is None else tuple(
        (t.name, arena.aligned(t.bytes)) for t in arena.live(tensors, step))
    layers = {s.step: s.layer for s in plan.steps}  # step 0 writes the model input
    spaces = [(s.layer, s.workspace_bytes) for s in plan.steps if s.workspace_bytes]
    return Ram(plan.arena_bytes, plan.arena_lower_bound,
               tuple((s.layer, s.state_bytes) for s in plan.steps if s.state_bytes),
               "input" if step is None else layers.get(step, "input"), live,
               max(spaces, key=lambda space: space[1]) if spaces else None)


def needs(input_shape: Shape, layers: Sequence[Layer], plan: MemoryPlan,
          double_buffer: bool, bits: Mapping[str, int] | None = None,
          split: bool = False, number_format: str = numbers.OWN) -> Needs:
    """What the deployed `layers` (and their `plan`: memory.plan.make_plan) need, their
    weights at `bits` (by layer; see layer_weights), on a target with the split kernels or
    not (`split`), in a number format (formats.numbers)."""
    return Needs(l1_passes(input_shape, layers, double_buffer, split, number_format), ram(plan),
                 layer_weights(input_shape, layers, bits, number_format),
                 tiling_cost(input_shape, layers, plan, number_format) if split else None)


def tiling_cost(input_shape: Shape, layers: Sequence[Layer],
                plan: MemoryPlan, number_format: str = numbers.OWN) -> TilingCost | None:
    """The RAM the tiled `plan` (memory.plan.tile_steps, optimized kernels) needs beyond
    the untiled build's, or None. The planner keeps within the untiled RAM whenever some
    choice of tiles does (memory.selection), so this is what the budget truly costs: a
    tiled convolution builds the im2col columns of a whole row of output pixels, where the
    untiled kernels build four at a time."""
    totals = plan.memory
    if totals is None:
        return None
    untiled = untiled_peaks(input_shape, layers, plan, True, number_format)
    arena = plan.arena_bytes + plan.state_bytes
    if totals.ram_bytes <= arena + untiled.bytes:
        return None
    tiled = [step for step in plan.steps if step.tile() is not None]
    widest = max(tiled, key=lambda step: step.workspace_bytes or 0, default=None)
    if widest is not None and totals.workspace_bytes > untiled.workspace and \
            widest.workspace_bytes == totals.workspace_bytes:
        layer, rows = widest.layer, widest.tiles["tile"].rows
    else:  # the L1 peak's layer
        layer, rows = max(((step.layer, choice.l1_bytes) for step in plan.steps
                           for choice in step.tiles.values()), key=lambda p: p[1])[0], 0
    return TilingCost(totals.ram_bytes, arena, totals.workspace_bytes, totals.l1_peak,
                      untiled.workspace, untiled.l1, layer, rows)


def problems(manifest: Manifest, layers: Sequence[Layer],
             bits: Mapping[str, int] | None = None, optimized: bool = False,
             ram: bool = True) -> list[Problem]:
    """Every `target.memory` budget the deployed `layers` cannot meet (edgebuild check):
    the plan stage's arena on the same layers, weighed as the plan stage weighs it (`bits`:
    each layer's weight width, by the quantization policy), and on a target with the
    optimized kernels (`optimized`) their workspace for the tiles the plan stage picks.
    `ram` False leaves `l2` to the caller (an accelerator's emulation may exceed it)."""
    return shortfalls(assess(manifest, layers, bits, optimized), manifest.target.memory, ram)


def assess(manifest: Manifest, layers: Sequence[Layer],
           bits: Mapping[str, int] | None = None, optimized: bool = False) -> Needs:
    """What the deployed `layers` need of each budget, as `problems` weighs them."""
    plan = planned(manifest, layers, bits, optimized)
    return needs(tuple(manifest.model.input), layers, plan,
                 manifest.target.tiling.double_buffer, bits, optimized,
                 manifest.model.format.value)


def planned(manifest: Manifest, layers: Sequence[Layer],
            bits: Mapping[str, int] | None = None, optimized: bool = False) -> MemoryPlan:
    """The plan the `plan` stage makes of the deployed `layers` (weights stored at `bits`),
    tiled on a target with the optimized kernels (`optimized`: the tiles decide their
    workspace, which counts in RAM)."""
    shape = tuple(manifest.model.input)
    number_format = manifest.model.format.value
    stored = sum(w.bytes for w in layer_weights(shape, layers, bits, number_format))
    memory = manifest.target.memory
    plan = make_plan(shape, layers, stored)
    if optimized:
        plan, _ = tile_steps(shape, layers, plan, memory.l1, memory.l2,
                             manifest.target.tiling.double_buffer, True, number_format)
    return plan


def warnings(found: Needs, memory: Memory) -> list[Problem]:
    """(path, message) for what a budget costs without being too small: an L1 budget whose
    tiles need more RAM than the untiled build (`Needs.tiling`). Warnings, not problems:
    the build fits its budgets; the user may rather give L1 or change the layer."""
    if found.tiling is None or any(p.bytes > memory.l1 for p in found.l1):
        return []  # an L1 too small is a problem of its own (`shortfalls`)
    return [(("target", "memory", "l1"), found.tiling.describe(_given(memory, "l1")))]


def shortfalls(found: Needs, memory: Memory, ram: bool = True) -> list[Problem]:
    """(path, message) for each budget below its need: given, needed, and by which layer
    (`ram` False: not `l2`, which the caller weighs itself)."""
    out: list[Problem] = []
    if any(p.bytes > memory.l1 for p in found.l1):
        out.append((("target", "memory", "l1"), _l1(found.l1, _given(memory, "l1"), memory.l1)))
    if ram and found.ram.bytes > memory.l2:
        out.append((("target", "memory", "l2"), _ram(found.ram, _given(memory, "l2"))))
    if found.flash_bytes > memory.flash:
        out.append((("target", "memory", "flash"), _flash(found.flash, _given(memory, "flash"))))
    return out


def _given(memory: Memory, name: str) -> str:
    default = "" if name in memory.model_fields_set else " (the default)"
    return f"{getattr(memory, name)} B{default}"


def _l1(passes: Sequence[PassL1], given: str, budget: int) -> str:
    """The pass needing the most names the minimum; other layers that do not fit follow."""
    worst = max(passes, key=lambda p: p.bytes)  # the first of the largest
    what = f"layer {worst.layer}" + (" (its fused input pooling)" if worst.key == "pool_tile"
                                     else "")
    others: dict[str, int] = {}
    for p in passes:
        if p.bytes > budget and p.layer != worst.layer:
            others[p.layer] = max(p.bytes, others.get(p.layer, 0))
    also = "; other layers over the budget: " + ", ".join(
        f"{name} {size}" for name, size in others.items()) + " bytes" if others else ""
    return (f"{given} is too small: {what} needs at least {worst.bytes} bytes "
            f"({worst.describe()}){also}")


def _ram(need: Ram, given: str) -> str:
    live = ", ".join(f"{name} {size}" for name, size in need.live)
    detail = f"at layer {need.peak_layer} these tensors are live together: {live} bytes"
    if need.arena_bytes > need.lower_bound:
        detail += (f"; the arena as placed takes {need.arena_bytes} bytes "
                   f"(lower bound {need.lower_bound})")
    if need.workspace is not None:
        detail += (f"; the optimized kernels' workspace: {need.workspace[1]} bytes "
                   f"(for layer {need.workspace[0]})")
    if need.state:
        state = ", ".join(f"{layer} {size}" for layer, size in need.state) + " bytes"
        return (f"{given} is too small: the activation arena with its buffer state needs at "
                f"least {need.bytes} bytes (an arena of {need.arena_bytes} bytes: {detail}; "
                f"state kept across inferences: {state})")
    what = "with the kernels' workspace " if need.workspace is not None else ""
    return (f"{given} is too small: the activation arena {what}needs at least {need.bytes} "
            f"bytes ({detail})")


def _flash(weights: Sequence[LayerWeights], given: str) -> str:
    ranked = sorted(weights, key=lambda w: -w.bytes)
    listed = ", ".join(f"{w.layer} {w.bytes}" for w in ranked[:3]) + " bytes"
    more = f" and {len(ranked) - 3} more layers" if len(ranked) > 3 else ""
    total = sum(w.bytes for w in weights)
    return (f"{given} is too small: storing the weights needs at least {total} bytes "
            f"({listed}{more}: one byte per 8-bit weight, 1-, 2- and 4-bit weights packed, four "
            "bytes per bias; code needs flash besides)")
