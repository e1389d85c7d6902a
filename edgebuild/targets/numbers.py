"""The number format of a target: a CPU target's is the manifest's choice (numerics), an
accelerator's is fixed by its device profile (bias format, shift range, rounding rules).

On a MAX7800x-style device the format is the device's, not a choice: bias is an 8-bit value
added as b x 128 (`bias_bits` 8, `bias_scale_log2` 7), the weight scale exponent range depends
on the weight width, and rounding is the device's (half up; average pooling truncates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgebuild.manifest import Manifest

if TYPE_CHECKING:  # the profile records load with the profile (pydantic, yaml)
    from edgebuild.targets.max7800x.records import Numbers


def device_numbers(device: str) -> Numbers | None:
    """The device profile's number format (a profile `Numbers` record, a
    numerics.Arithmetic), or None for a generic CPU target."""
    from edgebuild.targets.max7800x import profile as devices

    return devices.profile(device).numbers if devices.is_accelerator(device) else None


def rounding_mode(manifest: Manifest) -> str:
    """The rounding mode every integer implementation uses (see numerics)."""
    numbers = device_numbers(manifest.target.device.value)
    if numbers is None:
        return manifest.quantize.rounding.value
    return numbers.rounding if numbers.avg_pool == numbers.rounding else \
        f"{numbers.rounding}/{numbers.avg_pool}"


def training_rounding(manifest: Manifest) -> str:
    """QAT always trains with half-up requantization; a device's pooling rule is kept."""
    numbers = device_numbers(manifest.target.device.value)
    return "half_up" if numbers is None else rounding_mode(manifest)


def numbers_config(manifest: Manifest) -> dict[str, Any] | None:
    """What of the target keys training: only an accelerator's number format."""
    numbers = device_numbers(manifest.target.device.value)
    return None if numbers is None else numbers.model_dump(mode="json")
