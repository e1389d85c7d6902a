"""The headline of a build (report.json `headline`): the few figures a newcomer looks at
first — target, float and int8 accuracy, RAM and flash against their budgets, Cortex-M4
instructions per inference with the kernels they count, the known-answer test, and, where
the build has them, on-device training and accelerator occupancy — each with a verdict.

report.html's headline block and the terminal summary table (cli/summary.py) both show
these records as report.json holds them, formatted by the functions here, so the page,
the table and the JSON cannot disagree. The records are built from the report's metrics
in edgebuild/report/report.py (`headline_of`).

Verdicts: `pass` within budget / test passed, `fail` over budget / test failed, `warn`
when int8 accuracy is more than ACCURACY_DROP_WARN percentage points below float; None
where there is nothing to judge (a figure that does not exist for the build). They are
written into report.json so that the page only maps them to colours.

This module imports only the standard library: the summary table runs after every build,
a no-op one included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PASS, WARN, FAIL = "pass", "warn", "fail"
ACCURACY_DROP_WARN = 2.0  # percentage points from float to int8 before the headline warns
MISSING = "—"  # a figure the build does not have (report.html; the terminal table uses "-")


@dataclass(frozen=True)
class Usage:
    """`used` of `budget` (bytes, or processors or kernel memory words: `unit`)."""

    used: int
    budget: int
    unit: str = "bytes"

    @property
    def percent(self) -> float | None:
        return 100 * self.used / self.budget if self.budget > 0 else None

    @property
    def verdict(self) -> str:
        return PASS if self.used <= self.budget else FAIL

    def to_json(self) -> dict[str, Any]:
        return {"used": self.used, "budget": self.budget, "unit": self.unit,
                "percent": self.percent, "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Usage:
        return cls(data["used"], data["budget"], data["unit"])


@dataclass(frozen=True)
class Accuracy:
    """Test-set accuracy of the float model and of the integer (int8) model, as fractions;
    None without a dataset (an imported model, a known answer only) or without training."""

    floating: float | None  # report.json `float`
    int8: float | None

    @property
    def drop_points(self) -> float | None:
        """Percentage points lost from float to int8 (negative: int8 is better)."""
        if self.floating is None or self.int8 is None:
            return None
        return 100 * (self.floating - self.int8)

    @property
    def verdict(self) -> str | None:
        drop = self.drop_points
        if drop is None:
            return None
        return WARN if drop > ACCURACY_DROP_WARN else PASS

    def to_json(self) -> dict[str, Any]:
        return {"float": self.floating, "int8": self.int8, "drop_points": self.drop_points,
                "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Accuracy:
        return cls(data["float"], data["int8"])


@dataclass(frozen=True)
class Instructions:
    """Cortex-M4 instructions of one inference (counted under QEMU) and its cycles
    (estimated from the instruction mix: targets/toolchain), with the kernels the count is
    for (`optimized` or `reference`; None: not recorded), or why there is no count
    (`skipped`: no ARM toolchain)."""

    count: int | None
    kernels: str | None
    per_mac: float | None
    reference_count: int | None
    skipped: str | None = None
    cycles: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "kernels": self.kernels, "per_mac": self.per_mac,
                "reference_count": self.reference_count, "skipped": self.skipped,
                "cycles": self.cycles}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Instructions:
        return cls(data["count"], data["kernels"], data["per_mac"], data["reference_count"],
                   data["skipped"], data.get("cycles"))


@dataclass(frozen=True)
class Kat:
    """The known-answer test: the generated C against the integer reference on the host
    (`mismatches` of `samples`), the model against a supplied known answer where there is
    one, and the Cortex-M4 firmware's run (`pass`, or None when it was skipped)."""

    samples: int
    mismatches: int
    known_answer_mismatches: int | None
    cortex_m4: str | None

    @property
    def verdict(self) -> str:
        failed = self.mismatches or self.known_answer_mismatches or \
            self.cortex_m4 not in (None, PASS)
        return FAIL if failed else PASS

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "mismatches": self.mismatches,
                "known_answer_mismatches": self.known_answer_mismatches,
                "cortex_m4": self.cortex_m4, "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Kat:
        return cls(data["samples"], data["mismatches"], data["known_answer_mismatches"],
                   data["cortex_m4"])


