"""Placement on a MAX7800x-style device: processors, data memory, kernel and bias memory.

`resolve` checks what the manifest's `placement` section gives and chooses the rest, so a
model without any placement gets a complete one. Every figure comes from the device
profile. Conventions (the ai8x network description's, see the synthesis manual):

- Processor maps are ints, bit p = processor p. A layer's `processors` read its input; its
  `output_processors` say where its output is written, and the next layer reads there.
  C channels use passes = ceil(C / processors) and need C processors in one pass, else
  ceil(C / passes) rounded up to a multiple of `processors_per_memory` (100 -> 52).
- Data memory: processor p reads memory instance p // processors_per_memory. HWC (every
  tensor but a CHW model input): one 32-bit word holds the channels of the processors
  sharing an instance; a tensor takes passes * pixels words in each instance its processors
  touch (4 words per value for a 32-bit `wide` output), word k at byte
  offset + 4 * k * (write_gap + 1). CHW model input: one channel per instance, packed
  4 values per word, ceil(pixels / 4) words.
- Element-wise operands are interleaved: operand i is written at base + 4 * i with
  write_gap = operands - 1 and the element-wise layer reads from base. Concatenated inputs
  sit at one offset on adjacent processors (earlier inputs on lower processors).
- A written tensor must not overlap a tensor still needed (one read later, or the model
  output); each tensor is needed from the step that writes it to its last reader. A layer
  may write over its own input where edgebuild.targets.max7800x.overlap proves every value overwritten was
  read for the last time (given offsets only: the toolchain's `--overlap-data`).
  Automatic offsets never overlap: they try the manual's ping-pong (0 / half the instance)
  first, then the lowest free offset.
- A concatenation of more channels than there are processors is read in passes, one input
  per pass: input i is written at base + 4 * i with write_gap = inputs - 1, on the first
  processors of the reading layer (every input but the last fills them).
- Automatic processors: a layer reads where its input is; the model input sits on
  processors 0, 1, ... (HWC) or 0, 4, 8, ... (CHW, one per instance); an output goes where
  its reader's given processors are, else (the last layer) on processors 0, 1, ..., else on
  the first whole instances its layer's inputs do not use.
- Kernel memory: a layer holds, in each of its processors, ceil(kernels / per_word) words,
  per_word = word_bits // (elements * bits); its start word, the same on all its
  processors, is a multiple of `start_multiple`.
- Bias memory: out_channels bytes in one quadrant's bias memory, allocated by the manual's
  modified fit-first descending (depthwise layers are treated like the others).
- Streaming: data read only by streaming layers comes through the FIFOs (model input) or
  rolling buffers the hardware manages, so it takes no region here.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from edgebuild.model.folding import fold_layers
from edgebuild.model.graph import INPUT
from edgebuild.targets.max7800x.hwlayer import (
    COPY_OPS,
    HwLayer,
    interleaved,
    manifest_index,
    pixels,
)
from edgebuild.targets.max7800x.limits import Problem
from edgebuild.targets.max7800x.overlap import clash

FIELDS = ("processors", "output_processors", "in_offset", "out_offset", "data_format",
          "write_gap", "read_gap", "bias_group", "streaming")
WORD = 4  # bytes per data memory word
WIDE_WORDS = 4  # words per value of a 32-bit output


@dataclass(frozen=True)
class KernelSlot:
    start: int  # first word, the same on every processor of the layer
    words: int  # words used in each processor


@dataclass(frozen=True)
class BiasSlot:
    group: int  # quadrant whose bias memory holds the values
    offset: int  # first byte
    length: int  # bytes (one per output channel)


@dataclass(frozen=True)
class LayerPlan:
    name: str
    members: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    processors: int
    output_processors: int
    in_offset: int
    out_offset: int
    data_format: str
    write_gap: int
    bias_group: int | None
    streaming: bool
    in_passes: int
    out_passes: int
    in_channels: int
    out_channels: int
    kernel: KernelSlot | None
    bias: BiasSlot | None
    given: frozenset[str] = frozenset()
    overwrites_input: bool = False  # writes over input it has read (edgebuild.targets.max7800x.overlap)
    read_gap: int = 0  # words skipped between input words (MAX78002)

    def to_json(self) -> dict:
        return {"name": self.name, "members": list(self.members), "op": self.op,
                "inputs": list(self.inputs), "processors": hexmap(self.processors),
                "output_processors": hexmap(self.output_processors),
                "in_offset": self.in_offset, "out_offset": self.out_offset,
                "data_format": self.data_format, "write_gap": self.write_gap,
                "bias_group": self.bias_group, "streaming": self.streaming,
                "in_passes": self.in_passes, "out_passes": self.out_passes,
                "in_channels": self.in_channels, "out_channels": self.out_channels,
                "overwrites_input": self.overwrites_input, "read_gap": self.read_gap,
                "kernel": None if self.kernel is None else {
                    "start": self.kernel.start, "words": self.kernel.words},
                "bias": None if self.bias is None else {
                    "group": self.bias.group, "offset": self.bias.offset,
                    "length": self.bias.length},
                "origin": {f: "given" if f in self.given else "auto" for f in FIELDS}}

    @classmethod
    def from_json(cls, data: dict) -> LayerPlan:
        kernel, bias = data["kernel"], data["bias"]
        return cls(data["name"], tuple(data["members"]), data["op"], tuple(data["inputs"]),
                   int(data["processors"], 16), int(data["output_processors"], 16),
                   data["in_offset"], data["out_offset"], data["data_format"],
                   data["write_gap"], data["bias_group"], data["streaming"], data["in_passes"],
                   data["out_passes"], data["in_channels"], data["out_channels"],
                   None if kernel is None else KernelSlot(kernel["start"], kernel["words"]),
                   None if bias is None else BiasSlot(bias["group"], bias["offset"],
                                                      bias["length"]),
                   frozenset(f for f, origin in data["origin"].items() if origin == "given"),
                   data["overwrites_input"], data["read_gap"])


@dataclass(frozen=True)
class Region:
    """The words of one tensor in one data memory instance: `count` entries of `width`
    bytes, `stride` bytes apart from byte `start`; needed from step `first` (the layer that
    writes it; -1 = loaded before the network runs, or a buffer's window kept from earlier
    inferences) to step `last` (its last reader; the number of layers for the model output
    and for a buffer's window)."""

    tensor: str
    instance: int
    start: int
    stride: int
    count: int
    width: int
    first: int
    last: int

    @property
    def end(self) -> int:
        return self.start + self.stride * (self.count - 1) + self.width

    def to_json(self) -> dict:
        return {"tensor": self.tensor, "instance": self.instance, "start": self.start,
                "end": self.end, "stride": self.stride, "count": self.count,
                "width": self.width, "first_step": self.first, "last_step": self.last}

    @classmethod
    def from_json(cls, data: dict) -> Region:
        return cls(data["tensor"], data["instance"], data["start"], data["stride"],
                   data["count"], data["width"], data["first_step"], data["last_step"])


@dataclass(frozen=True)
class Placement:
    device: str
    layers: tuple[LayerPlan, ...]
    data: tuple[Region, ...]
    instance_bytes: int
    kernel_words: tuple[int, ...]  # capacity of each processor's kernel memory
    processors_per_quadrant: int
    bias_bytes: int

    def layer(self, name: str) -> LayerPlan:
        return next(plan for plan in self.layers if plan.name == name)

    def kernel_map(self) -> list[tuple[int, str, int, int]]:
        """(processor, layer, start word, words) for every kernel slot."""
        return [(p, plan.name, plan.kernel.start, plan.kernel.words)
                for plan in self.layers if plan.kernel is not None
                for p in bits(plan.processors)]

    def bias_map(self) -> list[tuple[int, str, int, int]]:
        """(quadrant, layer, offset, length) for every bias slot, by quadrant and offset."""
        slots = [(plan.bias.group, plan.name, plan.bias.offset, plan.bias.length)
                 for plan in self.layers if plan.bias is not None]
        return sorted(slots, key=lambda slot: (slot[0], slot[2]))

    def to_json(self) -> dict:
        return {"device": self.device, "layers": [plan.to_json() for plan in self.layers],
                "data_memory": [region.to_json() for region in self.data],
                "kernel_memory": [{"processor": p, "layer": name, "start": start,
                                   "words": words} for p, name, start, words in
                                  self.kernel_map()],
                "bias_memory": [{"group": g, "layer": name, "offset": offset,
                                 "length": length} for g, name, offset, length in
                                self.bias_map()]}

    @classmethod
    def from_json(cls, data: dict) -> Placement:
        """placement.json (plan stage) back; the capacities come from the device profile,
        the kernel and bias maps from the layers."""
        from edgebuild.targets.max7800x import profile as devices

        profile = devices.profile(data["device"])
        return cls(data["device"], tuple(LayerPlan.from_json(p) for p in data["layers"]),
                   tuple(Region.from_json(r) for r in data["data_memory"]),
                   profile.data_memory.instance_bytes,
                   tuple(profile.kernel_memory.words_of(p) for p in range(profile.processors)),
                   profile.processors_per_quadrant, profile.bias_memory.bytes)

    @classmethod
    def load(cls, directory: Path) -> Placement:
        """The placement the `plan` stage wrote to `directory` (accelerator targets)."""
        return cls.from_json(json.loads((directory / "placement.json").read_text()))

    def to_manifest(self) -> dict[str, dict]:
        """This placement as a manifest `placement` section (every field pinned)."""
        out = {}
        for i, plan in enumerate(self.layers):
            entry = {"processors": hexmap(plan.processors),
                     "output_processors": hexmap(plan.output_processors),
                     "in_offset": plan.in_offset, "out_offset": plan.out_offset,
                     "write_gap": plan.write_gap}
            if plan.read_gap:
                entry["read_gap"] = plan.read_gap
            if i == 0:
                entry["data_format"] = plan.data_format
            if plan.bias is not None:
                entry["bias_group"] = plan.bias.group
            if plan.streaming:
                entry["streaming"] = True
            out[plan.name] = entry
        return out

    def text(self) -> str:
        """Processor table, then kernel, data and bias memory maps (for people)."""
        return "\n\n".join((self._table(), self._kernel_text(), self._data_text(),
                            self._bias_text()))

    def _table(self) -> str:
        rows = [("layer", "op", "processors", "output", "in_offset", "out_offset", "gap",
                 "passes", "kernel words", "bias")]
        for plan in self.layers:
            kernel = "-" if plan.kernel is None else \
                f"{plan.kernel.start}..{plan.kernel.start + plan.kernel.words - 1}"
            bias = "-" if plan.bias is None else f"q{plan.bias.group} " + \
                f"{plan.bias.offset}..{plan.bias.offset + plan.bias.length - 1}"
            rows.append((plan.name, plan.op, _spans(bits(plan.processors)),
                         _spans(bits(plan.output_processors)), f"0x{plan.in_offset:04x}",
                         f"0x{plan.out_offset:04x}",
                         str(plan.write_gap) + (f" r{plan.read_gap}" if plan.read_gap else ""),
                         f"{plan.in_passes}/{plan.out_passes}", kernel, bias))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                 for row in rows]
        return f"placement on {self.device}\n" + "\n".join(lines)

    def _kernel_text(self) -> str:
        slots: dict[int, list[str]] = {}
        for p, name, start, words in self.kernel_map():
            slots.setdefault(p, []).append(f"{name} {start}..{start + words - 1}")
        lines = ["kernel memory (words per processor)"]
        quadrant = None
        for processors, listing in _runs(slots):
            q = processors[0] // self.processors_per_quadrant
            if q != quadrant:
                lines.append(f"  quadrant {q}")
                quadrant = q
            label = "processor" if len(processors) == 1 else "processors"
            lines.append(f"    {label} {_spans(processors)} "
                         f"(of {self.kernel_words[processors[0]]}): {', '.join(listing)}")
        return "\n".join(lines)

    def _data_text(self) -> str:
        lines = [f"data memory ({self.instance_bytes} bytes per instance)"]
        for instance in sorted({r.instance for r in self.data}):
            lines.append(f"  instance {instance}")
            for r in (r for r in self.data if r.instance == instance):
                gap = "" if r.stride == r.width else f", every {r.stride} bytes"
                last = "end" if r.last >= len(self.layers) else str(r.last)
                lines.append(f"    {_bytes(r.start, r.end)} {r.tensor} "
                             f"(steps {r.first}..{last}{gap})")
        overwriting = [plan.name for plan in self.layers if plan.overwrites_input]
        if overwriting:
            lines.append(f"  written over input already read: {', '.join(overwriting)}")
        return "\n".join(lines)

    def _bias_text(self) -> str:
        lines = [f"bias memory ({self.bias_bytes} bytes per quadrant)"]
        for group in sorted({g for g, *_ in self.bias_map()}):
            listing = ", ".join(f"{name} {offset}..{offset + length - 1}" for g, name, offset,
                                length in self.bias_map() if g == group)
            lines.append(f"  quadrant {group}: {listing}")
        return "\n".join(lines)


