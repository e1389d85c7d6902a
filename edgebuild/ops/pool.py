"""pool1d / pool2d: standalone max or average pooling."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgebuild.ops.operator import (
    FusedPool,
    LayerBase,
    Operator,
    Pair,
    PoolMode,
    Small,
    expect_rank,
    no_macs,
    no_params,
    pooled,
)
from edgebuild.ops.pooling import reference_pool, torch_pool


class Pool1d(LayerBase):
    op: Literal["pool1d"]
    mode: PoolMode
    size: Small
    stride: Small | None = Field(default=None, description="defaults to size")


class Pool2d(LayerBase):
    op: Literal["pool2d"]
    mode: PoolMode
    size: Pair
    stride: Pair | None = Field(default=None, description="defaults to size")


def window(layer: Pool1d | Pool2d) -> FusedPool:
    return FusedPool(mode=layer.mode, size=layer.size, stride=layer.stride)


def out_shape_1d(layer: Pool1d, shapes):
    expect_rank(shapes[0], 2, "pool1d")
    return pooled(shapes[0], window(layer), 1)


def out_shape_2d(layer: Pool2d, shapes):
    expect_rank(shapes[0], 3, "pool2d")
    return pooled(shapes[0], window(layer), 2)


def forward_1d(layer: Pool1d, module, inputs, mode):
    return torch_pool(inputs[0], window(layer), 1, mode)


def forward_2d(layer: Pool2d, module, inputs, mode):
    return torch_pool(inputs[0], window(layer), 2, mode)


def reference_1d(layer: Pool1d, quant, inputs, rounding):
    return reference_pool(inputs[0], window(layer), 1, rounding)


def reference_2d(layer: Pool2d, quant, inputs, rounding):
    return reference_pool(inputs[0], window(layer), 2, rounding)


OPERATOR_1D = Operator("pool1d", Pool1d, "one", out_shape_1d, no_params, no_macs,
                       forward_1d, reference_1d)
OPERATOR_2D = Operator("pool2d", Pool2d, "one", out_shape_2d, no_params, no_macs,
                       forward_2d, reference_2d)