@dataclass(frozen=True)
class Ondevice:
    """On-device fine-tuning: held-out accuracy before and after it, its RAM (training
    buffers and the inference arena) against `target.memory.l2`, instructions per training
    step on the Cortex-M4, and whether the generated C matched PyTorch (host, and the
    Cortex-M4: None when that run was skipped)."""

    accuracy_before: float
    accuracy_after: float
    ram: Usage
    instructions_per_step: int | None
    matches_pytorch: bool
    cortex_m4_matches: bool | None

    @property
    def verdict(self) -> str:
        return PASS if self.matches_pytorch and self.cortex_m4_matches is not False else FAIL

    @property
    def accuracy_verdict(self) -> str:
        """Fine-tuning that lowers the held-out accuracy fails (the build warns too)."""
        return FAIL if self.accuracy_after < self.accuracy_before else PASS

    def to_json(self) -> dict[str, Any]:
        return {"accuracy_before": self.accuracy_before, "accuracy_after": self.accuracy_after,
                "accuracy_verdict": self.accuracy_verdict,
                "ram": self.ram.to_json(), "instructions_per_step": self.instructions_per_step,
                "matches_pytorch": self.matches_pytorch,
                "cortex_m4_matches": self.cortex_m4_matches, "verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ondevice:
        return cls(data["accuracy_before"], data["accuracy_after"], Usage.from_json(data["ram"]),
                   data["instructions_per_step"], data["matches_pytorch"],
                   data["cortex_m4_matches"])


@dataclass(frozen=True)
class AcceleratorUse:
    """A MAX7800x build's share of the accelerator (targets/max7800x/placement/occupancy)."""

    processors: Usage
    data_memory: Usage
    kernel_memory: Usage
    bias_memory: Usage

    def to_json(self) -> dict[str, Any]:
        return {key: usage.to_json() for key, usage in vars(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AcceleratorUse:
        return cls(*(Usage.from_json(data[key]) for key in
                     ("processors", "data_memory", "kernel_memory", "bias_memory")))


@dataclass(frozen=True)
class Headline:
    """RAM is all the planned RAM — the activation arena, the state kept outside it (a
    `buffer`'s window), the optimized kernels' workspace and the L1 scratchpad — against
    `target.memory.l2`; flash the stored weights and biases against
    `target.memory.flash` — what the plan stage checks (memory/budget.py), not the size of
    the known-answer firmware, which also holds its test vectors."""

    device: str
    accuracy: Accuracy
    test_samples: int | None  # None: no dataset
    ram: Usage
    flash: Usage
    instructions: Instructions
    kat: Kat
    ondevice: Ondevice | None
    accelerator: AcceleratorUse | None

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "accuracy": self.accuracy.to_json(),
                "test_samples": self.test_samples, "ram": self.ram.to_json(),
                "flash": self.flash.to_json(), "instructions": self.instructions.to_json(),
                "kat": self.kat.to_json(),
                "ondevice": None if self.ondevice is None else self.ondevice.to_json(),
                "accelerator": None if self.accelerator is None else
                self.accelerator.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Headline:
        ondevice, accelerator = data["ondevice"], data["accelerator"]
        return cls(data["device"], Accuracy.from_json(data["accuracy"]), data["test_samples"],
                   Usage.from_json(data["ram"]), Usage.from_json(data["flash"]),
                   Instructions.from_json(data["instructions"]), Kat.from_json(data["kat"]),
                   None if ondevice is None else Ondevice.from_json(ondevice),
                   None if accelerator is None else AcceleratorUse.from_json(accelerator))


# ---- formatting: one rounding for the page and the terminal ------------------------------

def percent(fraction: float | None, digits: int = 2, missing: str = MISSING) -> str:
    """An accuracy (a fraction) as a percentage: 0.99164 -> `99.16%`."""
    return missing if fraction is None else f"{100 * fraction:.{digits}f}%"


def size(count: int | None, missing: str = MISSING) -> str:
    """Bytes for people: below 1 KiB in bytes, else KiB with one decimal (1 KiB = 1024 B)."""
    if count is None:
        return missing
    return f"{count / 1024:.1f} KiB" if count >= 1024 else f"{count} B"


def count(value: int | None, missing: str = MISSING) -> str:
    """An integer with thousands separators: 260322 -> `260,322`."""
    return missing if value is None else f"{value:,}"


def amount(value: int, unit: str) -> str:
    """A Usage's figure in its unit: bytes as `size`, anything else counted."""
    return size(value) if unit == "bytes" else f"{value:,} {unit}"


def used(usage: Usage | None, missing: str = MISSING) -> str:
    """`1.8 KiB / 128.0 KiB` (the terminal table's form)."""
    if usage is None:
        return missing
    return f"{amount(usage.used, usage.unit)} / {amount(usage.budget, usage.unit)}"


def share(usage: Usage | None, missing: str = MISSING) -> str:
    """The percentage of the budget used: `1.4%` (see `share_of`)."""
    return missing if usage is None else share_of(usage.used, usage.budget, missing)


def share_of(part: int, whole: int, missing: str = MISSING) -> str:
    """`part` as a percentage of `whole` with one decimal; a non-zero part below 0.1% is
    `<0.1%`, never a misleading `0.0%`."""
    if whole <= 0:
        return missing
    value = 100 * part / whole
    return "<0.1%" if 0 < value < 0.1 else f"{value:.1f}%"


def kat_text(kat: Kat | None, missing: str = MISSING) -> str:
    """`pass`, or `FAIL (3)` with the host mismatches; a failed Cortex-M4 run named."""
    if kat is None:
        return missing
    bad = kat.mismatches + (kat.known_answer_mismatches or 0)
    host = PASS if bad == 0 else f"FAIL ({bad})"
    return host if kat.cortex_m4 in (None, PASS) else f"{host}, M4 {kat.cortex_m4}"


def instructions_text(figures: Instructions | None, missing: str = MISSING) -> str:
    """`260,322 (optimized kernels)`; `—` when not counted."""
    if figures is None or figures.count is None:
        return missing
    kernels = "kernels not recorded" if figures.kernels is None else f"{figures.kernels} kernels"
    return f"{figures.count:,} ({kernels})"
