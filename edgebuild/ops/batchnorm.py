"""batchnorm: per-channel normalization, folded into the preceding conv/linear before quantization."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.ops.operator import Activation, LayerBase, Operator, no_macs, one


class BatchNorm(LayerBase):
    """Must directly follow a layer with weights (conv, transposed conv, linear) with
    `act: none`; folding moves this layer's `act` onto that layer."""

    op: Literal["batchnorm"]
    eps: float = Field(default=1e-5, gt=0, le=1)
    momentum: float = Field(default=0.1, gt=0, le=1)
    act: Activation = Activation.none


def param_count(layer: BatchNorm, shapes):
    return 2 * shapes[0][0]  # scale and shift; running statistics are buffers


def torch_module(layer: BatchNorm, shapes):
    import torch.nn as nn

    cls = nn.BatchNorm1d if len(shapes[0]) in (1, 2) else nn.BatchNorm2d
    return cls(shapes[0][0], eps=layer.eps, momentum=layer.momentum)


def forward(layer: BatchNorm, module, inputs, mode):
    from edgebuild.core import numerics

    if mode.kind != "float":
        raise ValueError(f"batchnorm {layer.name!r} must be folded before quantization")
    out = module(inputs[0])
    return numerics.torch_clamp_float(out, layer.act.value) if mode.clamp else \
        numerics.torch_activate(out, layer.act.value)


def fold(weight, bias, stats: dict, eps: float):
    """BN(conv(x)) == conv'(x): scale each output channel's weights, shift its bias.

    w' = w * g / sqrt(var + eps);  b' = (b - mean) * g / sqrt(var + eps) + beta."""
    import numpy as np

    factor = stats["weight"] / np.sqrt(stats["running_var"] + eps)
    new_w = weight * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    base = bias if bias is not None else np.zeros_like(factor)
    return new_w, (base - stats["running_mean"]) * factor + stats["bias"]


OPERATOR = Operator("batchnorm", BatchNorm, "one", lambda layer, shapes: one(shapes),
                    param_count, no_macs, forward, None, torch_module)
