"""What the `ondevice_kat` stage proved (`ondevice_kat.json`, schema
schemas/artifacts/ondevice_kat.v1.schema.json): the generated training code against the
PyTorch trace — every step's loss, gradients and updated weights — on the host and on the
Cortex-M4 under QEMU (or why that part was skipped), and the instructions of a step. See pipeline/stages/ondevice_kat.py for the tolerances.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson
from edgebuild.report.katresult import Skipped


@dataclass(frozen=True)
class LossComparison:
    """Per-step losses of the C against PyTorch's."""

    loss_max_abs_diff: float
    loss_max_rel_diff: float  # over the largest loss of the trace
    meets_target: bool  # within the strict tolerance
    within_tolerance: bool  # within the pass/fail tolerance

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        return {f"{prefix}{key}": value for key, value in vars(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any], prefix: str = "") -> LossComparison:
        return cls(data[f"{prefix}loss_max_abs_diff"], data[f"{prefix}loss_max_rel_diff"],
                   data[f"{prefix}meets_target"], data[f"{prefix}within_tolerance"])


@dataclass(frozen=True)
class TensorChecks:
    """Every step's gradients and updated weights of a build against PyTorch's: the
    largest differences, and the relative figures the stage passes or fails on."""

    grad_max_abs_diff: float
    grad_max_rel_diff: float
    grad_check: float  # the relative gradient difference with its floor (pass/fail)
    weight_max_abs_diff: float
    weight_check: float  # the relative weight difference with its floor (pass/fail)

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        return {f"{prefix}{key}": value for key, value in vars(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any], prefix: str = "") -> TensorChecks:
        return cls(*(data[f"{prefix}{key}"] for key in (
            "grad_max_abs_diff", "grad_max_rel_diff", "grad_check", "weight_max_abs_diff",
            "weight_check")))


@dataclass(frozen=True)
class SegmentCount:
    """One counted stretch of a Cortex-M4 training step (train/segments.json): a layer's
    forward pass, input gradient or weight gradient, or the prefix, zeroing, loss or
    update; its convolution's multiply-accumulates, instructions and estimated cycles."""

    layer: str
    phase: str
    macs: int
    instructions: int
    cycles: int

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SegmentCount:
        return cls(data["layer"], data["phase"], data["macs"], data["instructions"],
                   data["cycles"])


@dataclass(frozen=True)
class TrainingRun:
    """The Cortex-M4 training build under QEMU: its losses, their and its gradients' and
    weights' comparison with PyTorch (written with an `m4_` prefix), the instructions of
    one step and Berkeley sizes."""

    losses: tuple[float, ...]
    instructions_per_step: int | None
    text: int
    data: int
    bss: int
    comparison: LossComparison
    tensors: TensorChecks
    cycles_per_step: int | None  # estimated (no wait states)
    segments: tuple[SegmentCount, ...]

    @property
    def macs_per_step(self) -> int:
        """MAC-equivalents of a step: forward, input-gradient and weight-gradient MACs."""
        return sum(segment.macs for segment in self.segments)

    def to_json(self) -> dict[str, Any]:
        macs = self.macs_per_step
        return {"losses": list(self.losses), "instructions_per_step": self.instructions_per_step,
                "cycles_per_step": self.cycles_per_step, "macs_per_step": macs,
                "insn_per_mac": None if not macs or self.instructions_per_step is None
                else round(self.instructions_per_step / macs, 3),
                "segments": [segment.to_json() for segment in self.segments],
                "text": self.text, "data": self.data, "bss": self.bss,
                **self.comparison.to_json("m4_"), **self.tensors.to_json("m4_")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingRun:
        return cls(tuple(data["losses"]), data["instructions_per_step"], data["text"],
                   data["data"], data["bss"], LossComparison.from_json(data, "m4_"),
                   TensorChecks.from_json(data, "m4_"), data["cycles_per_step"],
                   tuple(SegmentCount.from_json(s) for s in data["segments"]))


@dataclass(frozen=True)
class TrainingKat:
    steps: int
    loss_c: tuple[float, ...]
    loss_torch: tuple[float, ...]
    losses: LossComparison  # written at the top level
    tensors: TensorChecks  # written at the top level
    memory_bytes: int  # training RAM (memory.json `ram`)
    cortex_m4: TrainingRun | Skipped

    @property
    def instructions_per_step(self) -> int | None:
        return None if isinstance(self.cortex_m4, Skipped) else \
            self.cortex_m4.instructions_per_step

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "loss_c": list(self.loss_c),
                "loss_torch": list(self.loss_torch), **self.losses.to_json(),
                **self.tensors.to_json(), "memory_bytes": self.memory_bytes, "cortex_m4": self.cortex_m4.to_json(),
                "instructions_per_step": self.instructions_per_step}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainingKat:
        m4 = data["cortex_m4"]
        return cls(data["steps"], tuple(data["loss_c"]), tuple(data["loss_torch"]),
                   LossComparison.from_json(data), TensorChecks.from_json(data),
                   data["memory_bytes"],
                   Skipped(m4["skipped"]) if "skipped" in m4 else TrainingRun.from_json(m4))

    @classmethod
    def load(cls, directory: Path) -> TrainingKat:
        """What the `ondevice_kat` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "ondevice_kat.json"))
