"""batchnorm: per-channel normalization, folded into the preceding conv/linear before quantization."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from edgebuild.core import numerics
from edgebuild.core.geometry import Shape
from edgebuild.ops.onnxcode import Form, OnnxCode, OnnxStep, float_output
from edgebuild.ops.operator import (
    FOLDED,
    Activation,
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Torch,
    Unsupported,
    no_macs,
    one,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray


class BatchNorm(LayerBase):
    """Must directly follow a layer with weights (conv, transposed conv, linear) with
    `act: none`; folding moves this layer's `act` onto that layer."""

    op: Literal["batchnorm"]
    eps: float = Field(default=1e-5, gt=0, le=1)
    momentum: float = Field(default=0.1, gt=0, le=1)
    act: Activation = Activation.none


def param_count(layer: BatchNorm, shapes: Sequence[Shape]) -> int:
    return 2 * shapes[0][0]  # scale and shift; running statistics are buffers


def torch_module(layer: BatchNorm,
                 shapes: Sequence[Shape]) -> torch.nn.BatchNorm1d | torch.nn.BatchNorm2d:
    import torch.nn as nn

    cls = nn.BatchNorm1d if len(shapes[0]) in (1, 2) else nn.BatchNorm2d
    return cls(shapes[0][0], eps=layer.eps, momentum=layer.momentum)


def forward(layer: BatchNorm, module: torch.nn.BatchNorm1d | torch.nn.BatchNorm2d, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    if mode.kind != "float":
        raise ValueError(f"batchnorm {layer.name!r} must be folded before quantization")
    out = module(inputs[0])
    return numerics.torch_clamp_float(out, layer.act.value) if mode.clamp else \
        numerics.torch_activate(out, layer.act.value)


def fold(weight: NDArray[np.floating[Any]], bias: NDArray[np.floating[Any]] | None,
         stats: dict[str, NDArray[np.floating[Any]]],
         eps: float) -> tuple[NDArray[np.floating[Any]], NDArray[np.floating[Any]]]:
    """BN(conv(x)) == conv'(x): scale each output channel's weights, shift its bias.

    w' = w * g / sqrt(var + eps);  b' = (b - mean) * g / sqrt(var + eps) + beta."""
    import numpy as np

    factor = stats["weight"] / np.sqrt(stats["running_var"] + eps)
    new_w = weight * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    base = bias if bias is not None else np.zeros_like(factor)
    return new_w, (base - stats["running_mean"]) * factor + stats["bias"]


def onnx_emit(step: OnnxStep[BatchNorm]) -> OnnxCode:
    """BatchNormalization with the running statistics (inference), then the activation and
    clamp. Float form only: the other forms are of the folded layers."""
    import numpy as np

    assert step.form is Form.float, f"batchnorm {step.layer.name!r} is folded in the {step.form} form"
    code = step.start()
    parts = ("weight", "bias", "running_mean", "running_var")
    for part in parts:
        code = code.const(part, np.asarray(step.tensors[part], dtype=np.float32))
    code = code.then("BatchNormalization", *(code.tensor(part) for part in parts),
                     epsilon=float(step.layer.eps))
    return float_output(code, step.layer.act.value, step.clamp).named(step.output)


_GONE = Unsupported(f"batchnorm: {FOLDED}")

# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 6, 6), (
    {"name": "c", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1},
    {"name": "bn", "op": "batchnorm", "act": "relu"},
))


OPERATOR = Operator("batchnorm", BatchNorm, "one", Role.folded, one, param_count, no_macs,
                    example=EXAMPLE,
                    torch=Torch(forward, torch_module), reference=_GONE, c=_GONE,
                    onnx=Onnx(onnx_emit))
