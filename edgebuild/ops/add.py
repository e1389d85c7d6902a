"""add: element-wise sum of two or more earlier tensors of one shape (residual connections)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core import numerics
from edgebuild.core.fields import Identifier
from edgebuild.core.geometry import Shape, ShapeError
from edgebuild.ops.c import CCode, CStep, act_name
from edgebuild.ops.onnxcode import (
    INT64,
    Form,
    OnnxCode,
    OnnxStep,
    fake_requantize,
    float_output,
    saturate,
)
from edgebuild.ops.operator import (
    Activation,
    C,
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Torch,
    no_macs,
    no_params,
)

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Add(LayerBase):
    op: Literal["add"]
    inputs: tuple[Identifier, ...] = Field(min_length=2, description="the tensors to sum")
    act: Activation = Activation.none


def out_shape(layer: Add, shapes: Sequence[Shape]) -> Shape:
    if any(s != shapes[0] for s in shapes):
        raise ShapeError("add needs inputs of one shape, got "
                         + ", ".join(f"{name}={list(s)}" for name, s in zip(layer.inputs, shapes, strict=False)))
    return tuple(shapes[0])


def forward(layer: Add, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    """Sum on the 1/128 grid, activation, saturation (exact in every mode)."""
    total = inputs[0]
    for other in inputs[1:]:
        total = total + other
    if mode.kind == "qat":
        return numerics.torch_requantize(total, mode.rounding, layer.act.value)
    return numerics.torch_clamp_float(total, layer.act.value) if mode.clamp else \
        numerics.torch_activate(total, layer.act.value)


def reference(layer: Add, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    total = inputs[0].astype("int64")
    for other in inputs[1:]:
        total = total + other
    return numerics.np_saturate(numerics.np_activate(total, layer.act.value))


def emit(step: CStep[Add]) -> CCode:
    """eb_add over a local array of the input tensors (EB_ADD: eb_add_opt with the optimized
    kernels)."""
    name, count = step.layer.name, len(step.inputs)
    kernel = "EB_ADD" if step.optimized else "eb_add"
    return CCode(calls=(f"{{ const int8_t *const in_{name}[{count}] = {{{', '.join(step.inputs)}}}; "
                        f"{kernel}({math.prod(step.out_shape)}, {count}, in_{name}, "
                        f"{act_name(step.layer.act)}, {step.output}); }}",))


def onnx_emit(step: OnnxStep[Add]) -> OnnxCode:
    """A chain of Add, then the form's output rule; on int8 the sum is taken in int64
    (as the reference) and saturated back to int8."""
    act = step.layer.act.value
    code = step.start()
    if step.form is Form.int8:
        code = code.then("Cast", to=INT64)
    for index, name in enumerate(step.inputs[1:], start=1):
        if step.form is Form.int8:
            code = code.side(f"in{index}", "Cast", name, to=INT64)
            name = code.tensor(f"in{index}")
        code = code.then("Add", name)
    if step.form is Form.int8:
        code = saturate(code, act)
    elif step.form is Form.qat:
        code = fake_requantize(code, step.rounding, act)
    else:
        code = float_output(code, act, step.clamp)
    return code.named(step.output)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 4, 4), (
    {"name": "c", "op": "conv2d", "out": 2, "kernel": 3, "pad": 1},
    {"name": "sum", "op": "add", "inputs": ["input", "c"], "act": "relu"},
))


OPERATOR = Operator(
    "add", Add, "many", Role.data, out_shape, no_params, no_macs,
    example=EXAMPLE,
    torch=Torch(forward), reference=reference, c=C(emit), onnx=Onnx(onnx_emit), l2_traffic=True)
