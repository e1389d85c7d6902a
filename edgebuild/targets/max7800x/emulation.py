"""Whether a MAX7800x's Cortex-M4 can run the software emulation of the network.

On an accelerator target the network runs on the CNN accelerator, in its own data memory
(placed and checked by the placement). The C project of `codegen/` computes the same
network on the Arm core: it is the host known-answer test over every sample, and the
fallback for what the accelerator cannot run. Its activation arena lives in the core's
system RAM, which on these parts is small (MAX78000: 128 KiB) next to the accelerator's
512 KiB of data memory — a model sized for the accelerator (the vendor's face-ID network
needs over 800 KB as int8 activations in software) often does not fit it. That is no
reason to refuse the accelerator program a user came for: the emulation is then reported
as host-only ("host KAT only"), its Cortex-M4/QEMU run is skipped with that reason, and
everything else builds. For a plain `cortex-m4` target the budget stays a hard error
(memory.budget): there the emulation *is* the deployed program.

The RAM the core offers is `target.memory.l2`, but never more than the device has
(`sram` in its profile): the default budget (256 KiB) is more than a MAX78000 has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FILE = "emulation.json"  # written by the plan stage beside plan.json, read by the kat stage


@dataclass(frozen=True)
class EmulationFit:
    """The emulation's RAM need (arena, buffer state, kernels' workspace: memory.budget's
    count) against what the device's Cortex-M4 gives it."""

    device: str
    needs: int  # bytes
    has: int  # bytes: min(target.memory.l2, the device's SRAM)

    @property
    def fits(self) -> bool:
        return self.needs <= self.has

    def reason(self) -> str:
        """Why the Cortex-M4 run is skipped (when it does not fit)."""
        return (f"Cortex-M4 emulation: needs {self.needs} bytes of RAM, the "
                f"{self.device.upper()} has {self.has} — host KAT only (the network runs on "
                "the accelerator)")

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "needs": self.needs, "has": self.has, "fits": self.fits}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EmulationFit:
        return cls(str(data["device"]), int(data["needs"]), int(data["has"]))


def ram(device: str, l2: int) -> int:
    """The RAM the device's Cortex-M4 gives the emulation: the budget, capped by its SRAM."""
    from edgebuild.targets.max7800x import profile as devices

    return min(l2, devices.profile(device).sram)


def fit(device: str, l2: int, needs: int) -> EmulationFit:
    return EmulationFit(device, needs, ram(device, l2))
