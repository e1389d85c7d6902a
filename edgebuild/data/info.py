"""What the `data` stage says about the arrays it wrote (`data.json`, schema
schemas/artifacts/data.v1.schema.json): class names, sample shape, samples per split and
how raw values were mapped onto the int8 inputs (see pipeline/stages/data.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson


@dataclass(frozen=True)
class Normalization:
    """x' = (x - offset) / scale, per channel or one value for all: training statistics
    (minmax, standard), offset 0 and scale 1 (none), or the manifest's values (scale)."""

    method: str  # "minmax" | "standard" | "none" | "scale"
    offset: tuple[float, ...]
    scale: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "offset": list(self.offset), "scale": list(self.scale)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Normalization:
        return cls(data["method"], tuple(data["offset"]), tuple(data["scale"]))


@dataclass(frozen=True)
class DataInfo:
    classes: tuple[str, ...]
    sample_shape: tuple[int, ...]
    counts: dict[str, int]  # split ("train", "val", "test") -> samples
    input_scale: float  # real value of one int8 step
    normalize: Normalization

    def to_json(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "sample_shape": list(self.sample_shape),
                "counts": dict(self.counts), "input_scale": self.input_scale,
                "normalize": self.normalize.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DataInfo:
        return cls(tuple(data["classes"]), tuple(data["sample_shape"]), dict(data["counts"]),
                   data["input_scale"], Normalization.from_json(data["normalize"]))

    @classmethod
    def load(cls, directory: Path) -> DataInfo:
        """What the `data` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "data.json"))
