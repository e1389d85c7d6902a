"""The quantization policy per compute layer: the manifest's `qat` defaults + overrides,
constrained by the target's number format when it is an accelerator's (targets.numbers).
"""

from __future__ import annotations

from typing import Any

from edgebuild.core import numerics
from edgebuild.ops import OPS
from edgebuild.ops.operator import LayerBase, LayerPolicy


def resolve(qat: Any, layers: tuple[LayerBase, ...],
            numbers: Any | None = None) -> dict[str, LayerPolicy]:
    """The policy of every compute layer; `numbers`: the device's number format
    (targets.numbers.device_numbers), None on a CPU target."""
    policies = {}
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
                numerics.shift_limits(bits, tuple(numbers.total_shift)))
    return policies


def _pick(qat: Any, override: Any, field: str) -> Any:
    """The override's value when it sets one, else the policy default."""
    value = getattr(override, field) if override is not None else None
    return getattr(qat, field) if value is None else value
