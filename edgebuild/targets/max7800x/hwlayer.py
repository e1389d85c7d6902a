"""The accelerator's view of a folded model: one record per MAX7800x hardware layer, and
what the rules over them share. How manifest layers become hardware layers is mapping.py's;
how each op's hardware layer is made, operators.py's.

Shapes are per sample, channels first: (C,), (C, L) or (C, H, W).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypedDict

from edgebuild.core.geometry import Shape
from edgebuild.ops.operator import LayerBase


@dataclass(frozen=True)
class Pool:
    """A pooling window over the last 1 or 2 axes (fused into a layer or standalone)."""

    mode: str
    size: tuple[int, ...]
    stride: tuple[int, ...]


@dataclass(frozen=True)
class HwLayer:
    """One hardware layer. `name` is its placement key; `anchor` the manifest layer that
    error paths point at (the layer itself, or for a synthetic copy the element-wise layer
    it feeds)."""

    name: str
    members: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    in_channels: int
    in_shape: Shape
    pooled_shape: Shape
    out_channels: int
    out_shape: Shape
    kernel: tuple[int, ...] | None = None
    pad: tuple[int, ...] | None = None
    stride: tuple[int, ...] | None = None
    dilation: tuple[int, ...] | None = None
    output_pad: tuple[int, ...] | None = None  # transposed convolutions only
    groups: int = 1
    pool: Pool | None = None
    weight_bits: int | None = None
    has_bias: bool = False
    eltwise_operands: int = 0
    eltwise: str | None = None  # manifest name of the element-wise layer (merged or not)
    concat: str | None = None  # manifest name of a concat this layer reads directly
    flatten: bool = False
    wide: bool = False
    anchor: str = field(default="")
    has_weights: bool = False  # its op's role is compute
    copies: bool = False  # copies each channel within its processors ("operation: none")

    @property
    def synthetic(self) -> bool:
        return not self.members

    @property
    def inflight(self) -> bool:
        """An element-wise operation merged into a convolution."""
        return self.eltwise_operands > 0 and self.op != "add"

    @property
    def concatenates(self) -> bool:
        """Reads its inputs as one concatenated tensor (a concat layer, or one merged)."""
        return self.op == "concat" or self.concat is not None

    @property
    def persistent(self) -> bool:
        """Its output is kept across inferences (a buffer's window)."""
        return self.op == "buffer"

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.in_channels == self.out_channels

    @property
    def kernel_elements(self) -> int:
        """Weights per kernel: 9 for 3x3, L for conv1d, 1 for linear (a 1x1 convolution)."""
        return math.prod(self.kernel) if self.kernel else 1


class Fields(TypedDict, total=False):
    """HwLayer's fields, as `_layer` and the builders collect them before making one."""

    name: str
    members: tuple[str, ...]
    op: str
    inputs: tuple[str, ...]
    in_channels: int
    in_shape: Shape
    pooled_shape: Shape
    out_channels: int
    out_shape: Shape
    kernel: tuple[int, ...] | None
    pad: tuple[int, ...] | None
    stride: tuple[int, ...] | None
    dilation: tuple[int, ...] | None
    output_pad: tuple[int, ...] | None
    groups: int
    pool: Pool | None
    weight_bits: int | None
    has_bias: bool
    eltwise_operands: int
    eltwise: str | None
    concat: str | None
    flatten: bool
    wide: bool
    anchor: str
    has_weights: bool
    copies: bool


def inputs_of(layer: LayerBase) -> tuple[str, ...]:
    """What a folded layer reads: folding names every layer's inputs (model.folding)."""
    assert layer.inputs is not None
    return layer.inputs


def pixels(shape: Shape) -> int:
    """Values per channel: H*W, L, or 1 for flat data."""
    return math.prod(shape[1:])


def manifest_index(layers: tuple[LayerBase, ...]) -> dict[str, int]:
    """Index of each manifest layer name in `model.layers` (for error paths)."""
    index: dict[str, int] = {}
    for i, layer in enumerate(layers):
        index.setdefault(layer.name, i)
    return index


def interleaved(layer: HwLayer, processors: int) -> bool:
    """Reads its inputs interleaved: element-wise operands, or a concatenation of more
    channels than `processors` (read in several passes)."""
    return bool(layer.eltwise_operands) or (layer.concatenates and len(layer.inputs) > 1
                                             and layer.in_channels > processors)

