"""Regions of data memory: the words one tensor takes in one memory instance, when it is
needed, and whether two regions share a byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class RegionJSON(TypedDict):
    """A region in placement.json (`data_memory`)."""

    tensor: str
    instance: int
    start: int
    end: int
    stride: int
    count: int
    width: int
    first_step: int
    last_step: int


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

    def to_json(self) -> RegionJSON:
        return {"tensor": self.tensor, "instance": self.instance, "start": self.start,
                "end": self.end, "stride": self.stride, "count": self.count,
                "width": self.width, "first_step": self.first, "last_step": self.last}

    @classmethod
    def from_json(cls, data: RegionJSON) -> Region:
        return cls(data["tensor"], data["instance"], data["start"], data["stride"],
                   data["count"], data["width"], data["first_step"], data["last_step"])


def clash_in(a: Region, b: Region) -> bool:
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


def byte_range(start: int, end: int) -> str:
    return f"0x{start:04x}..0x{end - 1:04x}"
