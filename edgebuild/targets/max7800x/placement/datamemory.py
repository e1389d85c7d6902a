"""Data memory: every tensor's regions (offset, stride, count in each memory instance it
touches), given or chosen so that no output overwrites a tensor still needed, except where
edgebuild.targets.max7800x.overlap proves a layer only overwrites input it has read.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from edgebuild.model.graph import INPUT
from edgebuild.targets.max7800x import advice
from edgebuild.targets.max7800x.hwlayer import HwLayer, interleaved, pixels
from edgebuild.targets.max7800x.limits import ManifestPath
from edgebuild.targets.max7800x.overlap import clash
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.kernelmemory import MAX_1D_TAPS, passes
from edgebuild.targets.max7800x.placement.maps import bits, spans
from edgebuild.targets.max7800x.placement.processors import ProcessorMaps
from edgebuild.targets.max7800x.placement.regions import Region, byte_range, clash_in

WORD = 4  # bytes per data memory word
WIDE_WORDS = 4  # words per value of a 32-bit output


def lead_bytes(layer: HwLayer) -> int:
    """Bytes a layer writes just before its output offset. A 3-tap conv1d whose dilated span
    exceeds MAX_1D_TAPS runs on the 2-D hardware (program.geometry.columns_conv1d): its
    centred 3x3 kernel computes one row of `dilation` outputs early and writes it there.
    Those words are clobbered while the layer runs, so they must exist (the offset at least
    this much) and hold nothing still needed."""
    taps = layer.kernel[0] if layer.kernel else 1
    dilation = layer.dilation[0] if layer.dilation else 1
    if layer.op != "conv1d" or taps != 3 or (taps - 1) * dilation < MAX_1D_TAPS:
        return 0
    return WORD * dilation * passes(layer.out_channels)


@dataclass
class _Tensor:
    """A tensor in data memory: the model input or one layer's output."""

    name: str
    shape: tuple[int, ...]
    producer: int  # step; -1 for the model input
    readers: list[tuple[int, int]] = field(default_factory=list)  # (step, slot)
    wide: bool = False
    chw: bool = False
    gap: int = 0
    group: str = ""  # union-find root (tensors that share one base offset)
    delta: int = 0  # byte offset from the group's base
    persistent: bool = False  # a buffer's window: needed before the first step and after the last
    lead: int = 0  # bytes written just before the tensor while its producer runs (lead_bytes)


