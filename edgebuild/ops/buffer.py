"""buffer: the last `length` frames' features, oldest first — state kept across inferences.

A model with a buffer runs on a stream of frames (video, audio or sensor windows). On the
device, one inference takes one frame of shape `model.input`: the layers before the buffer
compute that frame's features (shape (C,), or spatial size 1), the buffer drops its oldest
column and appends the new one, and the layers after it read the window (C, length) — a
1-D signal over time, typically a temporal convolution (the MAX7800x toolchain's
`data_buffer` with `buffer_shift` and `buffer_insert`).

In training, evaluation and the integer reference a sample is a whole clip of `length`
frames, shape (length, *model.input): the layers before the buffer run on every frame (the
batch is read as batch x length frames, see graph.frames) and the buffer gathers each
clip's features into (C, length), column j from frame j. That is exactly the window the
device holds after `length` inferences from the reset state (`cnn_reset()`, all zero), so
the known-answer test resets, feeds a clip frame by frame and compares after its last frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape, ShapeError
from edgebuild.ops.c import CCode, CStep
from edgebuild.ops.onnxcode import OnnxCode, OnnxStep
from edgebuild.ops.operator import (
    C,
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Stream,
    Torch,
    no_macs,
    no_params,
)

if TYPE_CHECKING:
    import torch

    from edgebuild.ops.operator import Ints


class Buffer(LayerBase):
    op: Literal["buffer"]
    length: int = Field(strict=True, ge=2, le=1024,
                        description="frames kept: the output is (channels, length), oldest first; "
                                    "dataset samples are clips of this many frames")


def out_shape(layer: Buffer, shapes: Sequence[Shape]) -> Shape:
    shape = tuple(shapes[0])
    if math.prod(shape[1:]) != 1:
        raise ShapeError(f"a buffer keeps one value per channel per frame, so its input must be "
                         f"[C] or have spatial size 1; got {list(shape)} (pool or flatten first)")
    return (shape[0], layer.length)


def forward(layer: Buffer, module: None, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    x = inputs[0]
    return x.reshape(-1, layer.length, x.shape[1]).transpose(1, 2).contiguous()


def reference(layer: Buffer, quant: None, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    import numpy as np

    x = inputs[0]
    return np.ascontiguousarray(x.reshape(-1, layer.length, x.shape[1]).transpose(0, 2, 1))


def emit(step: CStep[Buffer]) -> CCode:
    """The window lives in a static state array (outside the arena, which is reused every
    inference); each inference pushes this frame's features and copies the window out."""
    assert step.state is not None
    return CCode(calls=(f"eb_buffer_push({step.out_shape[0]}, {step.layer.length}, "
                        f"{step.inputs[0]}, {step.state}, {step.output});",))


def onnx_emit(step: OnnxStep[Buffer]) -> OnnxCode:
    """As the reference: the frames of each clip regrouped, features of frame j in column j
    (the ONNX model's input is the whole clip, see interchange.export)."""
    import numpy as np

    shape = np.array([-1, step.layer.length, step.in_shapes[0][0]], dtype=np.int64)
    return step.start().then("Reshape", shape).then("Transpose", perm=(0, 2, 1)).named(
        step.output)


def state_bytes(layer: Buffer, out: Shape) -> int:
    """The window, int8, kept across inferences outside the arena."""
    return math.prod(out)


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 6), (
    {"name": "frame", "op": "conv1d", "out": 4, "kernel": 6},
    {"name": "buf", "op": "buffer", "length": 5},
    {"name": "t", "op": "conv1d", "out": 3, "kernel": 5},
))


OPERATOR = Operator(
    "buffer", Buffer, "one", Role.data, out_shape, no_params, no_macs,
    example=EXAMPLE,
    torch=Torch(forward), reference=reference, c=C(emit), onnx=Onnx(onnx_emit),
    stream=Stream(lambda layer: layer.length, state_bytes))

