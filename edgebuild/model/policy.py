"""The quantization policy per compute layer: the manifest's `qat` defaults + overrides,
constrained by the target device's number format when the target is an accelerator.

On a MAX7800x-style device the format is the device's, not a choice: bias is an 8-bit value
added as b x 128 (`bias_bits` 8, `bias_scale_log2` 7), the weight scale exponent range depends
on the weight width, and rounding is the device's (half up; average pooling truncates).
"""

from __future__ import annotations

from edgebuild.core import numerics
from edgebuild.model.folding import COMPUTE_OPS
from edgebuild.ops.operator import LayerBase, LayerPolicy


def device_numbers(device: str):
    """The device profile's number format, or None for a generic CPU target."""
    from edgebuild.targets.max7800x import profile as devices

    return devices.profile(device).numbers if devices.is_accelerator(device) else None


def rounding_mode(manifest) -> str:
    """The rounding mode every integer implementation uses (see numerics)."""
    numbers = device_numbers(manifest.target.device.value)
    if numbers is None:
        return manifest.quantize.rounding.value
    return numbers.rounding if numbers.avg_pool == numbers.rounding else \
        f"{numbers.rounding}/{numbers.avg_pool}"


def training_rounding(manifest) -> str:
    """QAT always trains with half-up requantization; a device's pooling rule is kept."""
    numbers = device_numbers(manifest.target.device.value)
    return "half_up" if numbers is None else rounding_mode(manifest)


def numbers_config(manifest) -> dict | None:
    """What of the target keys training: only an accelerator's number format."""
    numbers = device_numbers(manifest.target.device.value)
    return None if numbers is None else numbers.model_dump(mode="json")


def resolve(qat, layers: tuple[LayerBase, ...], device: str = "host") -> dict[str, LayerPolicy]:
    numbers = device_numbers(device)
    policies = {}
    for layer in layers:
        if layer.op not in COMPUTE_OPS:
            continue
        override = qat.overrides.get(layer.name)
        bits, bias_bits, quantile = (_pick(qat, override, field) for field in
                                     ("weight_bits", "bias_bits", "shift_quantile"))
        if numbers is None:
            policies[layer.name] = LayerPolicy(bits, bias_bits, quantile)
        else:
            policies[layer.name] = LayerPolicy(
                bits, numbers.bias_bits, quantile, numbers.bias_scale_log2,
                numerics.shift_limits(bits, tuple(numbers.total_shift)))
    return policies


def _pick(qat, override, field: str):
    """The override's value when it sets one, else the policy default."""
    value = getattr(override, field) if override is not None else None
    return getattr(qat, field) if value is None else value