class DataMemory:
    """The data memory of every tensor: groups of tensors that share a base offset
    (interleaved operands, concatenated inputs, a buffer and its newest frame), each
    group's base, and the regions placed."""

    def __init__(self, ctx: Context, maps: ProcessorMaps):
        self.layers, self.manifest, self.profile = ctx.layers, ctx.manifest, ctx.profile
        self.given, self.path, self.problem = ctx.given, ctx.path, ctx.problem
        self.data_format = ctx.data_format
        self.procs, self.outs = maps.procs, maps.outs

    def run(self) -> None:
        """Group the tensors, then place each group in the order its first member is
        written (so what is alive at that step is known)."""
        self.tensors = self._tensors()
        self._interleave()
        groups = self._groups()
        self.base: dict[str, int] = {}
        self.overlapped: set[str] = set()  # layers that write over their own input
        self.placed: list[tuple[str, list[Region]]] = []
        for root in sorted(groups, key=lambda r: self._first_step(groups[r])):
            self._place_group(root, groups[root])

    def _tensors(self) -> dict[str, _Tensor]:
        chw = self.data_format() == "CHW"
        tensors = {INPUT: _Tensor(INPUT, tuple(self.manifest.model.input), -1, chw=chw)}
        for i, layer in enumerate(self.layers):
            tensors[layer.name] = _Tensor(layer.name, layer.out_shape, i, wide=layer.wide,
                                          persistent=layer.persistent, lead=lead_bytes(layer))
        for i, layer in enumerate(self.layers):
            for slot, source in enumerate(layer.inputs):
                tensors[source].readers.append((i, slot))
        for tensor in tensors.values():
            tensor.group = tensor.name
        return tensors

    def _interleave(self) -> None:
        """Element-wise operands and the inputs of a concatenation read in several passes:
        write_gap = inputs - 1, input i 4 bytes after i - 1."""
        for layer in self.layers:
            n = len(layer.inputs) if interleaved(layer, self.profile.processors) else 0
            for slot, source in enumerate(layer.inputs if n else ()):
                self.tensors[source].gap = n - 1
                self._join(layer, layer.inputs[0], source, WORD * slot)
            if layer.concatenates and not n:
                for source in layer.inputs[1:]:
                    self._join(layer, layer.inputs[0], source, 0)
            if layer.persistent:  # the producer writes the newest frame into the last word
                self._join(layer, layer.name, layer.inputs[0], WORD * (layer.out_shape[1] - 1))
        for layer in self.layers:
            self._write_gap(layer)
        self.read_gaps = {layer.name: self._read_gap(layer) for layer in self.layers}

    def _write_gap(self, layer: HwLayer) -> None:
        """A layer's write_gap: what its interleaved readers need, else the manifest's own.
        A gap no reader requires is still valid where every reader can skip it as it reads
        (MAX78002's read_gap: izer's `read_gap_max78002` pattern, two layers writing the
        words of each pair and a reader taking one of them), or where nothing reads it."""
        given = self.given(layer.name, "write_gap")
        tensor = self.tensors[layer.name]
        if given is None or given == tensor.gap:
            return
        if tensor.gap:
            self.problem(("placement", layer.name, "write_gap"), f"layer {layer.name!r}: "
                         f"write_gap {given} is wrong; it is read interleaved with "
                         f"{tensor.gap} other tensor{'s' * (tensor.gap > 1)} (an element-wise "
                         "operand, or one pass of a concatenation), so write_gap is "
                         f"{tensor.gap}")
        elif self.profile.limits.read_gap or not tensor.readers:
            tensor.gap = given
        else:
            self.problem(("placement", layer.name, "write_gap"), f"layer {layer.name!r}: "
                         f"write_gap {given} is wrong; its readers need plain (not "
                         f"interleaved) data ({self.profile.name} cannot skip a gap as it "
                         "reads: read_gap is a MAX78002 feature), so write_gap is 0")

    def _read_gap(self, layer: HwLayer) -> int:
        """The gap a layer skips as it reads: that of its input when the input is written
        interleaved for another reader (MAX78002's `read_gap`), else 0."""
        given = self.given(layer.name, "read_gap")
        gap = 0 if interleaved(layer, self.profile.processors) else \
            max(self.tensors[source].gap for source in layer.inputs)
        path = self.path(layer, "read_gap")
        if given and not self.profile.limits.read_gap:
            self.problem(path, f"layer {layer.name!r}: read_gap is a MAX78002 feature; "
                         f"{self.profile.name} layers read plain data (remove read_gap; a "
                         "passthrough copy re-formats interleaved data)")
        elif gap and not self.profile.limits.read_gap:
            self.problem(path, f"layer {layer.name!r} reads {layer.inputs[0]!r}, which is "
                         f"written interleaved (write_gap {gap}), but {self.profile.name} "
                         "cannot skip the gap as it reads (read_gap is a MAX78002 feature); "
                         "read a passthrough copy instead")
        elif gap and math.ceil(layer.in_channels / self.procs[layer.name].bit_count()) > 1:
            self.problem(path, f"layer {layer.name!r} reads interleaved data (read_gap {gap}) "
                         "in several passes; read_gap works only in one pass")
        elif given is not None and given != gap:
            why = (f"its input is written with write_gap {gap}" if gap else
                   "its input is plain (not interleaved) data")
            self.problem(("placement", layer.name, "read_gap"), f"layer {layer.name!r}: "
                         f"read_gap {given} is wrong; {why}, so read_gap is {gap}")
        return gap

    def _root(self, name: str) -> tuple[str, int]:
        delta = 0
        while self.tensors[name].group != name:
            delta += self.tensors[name].delta
            name = self.tensors[name].group
        return name, delta

    def _join(self, layer: HwLayer, anchor: str, other: str, offset: int) -> None:
        """Record offset(other) = offset(anchor) + `offset`."""
        (ra, da), (rb, db) = self._root(anchor), self._root(other)
        if ra == rb:
            if db - da != offset:
                self.problem(self.path(layer), f"layer {layer.name!r}: input {other!r} "
                             "must sit at two different offsets (it is shared with another "
                             "concatenation or element-wise layer)")
            return
        self.tensors[rb].group, self.tensors[rb].delta = ra, da + offset - db

    def _groups(self) -> dict[str, list[_Tensor]]:
        groups: dict[str, list[_Tensor]] = {}
        for tensor in self.tensors.values():
            root, delta = self._root(tensor.name)
            tensor.group, tensor.delta = root, delta
            groups.setdefault(root, []).append(tensor)
        for members in groups.values():  # the lowest member sits at the group's base
            low = min(t.delta for t in members)
            for t in members:
                t.delta -= low
        return groups

    def _first_step(self, members: list[_Tensor]) -> int:
        return -1 if any(t.persistent for t in members) else min(t.producer for t in members)

    def _last(self, tensor: _Tensor) -> int:
        if tensor.producer == len(self.layers) - 1 or tensor.persistent:
            return len(self.layers)  # the model output stays
        return max((step for step, _ in tensor.readers), default=tensor.producer)

    def _streamed(self, tensor: _Tensor) -> bool:
        """Data read only by streaming layers arrives through FIFOs (the model input) or
        rolling buffers the streaming hardware manages: it takes no full-size region."""
        return bool(tensor.readers) and all(
            self.given(self.layers[step].name, "streaming") for step, _ in tensor.readers)

    def _regions(self, tensor: _Tensor, base: int, first: int, last: int) -> list[Region]:
        if self._streamed(tensor):
            return []
        start = base + tensor.delta
        processors = bits(self.outs[tensor.name])
        if tensor.chw:
            words = math.ceil(pixels(tensor.shape) / WORD)
            return [Region(tensor.name, self.profile.memory_of(p), start, WORD, words, WORD,
                           first, last) for p in processors]
        passes = math.ceil(tensor.shape[0] / len(processors))
        count = passes * pixels(tensor.shape) * (WIDE_WORDS if tensor.wide else 1)
        stride = WORD * (tensor.gap + 1)
        instances = sorted({self.profile.memory_of(p) for p in processors})
        return [Region(tensor.name, i, start, stride, count, WORD, first, last)
                for i in instances]

    def _group_regions(self, members: list[_Tensor], base: int) -> list[Region]:
        """Each member is needed from its own producer to its own last reader: a member
        written later may reuse bytes that are free until then. A member's lead (lead_bytes)
        is written, and so taken, only while its producer runs."""
        regions = [r for t in members for r in self._regions(
            t, base, -1 if t.persistent else t.producer, self._last(t))]
        leads = [Region(t.name, i, base + t.delta - t.lead, WORD, t.lead // WORD, WORD,
                        t.producer, t.producer)
                 for t in members if t.lead
                 for i in sorted({r.instance for r in regions if r.tensor == t.name})]
        return regions + leads

    def _place_group(self, root: str, members: list[_Tensor]) -> None:
        base: int | None
        fixed = self._fixed_base(members)
        alive = self._alive(self._first_step(members), max(self._last(t) for t in members))
        if fixed is not None:
            base, path = fixed
            regions = self._group_regions(members, base)
            self._check_regions(regions, alive, path)
        else:
            base = self._choose(members, alive)
            if base is None:
                return
            regions = self._group_regions(members, base)
        self.base[root] = base
        self.placed.append((root, regions))

    def _fixed_base(self, members: list[_Tensor]) -> tuple[int, ManifestPath] | None:
        """The base the user's out_offset / in_offset give (mismatches are problems)."""
        found: tuple[int, ManifestPath, str] | None = None
        for tensor in sorted(members, key=lambda t: t.producer):
            for value, path, what in self._offsets_given(tensor):
                base = value - tensor.delta
                if found is None:
                    found = (base, path, f"{what} {value:#x}")
                elif base != found[0]:
                    implied = found[0] + tensor.delta
                    puts = "" if found[2].endswith(f" {implied:#x}") else \
                        f", which puts {tensor.name!r} at {implied:#x}"
                    self.problem(path, f"{what} {value:#x} conflicts with {found[2]}{puts}")
        return None if found is None else found[:2]

    def _offsets_given(self, tensor: _Tensor) -> Iterator[tuple[int, ManifestPath, str]]:
        if tensor.name != INPUT:
            value = self.given(tensor.name, "out_offset")
            if value is not None:
                yield value, ("placement", tensor.name, "out_offset"), \
                    f"layer {tensor.name!r}: out_offset"
        if tensor.persistent:  # the shift reads words 1..length-1 of the window
            value = self.given(tensor.name, "in_offset")
            if value is not None:
                yield value - WORD, ("placement", tensor.name, "in_offset"), \
                    f"buffer {tensor.name!r}: in_offset {value:#x} - 4, i.e."
        for step, slot in tensor.readers:
            reader = self.layers[step]
            value = self.given(reader.name, "in_offset")
            if slot == 0 and value is not None and not reader.persistent:
                yield value, ("placement", reader.name, "in_offset"), \
                    f"layer {reader.name!r}: in_offset"

    def _alive(self, first: int, last: int) -> list[Region]:
        """Placed regions needed at some step in [first, last]."""
        return [r for _, regions in self.placed for r in regions
                if max(first, r.first) <= min(last, r.last)]

    def _check_regions(self, regions: list[Region], alive: list[Region],
                       path: ManifestPath) -> None:
        size = self.profile.data_memory.instance_bytes
        for region in regions:
            if region.start < 0:
                lead = self.tensors[region.tensor].lead
                self.problem(path, f"layer {region.tensor!r}: a conv1d of this dilation runs on "
                             f"the 2-D hardware and writes an unused row of {lead} bytes just "
                             f"before its output; place its output at an offset of at least "
                             f"{lead:#06x}")
                return
            if region.end > size:
                self.problem(path, f"layer {self._writer(region)!r}: {region.tensor!r} needs "
                             f"{byte_range(region.start, region.end)} in data memory instance "
                             f"{region.instance}, beyond its {size} bytes")
                return
            for other in alive:
                if not clash_in(region, other):
                    continue
                written = self._overwrite(region, other)
                if written is None:
                    self.overlapped.add(self._writer(max(region, other,
                                                         key=lambda r: r.first)))
                    continue
                self.problem(path, written)
                return

    def _overwrite(self, region: Region, other: Region) -> str | None:
        """None when one region is the output of the layer that reads the other for the
        last time and overwrites only values it has read (edgebuild.targets.max7800x.overlap); else why not."""
        out, read = sorted((region, other), key=lambda r: r.first)[::-1]
        if read.last != out.first or out.first < 0:
            return self._overlap(region, other)
        layer = self.layers[out.first]
        if read.tensor not in layer.inputs:
            return self._overlap(region, other)
        source, result = self.tensors[read.tensor], self.tensors[out.tensor]
        single = (not source.chw and read.count % pixels(source.shape) == 0
                  and (source.gap == 0 or read.count == pixels(source.shape))
                  and (result.wide or out.count == pixels(result.shape)))
        if not single:
            return self._overlap(region, other) + (
                "; an output may overwrite its own input only when it takes one pass and its "
                "input is plain HWC data")
        found = clash(layer, out, read, pixels(result.shape), pixels(source.shape))
        if found is None:
            return None
        i, j = found
        return (self._overlap(region, other) + f": output pixel {i} overwrites input pixel "
                f"{j}, which output pixel {i + 1} or a later one still reads")

    def _writer(self, region: Region) -> str:
        return self.layers[0].name if region.tensor == INPUT else region.tensor

    def _overlap(self, region: Region, other: Region) -> str:
        until = ("a buffer keeps it across inferences" if self.tensors[other.tensor].persistent
                 else "it is the model output" if other.last >= len(self.layers) else
                 f"layer {self.layers[other.last].name!r} still reads it")
        owner = "the model input" if other.tensor == INPUT else f"the output of {other.tensor!r}"
        return (f"layer {self._writer(region)!r}: output {region.tensor!r} at "
                f"{byte_range(region.start, region.end)} in data memory instance {region.instance} "
                f"overwrites {owner} at {byte_range(other.start, other.end)} ({until})")

    def _choose(self, members: list[_Tensor], alive: list[Region]) -> int | None:
        """Ping-pong first (a buffer's window: the top of memory, out of the way of the
        ping-pong halves), then the lowest offset where the group fits."""
        size = self.profile.data_memory.instance_bytes
        probe = self._group_regions(members, 0)
        instances = {r.instance for r in probe}
        ends = sorted({r.end for r in alive if r.instance in instances})
        candidates = [self._ping_pong(members), 0, size // 2, *ends]
        if any(t.persistent for t in members):  # a window kept forever: the top of memory
            candidates.insert(0, (size - max(r.end for r in probe)) // WORD * WORD)
        for base in candidates:
            regions = self._group_regions(members, base)
            if all(r.start >= 0 and r.end <= size for r in regions) and not any(
                    clash_in(r, other) for r in regions for other in alive):
                return base
        self._out_of_memory(members, probe, alive)
        return None

    def _ping_pong(self, members: list[_Tensor]) -> int:
        first = self._first_step(members)
        if first < 0:
            return 0
        half = self.profile.data_memory.instance_bytes // 2 // WORD * WORD
        source = self.layers[first].inputs[0]
        root, delta = self._root(source)
        reads = self.base.get(root, 0) + delta
        return half if reads < half else 0

    def _out_of_memory(self, members: list[_Tensor], probe: list[Region],
                       alive: list[Region]) -> None:
        size = self.profile.data_memory.instance_bytes
        need = max((r.end for r in probe), default=0)
        instances = sorted({r.instance for r in probe})
        live = sorted({(r.tensor, r.instance, r.start, r.end) for r in alive
                       if r.instance in instances}, key=lambda t: (t[1], t[2]))
        listing = "; ".join(f"{t!r} {byte_range(s, e)} in instance {i}" for t, i, s, e in live)
        writer = self.layers[max(self._first_step(members), 0)]
        names = ", ".join(repr(t.name) for t in members)
        why = (f"more than an instance holds ({size} bytes)" if need > size else
               f"but no free range of the {size}-byte instance is large enough"
               + (f" (still needed: {listing})" if listing else ""))
        bigger = advice.larger(self.profile.name, need,
                               lambda other: other.data_memory.instance_bytes,
                               "bytes per data memory instance") if need > size else ""
        self.problem(self.path(writer), f"layer {writer.name!r}: data memory runs out: "
                     f"{names} need{'s' * (len(members) == 1)} {need} bytes in data memory "
                     f"instance{'s' * (len(instances) > 1)} {spans(instances)}, {why}",
                     advice.data_memory(need > size, bigger))

    def offset(self, tensor: str) -> int:
        root, delta = self._root(tensor)
        return self.base[root] + delta
