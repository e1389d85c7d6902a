"""The build's report (`report.json`, schema schemas/artifacts/report.v1.schema.json): the
figures the contract tests and CI read, each copied from an upstream stage's record —
nothing is recomputed here but the headline (`headline_of`: the same figures against the
budgets, with verdicts) and the accelerator's occupancy (sums over its placement).
Sections a build does not have are null (an imported model has no training, a model
without a dataset no confusion matrix, a CPU target no accelerator, a model without
`ondevice` no on-device training).

`headline`, `accelerator.occupancy`, `accelerator.program` and `accelerator.emulation` came
after the first report.json files: readers accept files without them, and records without
them write none, so schema v1 describes both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from edgebuild.core import boundedjson
from edgebuild.memory.plan import TileChoice, Totals
from edgebuild.model.graph import Node
from edgebuild.model.quantization import LayerQuant
from edgebuild.ondevice.memory import Choice
from edgebuild.report.headline import (
    AcceleratorUse,
    Accuracy,
    Headline,
    Instructions,
    Kat,
    Ondevice,
    Usage,
)
from edgebuild.report.katresult import FirmwareRun, Skipped, cortex_m4_from_json
from edgebuild.targets.max7800x.placement import Placement
from edgebuild.targets.max7800x.placement.occupancy import Occupancy
from edgebuild.targets.max7800x.program.record import ProgramRecord
from edgebuild.train.metrics import Epoch

VERSION = 1


def _sorted(values: dict[str, Any]) -> dict[str, Any]:
    """Keys in the order kat.json and plan.json list them (sorted). report.json is written
    key-sorted anyway; report.html prints these dicts as they are."""
    return dict(sorted(values.items()))


T = TypeVar("T")


@dataclass(frozen=True)
class HostTotals:
    """The host known-answer test in short: samples run through the C, and how many differ."""

    samples: int
    mismatches: int

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "mismatches": self.mismatches}


@dataclass(frozen=True)
class MemoryFigures:
    """The plan's memory totals and the weights' bytes."""

    totals: Totals
    weight_bytes: int

    def to_json(self) -> dict[str, Any]:
        return {**_sorted(self.totals.to_json()), "weight_bytes": self.weight_bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryFigures:
        totals = {key: value for key, value in data.items() if key != "weight_bytes"}
        return cls(Totals(**{**totals, "tiled_layers": tuple(totals["tiled_layers"])}),
                   data["weight_bytes"])


@dataclass(frozen=True)
class TrainingRam:
    """On-device training memory (ondevice.memory.TrainingMemory without the choices; its
    tiled passes only)."""

    by_kind: dict[str, int]
    flash: int
    arena: int
    total_ram: int
    l1_peak: int
    l1_budget: int
    l2_bytes: int
    l2_lower_bound: int
    l2_budget: int
    traffic: int
    traffic_lower_bound: int
    tiled: tuple[dict[str, Any], ...]  # memory.json `passes` that run in tiles

    def to_json(self) -> dict[str, Any]:
        return {"by_kind": dict(self.by_kind), "flash": self.flash, "arena": self.arena,
                "total_ram": self.total_ram, "l1_peak": self.l1_peak,
                "l1_budget": self.l1_budget, "l2_bytes": self.l2_bytes,
                "l2_lower_bound": self.l2_lower_bound,
                "l2_budget": self.l2_budget, "traffic": self.traffic,
                "traffic_lower_bound": self.traffic_lower_bound, "tiled": list(self.tiled)}


@dataclass(frozen=True)
class OndeviceSummary:
    """On-device training: the C-vs-PyTorch comparison (ondevice_kat), its memory and the
    accuracy before/after fine-tuning (ondevice)."""

    steps: int
    loss_max_abs_diff: float
    loss_max_rel_diff: float
    loss_c: tuple[float, ...]
    loss_torch: tuple[float, ...]
    memory_bytes: int
    instructions_per_step: int | None
    grad_max_abs_diff: float
    grad_max_rel_diff: float
    weight_max_abs_diff: float
    within_tolerance: bool
    meets_target: bool
    trainable: tuple[str, ...]
    memory: TrainingRam
    memory_choices: tuple[Choice, ...]
    cortex_m4_losses_match: bool | None  # None: the Cortex-M4 run was skipped
    accuracy_before: float
    accuracy_after: float
    frozen_int8_accuracy: float | None
    epochs: int

    def to_json(self) -> dict[str, Any]:
        out = dict(vars(self))
        out.update(loss_c=list(self.loss_c), loss_torch=list(self.loss_torch),
                   trainable=list(self.trainable), memory=self.memory.to_json(),
                   memory_choices=[choice.to_json() for choice in self.memory_choices])
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OndeviceSummary:
        return cls(**{**data, "loss_c": tuple(data["loss_c"]),
                      "loss_torch": tuple(data["loss_torch"]),
                      "trainable": tuple(data["trainable"]),
                      "memory": TrainingRam(**{**data["memory"],
                                               "tiled": tuple(data["memory"]["tiled"])}),
                      "memory_choices": tuple(Choice.from_json(c)
                                              for c in data["memory_choices"])})


OPTIONAL_METRICS = ("kat_samples", "kat_vs_reference_mismatches")


@dataclass(frozen=True)
class ReportMetrics:
    float_accuracy: float | None
    qat_accuracy: float | None
    int_accuracy: float | None
    params: int
    macs: int
    int_vs_fakequant_mismatches: int | None  # None: no fake-quant network (TFLite's format)
    test_samples: int
    c_vs_reference: HostTotals
    cortex_m4: FirmwareRun | Skipped
    memory: MemoryFigures
    kat_vectors: str
    ondevice: OndeviceSummary | None
    kat_samples: int | None = None  # with a known answer; not written otherwise
    kat_vs_reference_mismatches: int | None = None  # with its expected outputs

    def to_json(self) -> dict[str, Any]:
        out = {key: value for key, value in vars(self).items()
               if key not in OPTIONAL_METRICS or value is not None}
        out.update(c_vs_reference=self.c_vs_reference.to_json(),
                   cortex_m4=_sorted(self.cortex_m4.to_json()), memory=self.memory.to_json(),
                   ondevice=None if self.ondevice is None else self.ondevice.to_json())
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReportMetrics:
        ondevice = data["ondevice"]
        return cls(**{**data, "c_vs_reference": HostTotals(**data["c_vs_reference"]),
                      "cortex_m4": cortex_m4_from_json(data["cortex_m4"]),
                      "memory": MemoryFigures.from_json(data["memory"]),
                      "ondevice": None if ondevice is None else
                      OndeviceSummary.from_json(ondevice)})


@dataclass(frozen=True)
class TileRow:
    """One windowed pass's L1 tile; a fused pool's row is `<layer> (pool)`."""

    layer: str
    tile: TileChoice

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.layer, **self.tile.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TileRow:
        return cls(data["layer"], TileChoice(**{k: v for k, v in data.items() if k != "layer"}))


@dataclass(frozen=True)
class QuantSummary:
    method: str
    rounding: str
    layers: tuple[LayerQuant, ...]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "rounding": self.rounding,
                "layers": [row.to_json() for row in self.layers]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QuantSummary:
        return cls(data["method"], data["rounding"],
                   tuple(LayerQuant.from_json(row) for row in data["layers"]))


@dataclass(frozen=True)
class Phase:
    """One training stage's epochs and the epoch kept; both None when it did not run."""

    best_epoch: int | None = None
    epochs: tuple[Epoch, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"best_epoch": self.best_epoch, "epochs": None if self.epochs is None else
                [epoch.to_json() for epoch in self.epochs]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Phase:
        epochs = data["epochs"]
        return cls(data["best_epoch"],
                   None if epochs is None else tuple(Epoch.from_json(e) for e in epochs))


@dataclass(frozen=True)
class Confusion:
    labels: tuple[str, ...]
    matrix: tuple[tuple[int, ...], ...]  # rows: true class, columns: predicted

    def to_json(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "matrix": [list(row) for row in self.matrix]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Confusion:
        return cls(tuple(data["labels"]), tuple(tuple(row) for row in data["matrix"]))


@dataclass(frozen=True)
class DataCounts:
    counts: dict[str, int]  # split -> samples
    classes: int

    def to_json(self) -> dict[str, Any]:
        return {"counts": dict(self.counts), "classes": self.classes}


@dataclass(frozen=True)
class Accelerator:
    """A MAX7800x build's placement, its memory maps as text and what it occupies."""

    device: str
    placement: Placement
    maps: str
    occupancy: Occupancy | None = None  # None: a report.json written before it existed
    # Which code runs where: the accelerator program (the MSDK project, stage accelerator)
    # and the directory of the Cortex-M4 software emulation of the same network (stage
    # codegen: the host KAT and the fallback). None: a report.json written before them.
    program: ProgramRecord | None = None
    emulation: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": self.device, "placement": self.placement.to_json(),
                               "maps": self.maps}
        if self.occupancy is not None:
            out["occupancy"] = self.occupancy.to_json()
        if self.program is not None:
            out["program"] = self.program.to_json()
        if self.emulation is not None:
            out["emulation"] = self.emulation
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Accelerator:
        occupancy, program = data.get("occupancy"), data.get("program")
        return cls(data["device"], Placement.from_json(data["placement"]), data["maps"],
                   None if occupancy is None else Occupancy.from_json(occupancy),
                   None if program is None else ProgramRecord.from_json(program),
                   data.get("emulation"))


@dataclass(frozen=True)
class Report:
    name: str
    metrics: ReportMetrics
    tiles: tuple[TileRow, ...]
    quantization: QuantSummary
    layers: tuple[Node, ...]
    float_training: Phase  # "training": {"float": ..., "qat": ...}
    qat_training: Phase
    confusion: Confusion | None
    data: DataCounts | None
    accelerator: Accelerator | None
    version: int = VERSION
    headline: Headline | None = None  # None: a report.json written before it existed

    def to_json(self) -> dict[str, Any]:
        def optional(record: Confusion | DataCounts | Accelerator | None
                     ) -> dict[str, Any] | None:
            return None if record is None else record.to_json()

        out = {"version": self.version, "name": self.name, "metrics": self.metrics.to_json(),
               "tiles": [row.to_json() for row in self.tiles],
               "quantization": self.quantization.to_json(),
               "layers": [node.to_json() for node in self.layers],
               "training": {"float": self.float_training.to_json(),
                            "qat": self.qat_training.to_json()},
               "confusion": optional(self.confusion), "data": optional(self.data),
               "accelerator": optional(self.accelerator)}
        if self.headline is not None:
            out["headline"] = self.headline.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        def optional(kind: Callable[[Any], T], value: object) -> T | None:
            return None if value is None else kind(value)

        return cls(data["name"], ReportMetrics.from_json(data["metrics"]),
                   tuple(TileRow.from_json(row) for row in data["tiles"]),
                   QuantSummary.from_json(data["quantization"]),
                   tuple(Node.from_json(node) for node in data["layers"]),
                   Phase.from_json(data["training"]["float"]),
                   Phase.from_json(data["training"]["qat"]),
                   optional(Confusion.from_json, data["confusion"]),
                   optional(lambda d: DataCounts(dict(d["counts"]), d["classes"]), data["data"]),
                   optional(Accelerator.from_json, data["accelerator"]), data["version"],
                   optional(Headline.from_json, data.get("headline")))

    @classmethod
    def load(cls, directory: Path) -> Report:
        """What the `report` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "report.json"))


def headline_of(metrics: ReportMetrics, device: str, flash: int,
                occupancy: Occupancy | None) -> Headline:
    """The headline (edgebuild/report/headline.py) from the report's metrics, the `target.memory`
    flash budget (the plan's totals hold the l2 budget) and an accelerator build's
    occupancy."""
    memory, m4 = metrics.memory, metrics.cortex_m4
    l2 = memory.totals.l2_budget
    return Headline(
        device, Accuracy(metrics.float_accuracy, metrics.int_accuracy),
        None if metrics.int_accuracy is None else metrics.test_samples,
        Usage(_ram(memory.totals), l2),
        Usage(memory.weight_bytes, flash), _instructions(m4),
        Kat(metrics.c_vs_reference.samples, metrics.c_vs_reference.mismatches,
            metrics.kat_vs_reference_mismatches,
            None if isinstance(m4, Skipped) else m4.kat),
        None if metrics.ondevice is None else _ondevice(metrics.ondevice, l2),
        None if occupancy is None else _accelerator_use(occupancy))


def _ram(totals: Totals) -> int:
    """All the model's RAM (arena, state, the kernels' workspace, L1); a plan written before
    the workspace was counted has only the arena and the state."""
    return totals.ram_bytes or totals.arena_bytes + totals.state_bytes


def _instructions(m4: FirmwareRun | Skipped) -> Instructions:
    if isinstance(m4, Skipped):
        return Instructions(None, None, None, None, m4.reason)
    reference = m4.reference
    return Instructions(m4.instructions, m4.kernels, m4.insn_per_mac,
                        None if reference is None else reference.instructions,
                        cycles=m4.cycles)


def _ondevice(trained: OndeviceSummary, l2: int) -> Ondevice:
    return Ondevice(trained.accuracy_before, trained.accuracy_after,
                    Usage(trained.memory.l2_bytes, l2), trained.instructions_per_step,
                    trained.within_tolerance, trained.cortex_m4_losses_match)


def _accelerator_use(occupancy: Occupancy) -> AcceleratorUse:
    return AcceleratorUse(
        Usage(occupancy.processors_used, occupancy.processors, "processors"),
        Usage(occupancy.data_used, occupancy.data_bytes),
        Usage(occupancy.kernel_words_used, occupancy.kernel_words, "words"),
        Usage(occupancy.bias_bytes_used, occupancy.bias_bytes))
