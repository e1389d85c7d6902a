"""The integer reference measured (`evaluation.json` of the `evaluate` stage, schema
schemas/artifacts/evaluation.v1.schema.json): how many samples it ran, how many differ
from the PyTorch fake-quant network (must be none), and — with labels — the accuracy and
confusion matrix (rows: true class, columns: predicted), and — with a known answer — how
many output values differ from it. Keys without a value are not written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson


@dataclass(frozen=True)
class Evaluation:
    samples: int
    # None: the format has no fake-quant network (TFLite's: the known answer checks it)
    int_vs_fakequant_mismatches: int | None
    first_mismatches: tuple[int, ...]  # the first (up to 10) sample indices that differ
    int_accuracy: float | None = None  # with labels (a dataset)
    confusion: tuple[tuple[int, ...], ...] | None = None  # with labels
    kat_samples: int | None = None  # with a known answer (manifest `kat`)
    kat_vs_reference_mismatches: int | None = None  # with a known answer's expected outputs

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"samples": self.samples,
                               "int_vs_fakequant_mismatches": self.int_vs_fakequant_mismatches,
                               "first_mismatches": list(self.first_mismatches)}
        values = {"int_accuracy": self.int_accuracy, "kat_samples": self.kat_samples,
                  "kat_vs_reference_mismatches": self.kat_vs_reference_mismatches,
                  "confusion": None if self.confusion is None else [list(row) for row in
                                                                    self.confusion]}
        out.update({key: value for key, value in values.items() if value is not None})
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evaluation:
        confusion = data.get("confusion")
        return cls(data["samples"], data["int_vs_fakequant_mismatches"],
                   tuple(data["first_mismatches"]), data.get("int_accuracy"),
                   None if confusion is None else tuple(tuple(row) for row in confusion),
                   data.get("kat_samples"), data.get("kat_vs_reference_mismatches"))

    @classmethod
    def load(cls, directory: Path) -> Evaluation:
        """What the `evaluate` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "evaluation.json"))
