"""How each layer was quantized: the `quantize` stage's table (`quant.json`, schema
schemas/artifacts/quant.v1.schema.json) next to the integers in `weights.npz`.

Per compute layer: bit width, weight scale exponent and output shift (see numerics), the
range of the integer weights, how many sit at the rails (`weights_clipped_pct`) and how
many int8 outputs saturate on calibration data (`saturated_pct`; null for a `wide`
int32 output, which cannot saturate). `saturation` repeats the latter for every layer
with an int8 output, compute or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson


@dataclass(frozen=True)
class LayerQuant:
    name: str
    op: str
    bits: int
    bias_bits: int
    scale_exp: int
    shift: int
    weight_min: int
    weight_max: int
    weights_clipped_pct: float
    wide: bool
    saturated_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayerQuant:
        return cls(data["name"], data["op"], data["bits"], data["bias_bits"], data["scale_exp"],
                   data["shift"], data["weight_min"], data["weight_max"],
                   data["weights_clipped_pct"], data["wide"], data["saturated_pct"])


@dataclass(frozen=True)
class Quantization:
    rounding: str  # numerics rounding mode, e.g. "half_up" or "half_up/trunc"
    layers: tuple[LayerQuant, ...]
    method: str  # "qat", "ptq-<clip>", "imported" or "imported-tflite"
    device: str
    saturation: dict[str, float]  # layer -> % of int8 outputs at -128 or 127

    def to_json(self) -> dict[str, Any]:
        return {"rounding": self.rounding, "layers": [row.to_json() for row in self.layers],
                "method": self.method, "device": self.device,
                "saturation": dict(self.saturation)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Quantization:
        return cls(data["rounding"], tuple(LayerQuant.from_json(row) for row in data["layers"]),
                   data["method"], data["device"], dict(data["saturation"]))

    @classmethod
    def load(cls, directory: Path) -> Quantization:
        """What the `quantize` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "quant.json"))
