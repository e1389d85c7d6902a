"""Fields and arithmetic common to conv1d and conv2d (each op keeps its own module)."""

from __future__ import annotations

from pydantic import Field

from edgebuild.ops.base import Activation, Count, FusedPool, LayerBase, ShapeError


class ConvFields(LayerBase):
    out: Count = Field(description="output channels")
    groups: Count = Field(default=1, description="1 = dense, in_channels = depthwise")
    bias: bool = True
    act: Activation = Activation.none
    pool: FusedPool | None = Field(default=None, description="pooling applied to the input first")
    wide: bool = Field(default=False, description="int32 output; only on the last layer")


def check_groups(layer: ConvFields, in_channels: int) -> None:
    if in_channels % layer.groups or layer.out % layer.groups:
        raise ShapeError(f"groups={layer.groups} must divide both the input channels "
                         f"({in_channels}) and out ({layer.out})")


def conv_params(layer: ConvFields, in_channels: int, kernel_elems: int) -> int:
    weights = layer.out * (in_channels // layer.groups) * kernel_elems
    return weights + (layer.out if layer.bias else 0)


def conv_macs(layer: ConvFields, in_channels: int, kernel_elems: int, out_positions: int) -> int:
    """Each output value (out channels x positions) sums (in/groups) x kernel products."""
    return layer.out * out_positions * (in_channels // layer.groups) * kernel_elems
