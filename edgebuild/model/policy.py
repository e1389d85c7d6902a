"""The quantization policy per compute layer: the manifest's `qat` defaults + overrides,
constrained by the target's number format when it is an accelerator's (targets.numbers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgebuild.core import numerics
from edgebuild.ops import OPS
from edgebuild.ops.operator import LayerPolicy

if TYPE_CHECKING:
    from edgebuild.manifest import Layer, LayerQuant, Qat


def resolve(qat: Qat, layers: tuple[Layer, ...],
            numbers: numerics.Arithmetic | None = None) -> dict[str, LayerPolicy]:
    """The policy of every compute layer; `numbers`: the device's number format
    (targets.numbers.device_numbers), None on a CPU target."""
    policies: dict[str, LayerPolicy] = {}
    for layer in layers:
        if not OPS[layer.op].computes:
            continue
        override = qat.overrides.get(layer.name)
        bits, bias_bits, quantile = (_pick(qat, override, field) for field in
                                     ("weight_bits", "bias_bits", "shift_quantile"))
        if numbers is None:
            policies[layer.name] = LayerPolicy(bits, bias_bits, quantile)
        else:
            policies[layer.name] = LayerPolicy(
                bits, numbers.bias_bits, quantile, numbers.bias_scale_log2,
                numerics.shift_limits(bits, numbers.total_shift))
    return policies


def _pick(qat: Qat, override: LayerQuant | None, field: str) -> Any:
    """The override's value when it sets one, else the policy default (the field's type:
    int or float, by name)."""
    value = getattr(override, field) if override is not None else None
    return getattr(qat, field) if value is None else value
