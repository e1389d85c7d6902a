"""Processor maps: which processors read each layer's input (`processors`) and where its
output is written (`output_processors`), given or chosen, then checked together.
"""

from __future__ import annotations

from typing import Literal

from edgebuild.model.graph import INPUT
from edgebuild.targets.max7800x import advice
from edgebuild.targets.max7800x.hwlayer import HwLayer, interleaved
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.maps import bits, first, hexmap, mask, spans


class ProcessorMaps:
    """Every layer's processor maps (`procs`, `outs`: by layer name, the input's under
    INPUT) and every tensor's channel count (`channels`)."""

    def __init__(self, ctx: Context):
        self.layers, self.manifest, self.profile = ctx.layers, ctx.manifest, ctx.profile
        self.given, self.path, self.problem = ctx.given, ctx.path, ctx.problem
        self.step, self.data_format = ctx.step, ctx.data_format
        self.procs: dict[str, int] = {}
        self.outs: dict[str, int] = {}
        self.channels: dict[str, int] = {}

    def run(self) -> None:
        """Given maps first, then what readers demand, then the defaults; then the checks."""
        self.procs = {}
        for layer in self.layers:
            given = self.given(layer.name, "processors")
            if given is not None:
                self.procs[layer.name] = given
        self.channels = {INPUT: self.manifest.model.input[0],
                         **{layer.name: layer.out_channels for layer in self.layers}}
        demand = self._demands()
        self.outs = {INPUT: demand.get(INPUT) or self._input_default()}
        for layer in self.layers:
            if layer.name not in self.procs:
                self.procs[layer.name] = self._derived(layer)
            self.outs[layer.name] = self._output_default(layer, demand)
        self._check_processors()

    def _demands(self) -> dict[str, int]:
        """Where each tensor's readers want it, from the last layer back: a layer whose
        processors are known (given, or fixed by its output for a copy layer, or chosen
        for a concatenation / element-wise group) wants its inputs there."""
        demand: dict[str, int] = {}
        for layer in reversed(self.layers):
            if layer.name not in self.procs:
                implied = self._implied(layer, demand)
                if implied is None:
                    continue
                self.procs[layer.name] = implied
            for slot, source in enumerate(layer.inputs):
                demand[source] = self._slot_map(layer, slot, self.procs[layer.name])
        return demand

    def _implied(self, layer: HwLayer, demand: dict[str, int]) -> int | None:
        out = self.given(layer.name, "output_processors") or demand.get(layer.name)
        if (layer.copies or layer.op == "add") and out is not None:
            return out
        if layer.concatenates:
            return self._concat_default(layer)
        if layer.eltwise_operands:
            given = [self.given(s, "output_processors") for s in layer.inputs]
            known = [m for m in given if m is not None]
            return known[0] if known else first(self.profile.processors_needed(layer.in_channels))
        return None

    def multipass(self, layer: HwLayer) -> bool:
        """Reads a concatenation of more channels than there are processors: in passes,
        one input per pass, interleaved in memory (see edgebuild.targets.max7800x.mapping)."""
        return interleaved(layer, self.profile.processors) and not layer.eltwise_operands

    def _concat_default(self, layer: HwLayer) -> int:
        """Adjacent processors, placed so that a given input keeps its processors; in
        several passes, the processors of the first input whose are given."""
        if self.multipass(layer):
            given = [self.given(s, "output_processors") for s in layer.inputs]
            known = [m for m in given if m is not None]
            count = self.profile.processors_needed(layer.in_channels)
            fits = [m for m in known if m.bit_count() == count]
            return fits[0] if fits else first(count)
        start = 0
        for slot, source in enumerate(layer.inputs):
            placed = self.given(source, "output_processors")
            if placed is not None:
                before = sum(self.channels[s] for s in layer.inputs[:slot])
                start = max(0, bits(placed)[0] - before)
                break
        return first(layer.in_channels) << start

    def _slot_map(self, layer: HwLayer, slot: int, processors: int) -> int:
        """Where `layer` reads input `slot`: all its processors, or for a concatenation
        the input's share (in several passes: the first processors, one pass each)."""
        if not layer.concatenates:
            return processors
        if self.multipass(layer):
            return mask(bits(processors)[:self.channels[layer.inputs[slot]]])
        before = sum(self.channels[s] for s in layer.inputs[:slot])
        ps = bits(processors)[before:before + self.channels[layer.inputs[slot]]]
        return mask(ps)

    def _input_default(self) -> int:
        """HWC: processors 0, 1, ...; CHW: one processor per data memory instance."""
        channels = self.channels[INPUT]
        if self.data_format() == "CHW":
            group = self.profile.processors_per_memory
            return mask(i * group for i in range(min(channels, self.profile.data_memory.instances)))
        return first(self.profile.processors_needed(channels))

    def _derived(self, layer: HwLayer) -> int:
        """A layer reads where its inputs are (a concatenation: all of them)."""
        if layer.concatenates:
            out = 0
            for source in layer.inputs:
                out |= self.outs[source]
            return out
        return self.outs[layer.inputs[0]]

    def _output_default(self, layer: HwLayer, demand: dict[str, int]) -> int:
        given = self.given(layer.name, "output_processors")
        if given is not None:
            return given
        if layer.name in demand:
            return demand[layer.name]
        if layer.copies or layer.op == "add":
            return self.procs[layer.name]
        count = self.profile.processors_needed(layer.out_channels)
        if layer is self.layers[-1]:
            return first(count)  # the network description's default output map
        return self._beside(layer, count)

    def _beside(self, layer: HwLayer, count: int) -> int:
        """`count` adjacent processors on data memory instances the layer's inputs do not
        use, when there are enough: the output then never competes with its input for
        space (as the manual's examples place outputs), else processors 0, 1, ..."""
        busy = {self.profile.memory_of(p) for source in layer.inputs
                for p in bits(self.outs[source])}
        group = self.profile.processors_per_memory
        for start in range(0, self.profile.processors - count + 1, group):
            candidate = first(count) << start
            if not busy & {self.profile.memory_of(p) for p in bits(candidate)}:
                return candidate
        return first(count)

    def _check_processors(self) -> None:
        for i, layer in enumerate(self.layers):
            self._exists(layer)
            self._count(layer, "processors", layer.in_channels, "input")
            self._count(layer, "output_processors", layer.out_channels, "output")
            if i == 0 and self.data_format() == "CHW":
                self._chw(layer)
            self._reads(layer)
            self._copies(layer)
            self._linear_outputs(layer)

    def _exists(self, layer: HwLayer) -> None:
        limit = self.profile.processors
        key: Literal["processors", "output_processors"]
        for key, value in (("processors", self.procs[layer.name]),
                           ("output_processors", self.outs[layer.name])):
            if value >> limit:
                self.problem(self.path(layer, key), f"layer {layer.name!r}: {key} "
                             f"{hexmap(value)} names processor {value.bit_length() - 1}, but "
                             f"{self.profile.name} has processors 0..{limit - 1}")

    def _count(self, layer: HwLayer, key: Literal["processors", "output_processors"],
               channels: int, what: str) -> None:
        value = self.given(layer.name, key)
        if value is None:
            return
        chw = key == "processors" and layer is self.layers[0] and self.data_format() == "CHW"
        need = channels if chw else self.profile.processors_needed(channels)
        if value.bit_count() != need:
            self.problem(("placement", layer.name, key), f"layer {layer.name!r}: {key} "
                         f"{hexmap(value)} has {value.bit_count()} bits, but {channels} "
                         f"{what} channels need {need} processors")

    def _chw(self, layer: HwLayer) -> None:
        """CHW delivers one byte per instance per cycle: one processor per instance."""
        instances = self.profile.data_memory.instances
        if layer.in_channels > instances:
            self.problem(self.path(layer, "data_format"), f"layer {layer.name!r}: CHW input "
                         f"of {layer.in_channels} channels needs one data memory instance per "
                         f"channel, but {self.profile.name} has {instances}; use HWC")
            return
        seen: dict[int, int] = {}
        for p in bits(self.procs[layer.name]):
            instance = self.profile.memory_of(p)
            if instance in seen:
                self.problem(self.path(layer, "processors"), f"layer {layer.name!r}: CHW "
                             f"input needs each processor on its own data memory instance, "
                             f"but processors {seen[instance]} and {p} share instance "
                             f"{instance}")
                return
            seen[instance] = p

    def _reads(self, layer: HwLayer) -> None:
        """A layer reads where its producers wrote."""
        if layer.concatenates:
            self._concat_reads(layer)
            return
        want = self.procs[layer.name]
        for source in layer.inputs:
            have = self.outs[source]
            if have != want:
                self._mismatch(layer, source, want, have)

    def _mismatch(self, layer: HwLayer, source: str, want: int, have: int) -> None:
        path = self.path(layer, "processors")
        if path[0] != "placement" and source != INPUT:
            path = self.path(self.layers[self.step[source]], "output_processors")
        what = "the model input is loaded" if source == INPUT else \
            f"{source!r} writes its output"
        how = (f"read it where it is loaded: placement.{layer.name}.processors: "
               f"{hexmap(have)}" if source == INPUT else
               advice.same_processors(layer.name, source, hexmap(want), hexmap(have)))
        self.problem(path, f"layer {layer.name!r} reads {source!r} on processors "
                           f"{hexmap(want)}, but {what} on {hexmap(have)}", how)

    def _concat_reads(self, layer: HwLayer) -> None:
        if self.multipass(layer):
            self._multipass_reads(layer)
            return
        union, last = 0, -1
        for source in layer.inputs:
            ps = bits(self.outs[source])
            if not ps:
                return  # the concatenation's processors are too few: reported by _count
            if union & self.outs[source] or ps[0] <= last:
                self.problem(self.path(layer, "processors"), f"layer {layer.name!r}: "
                             f"concatenated inputs must sit on adjacent processors in order, "
                             f"but {source!r} is on {spans(ps)} (after processor {last})")
                return
            union, last = union | self.outs[source], ps[-1]
        if union != self.procs[layer.name]:
            self.problem(self.path(layer, "processors"), f"layer {layer.name!r}: processors "
                         f"{hexmap(self.procs[layer.name])} differ from where its inputs are "
                         f"({hexmap(union)})")

    def _multipass_reads(self, layer: HwLayer) -> None:
        """Pass k reads input k on the layer's processors: every input but the last fills
        them, and none needs more than one pass."""
        ps = bits(self.procs[layer.name])
        for slot, source in enumerate(layer.inputs):
            channels = self.channels[source]
            last = slot == len(layer.inputs) - 1
            if channels > len(ps) or (channels < len(ps) and not last):
                self.problem(self.path(layer), f"layer {layer.name!r} reads {layer.in_channels} "
                             f"concatenated channels in passes of {len(ps)} processors, one "
                             f"input per pass, so every input but the last needs exactly "
                             f"{len(ps)} channels (the last at most {len(ps)}), but "
                             f"{source!r} has {channels}")
                return
            want = mask(ps[:channels])
            if self.outs[source] != want:
                self._mismatch(layer, source, want, self.outs[source])

    def _copies(self, layer: HwLayer) -> None:
        if layer.copies and self.outs[layer.name] != self.procs[layer.name]:
            self.problem(self.path(layer, "output_processors"), f"layer {layer.name!r}: a "
                         f"{layer.op} layer copies each channel within its processor, so "
                         f"output_processors {hexmap(self.outs[layer.name])} must equal "
                         f"processors {hexmap(self.procs[layer.name])}")

    def _linear_outputs(self, layer: HwLayer) -> None:
        per = self.profile.limits.linear_out_per_processor
        count = self.outs[layer.name].bit_count()
        if layer.op == "linear" and layer.out_channels > per * count:
            self.problem(self.path(layer, "output_processors"), f"layer {layer.name!r}: "
                         f"{layer.out_channels} outputs on {count} output processors exceed "
                         f"{self.profile.name}'s {per} per processor")
