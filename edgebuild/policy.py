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
        pick = (lambda field, o=override: getattr(o, field) if o is not None and
                getattr(o, field) is not None else getattr(qat, field))
        policies[layer.name] = LayerPolicy(pick("weight_bits"), pick("bias_bits"),
                                           pick("shift_quantile"))
    return policies
