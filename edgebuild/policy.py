"""The quantization policy per compute layer: the manifest's `qat` defaults + overrides."""

from __future__ import annotations

from edgebuild.folding import COMPUTE_OPS
from edgebuild.ops.base import LayerBase, LayerPolicy


def resolve(qat, layers: tuple[LayerBase, ...]) -> dict[str, LayerPolicy]:
    policies = {}
    for layer in layers:
        if layer.op not in COMPUTE_OPS:
            continue
        override = qat.overrides.get(layer.name)
        policies[layer.name] = LayerPolicy(*(_pick(qat, override, field) for field in
                                             ("weight_bits", "bias_bits", "shift_quantile")))
    return policies


def _pick(qat, override, field: str):
    """The override's value when it sets one, else the policy default."""
    value = getattr(override, field) if override is not None else None
    return getattr(qat, field) if value is None else value
