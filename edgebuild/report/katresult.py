"""What the `kat` stage proved (`kat.json`, schema schemas/artifacts/kat.v1.schema.json):
the generated C against the integer reference on the host, sample by sample, and the
Cortex-M4 firmware under QEMU — its sizes and the instructions of one inference — or why
that part was skipped (no ARM toolchain).

Instruction counts depend on the kernels compiled in: a project whose C runs on a
Cortex-M4 (a `cortex-m4` target, or a MAX7800x target: its Arm Cortex-M4F emulates the
accelerator's number format; targets.cpu) has the optimized (dual-MAC) kernels, any other
target's (`host`) only the portable reference loops.
`kernels` names the firmware's; the second count (`reference_instructions`) is always the
same firmware built with the reference kernels, so a host-target build counts the
reference kernels twice.

Each count comes with estimated Cortex-M4 cycles (the QEMU plugin applies the Technical
Reference Manual's cycle table: templates/tools/insn_count.c lists it and its limits — zero
wait states, no bus contention) and, per planned layer, with its instructions, cycles,
multiply-accumulates and stored weight bytes, so a reader sees where the time and the flash
go. The layers' counts add up to the whole inference's except for the few instructions of
the calls into `cnn_run` and back. Files written before these figures existed have none.

`Skipped` is also the Cortex-M4 part of the training known-answer test (trainingkat).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson

OPTIMIZED, REFERENCE = "optimized", "reference"  # the kernels a firmware counts with


@dataclass(frozen=True)
class Skipped:
    """A Cortex-M4 run that did not happen, and why."""

    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"skipped": self.reason}


@dataclass(frozen=True)
class HostCheck:
    """The C code on every test sample against the integer reference."""

    samples: int
    mismatches: int
    first_mismatches: tuple[int, ...]  # the first (up to 10) sample indices that differ

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "mismatches": self.mismatches,
                "first_mismatches": list(self.first_mismatches)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostCheck:
        return cls(data["samples"], data["mismatches"], tuple(data["first_mismatches"]))


def per_mac(count: int | None, macs: int) -> float | None:
    """A count per multiply-accumulate, to 4 decimals (None: no count, or no MACs)."""
    return round(count / macs, 4) if count and macs else None


@dataclass(frozen=True)
class ReferenceRun:
    """The same firmware with the portable reference kernels (when the project has them)."""

    instructions: int | None
    insn_per_mac: float | None
    cycles: int | None = None  # estimated (older kat.json files do not have it)
    cycles_per_mac: float | None = None


@dataclass(frozen=True)
class LayerRun:
    """One planned layer of one inference on the Cortex-M4: its instructions and estimated
    cycles with the firmware's kernels (and with the reference kernels when counted), its
    multiply-accumulates and the bytes its weights and bias take in flash. Per-MAC figures
    are derived when written (None for a layer without MACs: pooling, add, concat)."""

    layer: str
    op: str
    macs: int
    weight_bytes: int
    instructions: int
    cycles: int
    reference_instructions: int | None = None
    reference_cycles: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "layer": self.layer, "op": self.op, "macs": self.macs,
            "weight_bytes": self.weight_bytes, "instructions": self.instructions,
            "cycles": self.cycles, "insn_per_mac": per_mac(self.instructions, self.macs),
            "cycles_per_mac": per_mac(self.cycles, self.macs)}
        if self.reference_instructions is not None:
            out.update(reference_instructions=self.reference_instructions,
                       reference_cycles=self.reference_cycles,
                       reference_insn_per_mac=per_mac(self.reference_instructions, self.macs),
                       reference_cycles_per_mac=per_mac(self.reference_cycles, self.macs))
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LayerRun:
        return cls(data["layer"], data["op"], data["macs"], data["weight_bytes"],
                   data["instructions"], data["cycles"], data.get("reference_instructions"),
                   data.get("reference_cycles"))


@dataclass(frozen=True)
class FirmwareRun:
    """The Cortex-M4 firmware: Berkeley sizes (text, data, bss), its known-answer test
    under QEMU and the instructions of one inference (None: not counted)."""

    text: int
    data: int
    bss: int
    instructions: int | None
    insn_per_mac: float | None
    code_bytes: int  # text without the weights
    kat: str  # "pass" (a failure fails the stage)
    reference: ReferenceRun | None = None
    kernels: str | None = None  # OPTIMIZED or REFERENCE: what `instructions` counts (older
    # kat.json files do not say)
    cycles: int | None = None  # estimated, same inference (older kat.json files: None)
    cycles_per_mac: float | None = None
    layers: tuple[LayerRun, ...] = ()  # in execution order (older kat.json files: none)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "data": self.data, "bss": self.bss,
                               "instructions": self.instructions,
                               "insn_per_mac": self.insn_per_mac, "code_bytes": self.code_bytes,
                               "kat": self.kat}
        if self.kernels is not None:
            out["kernels"] = self.kernels
        if self.cycles is not None:
            out.update(cycles=self.cycles, cycles_per_mac=self.cycles_per_mac)
        if self.reference is not None:
            out["reference_instructions"] = self.reference.instructions
            out["reference_insn_per_mac"] = self.reference.insn_per_mac
            if self.reference.cycles is not None:
                out.update(reference_cycles=self.reference.cycles,
                           reference_cycles_per_mac=self.reference.cycles_per_mac)
        if self.layers:
            out["layers"] = [layer.to_json() for layer in self.layers]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FirmwareRun:
        reference = ReferenceRun(data["reference_instructions"],
                                 data["reference_insn_per_mac"], data.get("reference_cycles"),
                                 data.get("reference_cycles_per_mac")) \
            if "reference_instructions" in data else None
        return cls(data["text"], data["data"], data["bss"], data["instructions"],
                   data["insn_per_mac"], data["code_bytes"], data["kat"], reference,
                   data.get("kernels"), data.get("cycles"), data.get("cycles_per_mac"),
                   tuple(LayerRun.from_json(layer) for layer in data.get("layers", ())))

    def summary(self) -> str:
        """The counts, each with its kernels: `260,322 instructions, 301,233 est. cycles
        (optimized kernels; reference kernels: 2,821,233 instructions, ...)`."""
        kernels = "kernels not recorded" if self.kernels is None else f"{self.kernels} kernels"
        text = f"{_counts(self.instructions, self.cycles)} ({kernels}"
        if self.reference is not None and self.kernels != REFERENCE:
            text += ("; reference kernels: "
                     f"{_counts(self.reference.instructions, self.reference.cycles)}")
        return text + ")"


def _counts(instructions: int | None, cycles: int | None) -> str:
    if instructions is None:
        return "instructions not counted"
    return f"{instructions:,} instructions" + ("" if cycles is None else
                                                f", {cycles:,} est. cycles")


def cortex_m4_from_json(data: dict[str, Any]) -> FirmwareRun | Skipped:
    return Skipped(data["skipped"]) if "skipped" in data else FirmwareRun.from_json(data)


@dataclass(frozen=True)
class KatResult:
    c_vs_reference: HostCheck
    cortex_m4: FirmwareRun | Skipped
    vectors: str  # "known answer" (manifest `kat`) or "integer reference"

    def to_json(self) -> dict[str, Any]:
        return {"c_vs_reference": self.c_vs_reference.to_json(),
                "cortex_m4": self.cortex_m4.to_json(), "vectors": self.vectors}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KatResult:
        return cls(HostCheck.from_json(data["c_vs_reference"]),
                   cortex_m4_from_json(data["cortex_m4"]), data["vectors"])

    @classmethod
    def load(cls, directory: Path) -> KatResult:
        """What the `kat` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "kat.json"))
