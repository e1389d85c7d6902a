"""What every operator module provides, and the shape arithmetic they share.

Tensor layout convention (used by every stage after `validate`): channels first, no batch
dimension — `(C,)` for flat features, `(C, L)` for 1-D signals, `(C, H, W)` for images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from edgebuild.core.fields import Identifier, Strict

Shape = tuple[int, ...]

Count = Annotated[int, Field(strict=True, ge=1, le=65536)]
Small = Annotated[int, Field(strict=True, ge=1, le=64)]
Pad = Annotated[int, Field(strict=True, ge=0, le=64)]
Pair = Small | tuple[Small, Small]
PadPair = Pad | tuple[Pad, Pad]


class Activation(StrEnum):
    """Applied after the output shift, before saturation to int8 (see the numerics contract)."""

    none = "none"
    relu = "relu"
    abs = "abs"


class PoolMode(StrEnum):
    max = "max"
    avg = "avg"


class FusedPool(Strict):
    """Pooling of a layer's *input*, before its convolution — as the MAX78000 hardware does."""

    mode: PoolMode
    size: Pair
    stride: Pair | None = Field(default=None, description="defaults to size")


class LayerBase(Strict):
    name: Identifier
    inputs: tuple[Identifier, ...] | None = Field(
        default=None, description="names of earlier layers (or 'input'); default: the previous layer")
    doc: str = Field(default="", description="free text; never affects a build")


class ShapeError(ValueError):
    """A layer cannot accept the shapes it is given; the message names what is wrong."""


@dataclass(frozen=True)
class LayerPolicy:
    """The resolved quantization policy of one compute layer."""

    weight_bits: int
    bias_bits: int
    shift_quantile: float
    bias_scale_log2: int = 0  # bias = (bias_bits integer) x 2^this accumulator units
    shift_limits: tuple[int, int] = (-15, 15)  # allowed weight scale exponents (numerics)


@dataclass(frozen=True)
class Mode:
    """How the torch network computes. `float`: plain training (outputs clamped to the Q7
    range when `clamp`); `qat`: fake quantization that follows the integer math exactly.
    `scale_exps` pins each layer's weight scale (evaluation of quantized weights); without
    it the scale follows the weights (training)."""

    kind: Literal["float", "qat"]
    rounding: str = "half_up"
    clamp: bool = True
    policy: dict[str, LayerPolicy] = field(default_factory=dict)
    scale_exps: dict[str, int] | None = None


@dataclass(frozen=True)
class QuantParams:
    """A quantized compute layer: integer weights/bias and its weight scale exponent."""

    weight: object  # numpy int64
    bias: object | None  # numpy int64, accumulator units
    scale_exp: int
    bits: int


def no_module(layer, shapes):
    return None


@dataclass(frozen=True)
class Operator:
    """Everything the stages need to know about one op, looked up by `op:` name.

    `forward(layer, module, inputs, mode)` is the torch computation (float or fake-quant);
    `reference(layer, quant, inputs, rounding)` the numpy integer reference on int64
    batches (N, C, ...). Both are batch-first; shapes elsewhere are per sample."""

    name: str
    params: type[LayerBase]
    arity: Literal["one", "many"]
    out_shape: Callable[[LayerBase, list[Shape]], Shape]
    param_count: Callable[[LayerBase, list[Shape]], int]
    macs: Callable[[LayerBase, list[Shape], Shape], int]
    forward: Callable = None
    reference: Callable = None
    torch_module: Callable = no_module


def pair(value: int | tuple[int, int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


def window_out(size: int, kernel: int, stride: int, pad: int = 0, dilation: int = 1) -> int:
    """Output length of a sliding window (floor mode, like PyTorch)."""
    span = dilation * (kernel - 1) + 1
    if size + 2 * pad < span:
        raise ShapeError(f"window of {span} is larger than the padded input length {size + 2 * pad}")
    return (size + 2 * pad - span) // stride + 1


def pooled(shape: Shape, pool: FusedPool | None, dims: int) -> Shape:
    """Shape after a (fused or standalone) pooling window over the last `dims` axes."""
    if pool is None:
        return shape
    sizes = pair(pool.size) if dims == 2 else (_single(pool.size, "pool.size"),)
    strides = sizes if pool.stride is None else (
        pair(pool.stride) if dims == 2 else (_single(pool.stride, "pool.stride"),))
    spatial = tuple(window_out(n, k, s) for n, k, s in zip(shape[1:], sizes, strides, strict=True))
    return (shape[0], *spatial)


def _single(value: int | tuple[int, int], what: str) -> int:
    if not isinstance(value, int):
        raise ShapeError(f"{what} must be a single integer for a 1-D layer")
    return value


def expect_rank(shape: Shape, rank: int, op: str) -> None:
    names = {1: "(features)", 2: "(channels, length)", 3: "(channels, height, width)"}
    if len(shape) != rank:
        raise ShapeError(f"{op} expects an input of shape {names[rank]}, got {list(shape)}")


def one(shapes: list[Shape]) -> Shape:
    return shapes[0]


def no_params(layer: LayerBase, shapes: list[Shape]) -> int:
    return 0


def no_macs(layer: LayerBase, shapes: list[Shape], out: Shape) -> int:
    return 0
