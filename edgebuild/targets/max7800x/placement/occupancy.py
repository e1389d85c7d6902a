"""How much of each accelerator resource a placement uses: processors, data memory (per
instance), kernel memory and bias memory, each against the device's capacity.

A model of a few kilobytes on a device of half a megabyte uses well under 1% of the data
memory; a map drawn to scale then looks empty. These figures let the report say how much
is used and draw the used part at a readable scale.

Data memory bytes count every byte some tensor occupies at some step (the union over the
whole inference: a byte two tensors share at different steps counts once); an
interleaved (`write_gap`) tensor counts only its own words, not the gaps between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.targets.max7800x.placement.maps import bits
from edgebuild.targets.max7800x.placement.records import Placement
from edgebuild.targets.max7800x.placement.regions import Region

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.records import Profile


@dataclass(frozen=True)
class Occupancy:
    """Used against available, per resource (`data_by_instance`: bytes used in each data
    memory instance, all instances listed)."""

    processors_used: int
    processors: int
    quadrants: int
    data_by_instance: tuple[int, ...]
    instance_bytes: int
    kernel_words_used: int
    kernel_words: int
    bias_bytes_used: int
    bias_bytes: int

    @property
    def data_used(self) -> int:
        return sum(self.data_by_instance)

    @property
    def data_bytes(self) -> int:
        return self.instance_bytes * len(self.data_by_instance)

    def to_json(self) -> dict[str, Any]:
        return {"processors_used": self.processors_used, "processors": self.processors,
                "quadrants": self.quadrants,
                "data_by_instance": list(self.data_by_instance),
                "instance_bytes": self.instance_bytes,
                "kernel_words_used": self.kernel_words_used, "kernel_words": self.kernel_words,
                "bias_bytes_used": self.bias_bytes_used, "bias_bytes": self.bias_bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Occupancy:
        return cls(**{**data, "data_by_instance": tuple(data["data_by_instance"])})


def occupancy(placement: Placement, profile: Profile) -> Occupancy:
    """The resources `placement` uses of its device's (`profile`). A processor is used
    when some layer reads its input through it (and so holds kernels there); where
    outputs are written shows in the data memory."""
    used = 0
    for plan in placement.layers:
        used |= plan.processors
    return Occupancy(
        len(bits(used)), profile.processors, profile.quadrants,
        tuple(_bytes_used([r for r in placement.data if r.instance == i])
              for i in range(profile.data_memory.instances)),
        placement.instance_bytes,
        sum(words for _, _, _, words in placement.kernel_map()), sum(placement.kernel_words),
        sum(length for _, _, _, length in placement.bias_map()),
        placement.bias_bytes * profile.bias_memory.instances)


def _bytes_used(regions: list[Region]) -> int:
    """Bytes covered by the regions' entries (the union of their byte ranges)."""
    spans = sorted((r.start + r.stride * k, r.start + r.stride * k + r.width)
                   for r in regions for k in range(r.count))
    total, end = 0, 0
    for start, stop in spans:
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total
