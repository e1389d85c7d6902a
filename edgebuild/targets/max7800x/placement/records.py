"""The records of a resolved placement: per hardware layer (`LayerPlan`, with its kernel
and bias memory slots) and for the whole model (`Placement`: also the data memory regions),
as JSON and as a manifest `placement` section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from edgebuild.core import boundedjson
from edgebuild.targets.max7800x.placement.maps import bits, hexmap
from edgebuild.targets.max7800x.placement.regions import Region, RegionJSON
from edgebuild.targets.max7800x.placement.text import maps_text

_SLOTS = {"kernels": "kernel", "bias": "bias"}
FIELDS = ("processors", "output_processors", "in_offset", "out_offset", "data_format",
          "write_gap", "read_gap", "bias_group", "streaming")


# placement.json (`Placement.to_json`): what the plan stage writes and export_network reads.

class KernelSlotJSON(TypedDict):
    start: int
    words: int


class BiasSlotJSON(TypedDict):
    group: int
    offset: int
    length: int
    lead: NotRequired[int]
    parts: NotRequired[list[list[int]]]


class LayerPlanJSON(TypedDict):
    """One hardware layer (`layers`): processor maps as 64-bit hex strings."""

    name: str
    members: list[str]
    op: str
    inputs: list[str]
    processors: str
    output_processors: str
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
    overwrites_input: bool
    read_gap: int
    kernel: KernelSlotJSON | None
    bias: BiasSlotJSON | None
    origin: dict[str, str]  # each of FIELDS: "given" or "auto"


class KernelMapJSON(TypedDict):
    processor: int
    layer: str
    start: int
    words: int


class BiasMapJSON(TypedDict):
    group: int
    layer: str
    offset: int
    length: int


class PlacementJSON(TypedDict):
    device: str
    layers: list[LayerPlanJSON]
    data_memory: list[RegionJSON]
    kernel_memory: list[KernelMapJSON]
    bias_memory: list[BiasMapJSON]
    weights_known: NotRequired[bool]


class EntryJSON(TypedDict):
    """One layer of a manifest `placement` section (`Placement.to_manifest`)."""

    processors: str
    output_processors: str
    in_offset: int
    out_offset: int
    write_gap: int
    read_gap: NotRequired[int]
    data_format: NotRequired[str]
    bias_group: NotRequired[int]
    streaming: NotRequired[bool]


@dataclass(frozen=True)
class KernelSlot:
    start: int  # first word, the same on every processor of the layer
    words: int  # words used in each processor


@dataclass(frozen=True)
class BiasSlot:
    group: int  # quadrant whose bias memory holds the values
    offset: int  # first byte
    length: int  # bytes taken: the lead, then one per output channel
    lead: int = 0  # bytes before the first value (lead bytes, MAX78000's streaming gap)
    # a depthwise layer: (quadrant, offset, bytes) in every quadrant it reads with (the
    # first is group/offset/length)
    parts: tuple[tuple[int, int, int], ...] = ()

    def quadrants(self) -> tuple[tuple[int, int, int], ...]:
        """(quadrant, offset, bytes) of every part of the slot."""
        return self.parts or ((self.group, self.offset, self.length),)

    def to_json(self) -> BiasSlotJSON:
        out: BiasSlotJSON = {"group": self.group, "offset": self.offset,
                             "length": self.length}
        if self.lead:
            out["lead"] = self.lead
        if self.parts:
            out["parts"] = [list(part) for part in self.parts]
        return out

    @classmethod
    def from_json(cls, data: BiasSlotJSON) -> BiasSlot:
        return cls(data["group"], data["offset"], data["length"], data.get("lead", 0),
                   tuple((q, o, n) for q, o, n in data.get("parts", ())))


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

    def to_json(self) -> LayerPlanJSON:
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
                "bias": None if self.bias is None else self.bias.to_json(),
                "origin": {f: "given" if f in self.given else "auto" for f in FIELDS}}

    @classmethod
    def from_json(cls, data: LayerPlanJSON) -> LayerPlan:
        kernel, bias = data["kernel"], data["bias"]
        return cls(data["name"], tuple(data["members"]), data["op"], tuple(data["inputs"]),
                   int(data["processors"], 16), int(data["output_processors"], 16),
                   data["in_offset"], data["out_offset"], data["data_format"],
                   data["write_gap"], data["bias_group"], data["streaming"], data["in_passes"],
                   data["out_passes"], data["in_channels"], data["out_channels"],
                   None if kernel is None else KernelSlot(kernel["start"], kernel["words"]),
                   None if bias is None else BiasSlot.from_json(bias),
                   frozenset(f for f, origin in data["origin"].items() if origin == "given"),
                   data["overwrites_input"], data["read_gap"])


@dataclass(frozen=True)
class Placement:
    device: str
    layers: tuple[LayerPlan, ...]
    data: tuple[Region, ...]
    instance_bytes: int
    kernel_words: tuple[int, ...]  # capacity of each processor's kernel memory
    processors_per_quadrant: int
    bias_bytes: int
    weights_known: bool = False  # placed with the weight values (placement.sharing)

    def layer(self, name: str) -> LayerPlan:
        return next(plan for plan in self.layers if plan.name == name)

    def kernel_map(self) -> list[tuple[int, str, int, int]]:
        """(processor, layer, start word, words) for every kernel slot; a slot layers share
        (equal weights stored once) once, under its first layer's name."""
        seen: dict[tuple[int, int, int], str] = {}
        for plan in self.layers:
            if plan.kernel is not None:
                for p in bits(plan.processors):
                    seen.setdefault((p, plan.kernel.start, plan.kernel.words), plan.name)
        return [(p, name, start, words) for (p, start, words), name in seen.items()]

    def bias_map(self) -> list[tuple[int, str, int, int]]:
        """(quadrant, layer, offset, length) for every bias slot (each part of a depthwise
        layer's), by quadrant and offset; a slot layers share once, under its first
        layer's name."""
        seen: dict[tuple[int, int, int], str] = {}
        for plan in self.layers:
            for part in plan.bias.quadrants() if plan.bias is not None else ():
                seen.setdefault(part, plan.name)
        return sorted(((g, name, offset, length) for (g, offset, length), name in seen.items()),
                      key=lambda slot: (slot[0], slot[2]))

    def shared(self) -> list[tuple[str, str, str]]:
        """(layer, "kernels" or "bias", the earlier layer whose slot it uses) for every
        layer running with another layer's stored weights."""
        found = []
        for i, plan in enumerate(self.layers):
            for what, slot in (("kernels", plan.kernel), ("bias", plan.bias)):
                first = next((p.name for p in self.layers[:i]
                              if slot is not None and getattr(p, _SLOTS[what]) == slot
                              and (what == "bias" or p.processors == plan.processors)), None)
                if first is not None:
                    found.append((plan.name, what, first))
        return found

    def to_json(self) -> PlacementJSON:
        return {"device": self.device, "layers": [plan.to_json() for plan in self.layers],
                "data_memory": [region.to_json() for region in self.data],
                "kernel_memory": [{"processor": p, "layer": name, "start": start,
                                   "words": words} for p, name, start, words in
                                  self.kernel_map()],
                "bias_memory": [{"group": g, "layer": name, "offset": offset,
                                 "length": length} for g, name, offset, length in
                                self.bias_map()],
                "weights_known": self.weights_known}

    @classmethod
    def from_json(cls, data: PlacementJSON) -> Placement:
        """placement.json (plan stage) back; the capacities come from the device profile,
        the kernel and bias maps from the layers."""
        from edgebuild.targets.max7800x import profile as devices

        profile = devices.profile(data["device"])
        return cls(data["device"], tuple(LayerPlan.from_json(p) for p in data["layers"]),
                   tuple(Region.from_json(r) for r in data["data_memory"]),
                   profile.data_memory.instance_bytes,
                   tuple(profile.kernel_memory.words_of(p) for p in range(profile.processors)),
                   profile.processors_per_quadrant, profile.bias_memory.bytes,
                   data.get("weights_known", False))

    @classmethod
    def load(cls, directory: Path) -> Placement:
        """The placement the `plan` stage wrote to `directory` (accelerator targets)."""
        return cls.from_json(boundedjson.read(directory / "placement.json"))

    def to_manifest(self) -> dict[str, EntryJSON]:
        """This placement as a manifest `placement` section (every field pinned)."""
        out = {}
        for i, plan in enumerate(self.layers):
            entry: EntryJSON = {"processors": hexmap(plan.processors),
                                "output_processors": hexmap(plan.output_processors),
                                "in_offset": plan.in_offset, "out_offset": plan.out_offset,
                                "write_gap": plan.write_gap}
            if plan.read_gap:
                entry["read_gap"] = plan.read_gap
            if i == 0:
                entry["data_format"] = plan.data_format
            if plan.bias is not None and not plan.bias.parts:  # depthwise: every quadrant
                entry["bias_group"] = plan.bias.group
            if plan.streaming:
                entry["streaming"] = True
            out[plan.name] = entry
        return out

    def text(self) -> str:
        """Processor table, then kernel, data and bias memory maps (for people)."""
        return maps_text(self)