# --- small helpers ------------------------------------------------------------------------

def bits(mask: int) -> list[int]:
    """The processors of a map, lowest first."""
    return [p for p in range(mask.bit_length()) if mask >> p & 1]


def mask(processors) -> int:
    out = 0
    for p in processors:
        out |= 1 << p
    return out


def hexmap(value: int) -> str:
    return f"0x{value:016x}"


def needed(channels: int, profile) -> int:
    """Processors that read `channels` channels (the manual's multi-pass rule)."""
    passes = math.ceil(channels / profile.processors)
    if passes == 1:
        return channels
    group = profile.processors_per_memory
    return math.ceil(math.ceil(channels / passes) / group) * group


def _first(count: int) -> int:
    return (1 << count) - 1


def _spans(processors: list[int]) -> str:
    """`0-3, 8` for [0, 1, 2, 3, 8]."""
    runs: list[list[int]] = []
    for p in processors:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _runs(slots: dict[int, list[str]]) -> list[tuple[list[int], list[str]]]:
    """Consecutive processors with the same kernel slots, grouped."""
    runs: list[tuple[list[int], list[str]]] = []
    for p in sorted(slots):
        if runs and runs[-1][1] == slots[p] and runs[-1][0][-1] == p - 1:
            runs[-1][0].append(p)
        else:
            runs.append(([p], slots[p]))
    return runs


def _bytes(start: int, end: int) -> str:
    return f"0x{start:04x}..0x{end - 1:04x}"


# --- resolve ------------------------------------------------------------------------------

def resolve(hw_layers: tuple[HwLayer, ...], manifest, profile
            ) -> tuple[Placement | None, list[Problem]]:
    """The complete placement of `hw_layers` on `profile`, or every problem found."""
    planner = _Planner(tuple(hw_layers), manifest, profile)
    return planner.run()


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


class _Planner:
    """The state of one resolve: the hardware layers, the user's entries, every problem."""

    def __init__(self, layers: tuple[HwLayer, ...], manifest, profile):
        self.layers, self.manifest, self.profile = layers, manifest, profile
        self.step = {layer.name: i for i, layer in enumerate(layers)}
        self.index = manifest_index(manifest.model.layers)
        self.problems: list[Problem] = []
        self.entries = self._entries()

    # paths and problems

    def given(self, name: str, key: str):
        entry = self.entries.get(name)
        if entry is None or key not in entry.model_fields_set:
            return None
        return getattr(entry, key)

    def path(self, layer: HwLayer, key: str | None = None) -> tuple:
        """The user's field when given, else the manifest layer."""
        if key is not None and self.given(layer.name, key) is not None:
            return ("placement", layer.name, key)
        return ("model", "layers", self.index[layer.anchor])

    def problem(self, path: tuple, message: str) -> None:
        self.problems.append(Problem(path, message))

    def run(self) -> tuple[Placement | None, list[Problem]]:
        if not self.layers:
            return None, [Problem(("model", "layers"), "the model has no hardware layer")]
        self._fields()
        before = len(self.problems)
        self._processors()
        if len(self.problems) > before:  # offsets and memories follow from the processors
            return None, self.problems
        self._data_memory()
        self._kernel_memory()
        self._bias_memory()
        if self.problems:
            return None, self.problems
        return self._placement(), []

    # placement keys

    def _entries(self) -> dict:
        hw = {layer.name for layer in self.layers}
        owner = {m: layer.name for layer in self.layers for m in layer.members}
        entries = {}
        for key, entry in self.manifest.placement.items():
            if key in hw:
                entries[key] = entry
            else:
                self.problem(("placement", key), self._stray_key(key, owner))
        return entries

    def _stray_key(self, key: str, owner: dict[str, str]) -> str:
        layers = {layer.name: layer for layer in self.manifest.model.layers}
        _, alias = fold_layers(self.manifest.model.layers)
        if key in owner:
            why = {"flatten": "the hardware flattens inside the linear layer",
                   "add": "the element-wise add runs in-flight in the convolution"}.get(
                layers[key].op, "it is not a hardware layer by itself")
            return (f"placement key {key!r} names a layer that is part of hardware layer "
                    f"{owner[key]!r} ({why}); place {owner[key]!r} instead")
        if key in alias:
            target = alias[key]
            into = owner.get(target, target)
            what = "removed for inference" if layers[key].op == "dropout" else \
                f"folded into {into!r}"
            return f"placement key {key!r} names a {layers[key].op} layer, which is {what}"
        if key in layers:
            return f"placement key {key!r} names a layer that needs no hardware layer"
        names = [layer.name for layer in self.layers]
        hint = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
        return (f"placement key {key!r} names no layer" +
                (f"; did you mean {hint[0]!r}?" if hint else "") +
                f" (hardware layers: {', '.join(names)})")

    def _fields(self) -> None:
        for i, layer in enumerate(self.layers):
            if i and self.given(layer.name, "data_format") is not None:
                self.problem(("placement", layer.name, "data_format"),
                             f"layer {layer.name!r}: data_format applies to the first layer "
                             f"only ({self.layers[0].name!r}); every other layer reads HWC")
            if not layer.has_bias and self.given(layer.name, "bias_group") is not None:
                self.problem(("placement", layer.name, "bias_group"),
                             f"layer {layer.name!r} has no bias; remove bias_group")

    def data_format(self) -> str:
        return self.given(self.layers[0].name, "data_format") or "HWC"

    # processors

    def _processors(self) -> None:
        self.procs: dict[str, int] = {}
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
        if (layer.op in COPY_OPS or layer.op == "add") and out is not None:
            return out
        if layer.concatenates:
            return self._concat_default(layer)
        if layer.eltwise_operands:
            given = [self.given(s, "output_processors") for s in layer.inputs]
            known = [m for m in given if m is not None]
            return known[0] if known else _first(needed(layer.in_channels, self.profile))
        return None

    def multipass(self, layer: HwLayer) -> bool:
        """Reads a concatenation of more channels than there are processors: in passes,
        one input per pass, interleaved in memory (see edgebuild.targets.max7800x.hwlayer)."""
        return interleaved(layer, self.profile.processors) and not layer.eltwise_operands

    def _concat_default(self, layer: HwLayer) -> int:
        """Adjacent processors, placed so that a given input keeps its processors; in
        several passes, the processors of the first input whose are given."""
        if self.multipass(layer):
            given = [self.given(s, "output_processors") for s in layer.inputs]
            known = [m for m in given if m is not None]
            count = needed(layer.in_channels, self.profile)
            fits = [m for m in known if m.bit_count() == count]
            return fits[0] if fits else _first(count)
        start = 0
        for slot, source in enumerate(layer.inputs):
            given = self.given(source, "output_processors")
            if given is not None:
                before = sum(self.channels[s] for s in layer.inputs[:slot])
                start = max(0, bits(given)[0] - before)
                break
        return _first(layer.in_channels) << start

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
        return _first(needed(channels, self.profile))

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
        if layer.op in COPY_OPS or layer.op == "add":
            return self.procs[layer.name]
        count = needed(layer.out_channels, self.profile)
        if layer is self.layers[-1]:
            return _first(count)  # the network description's default output map
        return self._beside(layer, count)

    def _beside(self, layer: HwLayer, count: int) -> int:
        """`count` adjacent processors on data memory instances the layer's inputs do not
        use, when there are enough: the output then never competes with its input for
        space (as the manual's examples place outputs), else processors 0, 1, ..."""
        busy = {self.profile.memory_of(p) for source in layer.inputs
                for p in bits(self.outs[source])}
        group = self.profile.processors_per_memory
        for start in range(0, self.profile.processors - count + 1, group):
            candidate = _first(count) << start
            if not busy & {self.profile.memory_of(p) for p in bits(candidate)}:
                return candidate
        return _first(count)

    # processor checks

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
        for key, value in (("processors", self.procs[layer.name]),
                           ("output_processors", self.outs[layer.name])):
            if value >> limit:
                self.problem(self.path(layer, key), f"layer {layer.name!r}: {key} "
                             f"{hexmap(value)} names processor {value.bit_length() - 1}, but "
                             f"{self.profile.name} has processors 0..{limit - 1}")

    def _count(self, layer: HwLayer, key: str, channels: int, what: str) -> None:
        value = self.given(layer.name, key)
        if value is None:
            return
        chw = key == "processors" and layer is self.layers[0] and self.data_format() == "CHW"
        need = channels if chw else needed(channels, self.profile)
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
        self.problem(path, f"layer {layer.name!r} reads {source!r} on processors "
                           f"{hexmap(want)}, but {what} on {hexmap(have)}")

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
                             f"but {source!r} is on {_spans(ps)} (after processor {last})")
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
        if layer.op in COPY_OPS and self.outs[layer.name] != self.procs[layer.name]:
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

    # data memory

    def _data_memory(self) -> None:
        self.tensors = self._tensors()
        self._interleave()
        groups = self._groups()
        self.base: dict[str, int] = {}
        self.overlapped: set[str] = set()  # layers that write over their own input
        self.placed: list[tuple[str, list[Region]]] = []
        for root in sorted(groups, key=lambda r: self._first(groups[r])):
            self._place_group(root, groups[root])

    def _tensors(self) -> dict[str, _Tensor]:
        chw = self.data_format() == "CHW"
        tensors = {INPUT: _Tensor(INPUT, tuple(self.manifest.model.input), -1, chw=chw)}
        for i, layer in enumerate(self.layers):
            tensors[layer.name] = _Tensor(layer.name, layer.out_shape, i, wide=layer.wide,
                                          persistent=layer.persistent)
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
            given = self.given(layer.name, "write_gap")
            gap = self.tensors[layer.name].gap
            if given is not None and given != gap:
                why = (f"it is read interleaved with {gap} other tensor{'s' * (gap > 1)} "
                       "(an element-wise operand, or one pass of a concatenation)"
                       if gap else "its readers need plain (not interleaved) data")
                self.problem(("placement", layer.name, "write_gap"), f"layer {layer.name!r}: "
                             f"write_gap {given} is wrong; {why}, so write_gap is {gap}")
        self.read_gaps = {layer.name: self._read_gap(layer) for layer in self.layers}

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

    def _first(self, members: list[_Tensor]) -> int:
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
        written later may reuse bytes that are free until then."""
        return [r for t in members for r in self._regions(
            t, base, -1 if t.persistent else t.producer, self._last(t))]

    def _place_group(self, root: str, members: list[_Tensor]) -> None:
        fixed = self._fixed_base(members)
        alive = self._alive(self._first(members), max(self._last(t) for t in members))
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

    def _fixed_base(self, members: list[_Tensor]) -> tuple[int, tuple] | None:
        """The base the user's out_offset / in_offset give (mismatches are problems)."""
        found: tuple[int, tuple, str] | None = None
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

    def _offsets_given(self, tensor: _Tensor):
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

    def _check_regions(self, regions: list[Region], alive: list[Region], path: tuple) -> None:
        size = self.profile.data_memory.instance_bytes
        for region in regions:
            if region.end > size:
                self.problem(path, f"layer {self._writer(region)!r}: {region.tensor!r} needs "
                             f"{_bytes(region.start, region.end)} in data memory instance "
                             f"{region.instance}, beyond its {size} bytes")
                return
            for other in alive:
                if not _clash(region, other):
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
                f"{_bytes(region.start, region.end)} in data memory instance {region.instance} "
                f"overwrites {owner} at {_bytes(other.start, other.end)} ({until})")

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
            if all(r.end <= size for r in regions) and not any(
                    _clash(r, other) for r in regions for other in alive):
                return base
        self._out_of_memory(members, probe, alive)
        return None

    def _ping_pong(self, members: list[_Tensor]) -> int:
        first = self._first(members)
        if first < 0:
            return 0
        half = self.profile.data_memory.instance_bytes // 2 // WORD * WORD
        source = self.layers[first].inputs[0]
        root, delta = self._root(source)
        reads = self.base.get(root, 0) + delta
        return half if reads < half else 0

    def _out_of_memory(self, members, probe: list[Region], alive: list[Region]) -> None:
        size = self.profile.data_memory.instance_bytes
        need = max((r.end for r in probe), default=0)
        instances = sorted({r.instance for r in probe})
        live = sorted({(r.tensor, r.instance, r.start, r.end) for r in alive
                       if r.instance in instances}, key=lambda t: (t[1], t[2]))
        listing = "; ".join(f"{t!r} {_bytes(s, e)} in instance {i}" for t, i, s, e in live)
        writer = self.layers[max(self._first(members), 0)]
        names = ", ".join(repr(t.name) for t in members)
        why = (f"more than an instance holds ({size} bytes)" if need > size else
               f"but no free range of the {size}-byte instance is large enough"
               + (f" (still needed: {listing})" if listing else ""))
        self.problem(self.path(writer), f"layer {writer.name!r}: data memory runs out: "
                     f"{names} need{'s' * (len(members) == 1)} {need} bytes in data memory "
                     f"instance{'s' * (len(instances) > 1)} {_spans(instances)}, {why}")

    # kernel memory

    def _kernel_memory(self) -> None:
        self.kernels: dict[str, KernelSlot] = {}
        free = [0] * self.profile.processors
        multiple = self.profile.kernel_memory.start_multiple
        for layer in self.layers:
            if not layer.has_weights:
                continue
            processors = bits(self.procs[layer.name])
            words = self.kernel_words(layer)
            start = math.ceil(max(free[p] for p in processors) / multiple) * multiple
            self.kernels[layer.name] = KernelSlot(start, words)
            if self._kernel_fits(layer, processors, start, words):
                for p in processors:  # a layer that does not fit leaves room to the next
                    free[p] = start + words

    def kernel_words(self, layer: HwLayer) -> int:
        """Words per processor: kernels of `elements` weights of `bits` bits, packed
        word_bits // (elements * bits) to a word (a wider kernel takes several words)."""
        word_bits = self.profile.kernel_memory.word_bits
        kernel_bits = layer.kernel_elements * (layer.weight_bits or 8)
        per_word = max(1, word_bits // kernel_bits)
        words_each = math.ceil(kernel_bits / word_bits)
        passes = math.ceil(layer.in_channels / self.procs[layer.name].bit_count())
        kernels = passes if layer.depthwise else layer.out_channels * passes
        if layer.flatten:
            kernels *= pixels(layer.in_shape)
        return math.ceil(kernels / per_word) * words_each

    def _kernel_fits(self, layer: HwLayer, processors: list[int], start: int,
                     words: int) -> bool:
        memory = self.profile.kernel_memory
        short = [p for p in processors if start + words > memory.words_of(p)]
        if short:
            p = short[0]
            self.problem(self.path(layer), f"layer {layer.name!r}: kernel memory runs out on "
                         f"processor {p}: needs words {start}..{start + words - 1} ({words} "
                         f"words from start word {start}), but processor {p} has "
                         f"{memory.words_of(p)} words on {self.profile.name}"
                         + (f" (also processors {_spans(short[1:])})" if len(short) > 1 else ""))
        return not short

    # bias memory

    def _bias_memory(self) -> None:
        """The manual's modified fit-first descending: layers pinned to one quadrant first,
        then the largest first, each into the allowed quadrant with the most free bytes."""
        self.biases: dict[str, BiasSlot] = {}
        available = sorted({self.profile.quadrant_of(p) for layer in self.layers
                            for p in bits(self.procs[layer.name])})
        self.bias_used = dict.fromkeys(range(self.profile.quadrants), 0)
        pinned, rest = [], []
        for i, layer in enumerate(self.layers):
            if not layer.has_bias:
                continue
            allowed = self._bias_groups(layer, available)
            if allowed is None:
                continue
            (pinned if len(allowed) == 1 else rest).append((layer, allowed, i))
        rest.sort(key=lambda item: (-item[0].out_channels, item[2]))
        groups = {layer.name: self._bias_group(layer, allowed) for layer, allowed, _ in
                  pinned + rest}
        self._bias_offsets(groups)

    def _bias_groups(self, layer: HwLayer, available: list[int]) -> list[int] | None:
        given = self.given(layer.name, "bias_group")
        if given is None:
            return available
        groups = [given] if isinstance(given, int) else list(given)
        given = groups[0] if isinstance(given, int) else groups
        wrong = [g for g in groups if g not in available]
        if wrong or not groups:
            self.problem(("placement", layer.name, "bias_group"), f"layer {layer.name!r}: "
                         f"bias_group {given} must name quadrants the network uses "
                         f"(available: {_listing(available)})")
            return None
        return groups

    def _bias_group(self, layer: HwLayer, allowed: list[int]) -> int | None:
        size, length = self.profile.bias_memory.bytes, layer.out_channels
        best = min(allowed, key=lambda q: (self.bias_used[q], q))
        if self.bias_used[best] + length > size:
            free = ", ".join(f"{size - self.bias_used[q]} in quadrant {q}" for q in allowed)
            self.problem(self.path(layer, "bias_group"), f"layer {layer.name!r}: bias memory "
                         f"runs out: {length} bias bytes do not fit (free: {free}; "
                         f"{self.profile.name} has {size} bytes per quadrant)")
            return None
        self.bias_used[best] += length
        return best

    def _bias_offsets(self, groups: dict[str, int | None]) -> None:
        """Offsets in layer order within each quadrant: they depend only on the chosen
        quadrants, so pinning those (`bias_group`) reproduces the whole bias map."""
        used = dict.fromkeys(range(self.profile.quadrants), 0)
        for layer in self.layers:
            group = groups.get(layer.name)
            if group is not None:
                self.biases[layer.name] = BiasSlot(group, used[group], layer.out_channels)
                used[group] += layer.out_channels

    # result

    def _placement(self) -> Placement:
        plans = tuple(self._plan(i, layer) for i, layer in enumerate(self.layers))
        data = tuple(sorted((r for _, regions in self.placed for r in regions),
                            key=lambda r: (r.instance, r.start, r.first)))
        memory = self.profile.kernel_memory
        return Placement(self.profile.name, plans, data, self.profile.data_memory.instance_bytes,
                         tuple(memory.words_of(p) for p in range(self.profile.processors)),
                         self.profile.processors_per_quadrant, self.profile.bias_memory.bytes)

    def offset(self, tensor: str) -> int:
        root, delta = self._root(tensor)
        return self.base[root] + delta

    def _plan(self, i: int, layer: HwLayer) -> LayerPlan:
        entry = self.entries.get(layer.name)
        bias = self.biases.get(layer.name)
        procs, outs = self.procs[layer.name], self.outs[layer.name]
        return LayerPlan(
            name=layer.name, members=layer.members, op=layer.op, inputs=layer.inputs,
            processors=procs, output_processors=outs,
            in_offset=self.offset(layer.name) + WORD if layer.persistent else
            self.offset(layer.inputs[0]), out_offset=self.offset(layer.name),
            data_format=self.data_format() if i == 0 else "HWC",
            write_gap=self.tensors[layer.name].gap,
            bias_group=None if bias is None else bias.group,
            streaming=bool(self.given(layer.name, "streaming")),
            in_passes=math.ceil(layer.in_channels / procs.bit_count()),
            out_passes=math.ceil(layer.out_channels / outs.bit_count()),
            in_channels=layer.in_channels, out_channels=layer.out_channels,
            kernel=self.kernels.get(layer.name), bias=bias,
            given=frozenset(entry.model_fields_set if entry is not None else ()),
            overwrites_input=layer.name in self.overlapped,
            read_gap=self.read_gaps[layer.name])


def _listing(values) -> str:
    return ", ".join(str(v) for v in values)


def _clash(a: Region, b: Region) -> bool:
    """Same instance, needed at a common step, sharing a byte."""
    return (a.instance == b.instance and max(a.first, b.first) <= min(a.last, b.last)
            and collide(a, b))


def collide(a: Region, b: Region) -> bool:
    """Whether two word progressions in one instance share a byte (exact)."""
    if a.end <= b.start or b.end <= a.start:
        return False
    if a.stride == a.width or b.stride == b.width:
        solid, gapped = (a, b) if a.stride == a.width else (b, a)
        return _hits_range(gapped, solid.start, solid.end)
    if a.stride == b.stride:
        return _same_stride(a, b)
    words_a = {a.start + a.stride * k + j for k in range(a.count) for j in range(a.width)}
    return any(b.start + b.stride * k + j in words_a
               for k in range(b.count) for j in range(b.width))


def _hits_range(region: Region, start: int, end: int) -> bool:
    """Whether some entry of `region` overlaps the byte range [start, end)."""
    k = max(0, -(-(start - region.start - region.width + 1) // region.stride))
    return k < region.count and region.start + region.stride * k < end


def _same_stride(a: Region, b: Region) -> bool:
    """Entries a_i = a.start + s*i and b_j = b.start + s*j overlap when
    a.start - b.start + s*(i - j) lies in (-a.width, b.width)."""
    s, d = a.stride, a.start - b.start
    for t in range(-a.width + 1, b.width):
        if (t - d) % s == 0:
            k = (t - d) // s  # i - j
            if -(b.count - 1) <= k <= a.count - 1:
                return True
    return False
