"""What on-device training knows about each op, in one table (ops.extension.Extensions):
op name -> `TrainOp`, the kernel of the training library (templates/train/eb_train.c)
that runs the op in the float32 part and the geometry that kernel needs of a layer.

The operator records (ops/) know nothing of training kernels: an op missing here cannot
be in the trainable part, and the reason says so (ondevice.backward raises it as the
manifest's error). The geometry follows the training kernels' layout: they lay 1-D signals
as columns (L x 1), so a 1-D layer's row tiles are time spans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import Plane, Shape, pool_plane, pooled
from edgebuild.ops import conv, conv1d, conv2d, linear, pool
from edgebuild.ops.extension import Extensions

if TYPE_CHECKING:
    from edgebuild.ops.conv import Axes, Conv
    from edgebuild.ops.global_pool import GlobalPool
    from edgebuild.ops.linear import Linear
    from edgebuild.ops.pool import Pool1d, Pool2d


class TrainKernel(StrEnum):
    """The kernel of the training library that runs an op."""

    conv = "conv"  # ebt_conv_*: convolutions and linear layers (a 1 x 1 convolution)
    pool = "pool"  # ebt_pool_*
    add = "add"  # ebt_add_forward / ebt_accumulate
    concat = "concat"  # ebt_concat_forward / per-part ebt_accumulate
    view = "view"  # no kernel: the float tensor is the input's (float tensors are flat)


@dataclass(frozen=True)
class TrainGeometry:
    """What a training kernel needs to know about a layer: the convolution's plane (None
    for kernels without weights) and the pooling plane (a pool layer's, or a convolution's
    fused input pooling)."""

    conv: Plane | None = None
    pool: Plane | None = None
    pool_mode: str | None = None  # "max" / "avg" when there is a pool
    fully_connected: bool = False  # the PyTorch reference of the step uses F.linear


# `geometry(layer, in_shapes, out_shape)` of the op's own layer record, hence `Any`
Geometry = Callable[[Any, Sequence[Shape], Shape], TrainGeometry]


@dataclass(frozen=True)
class TrainOp:
    """How an op runs in the float32 part of on-device training."""

    kernel: TrainKernel
    geometry: Geometry = lambda layer, shapes, out: TrainGeometry()

    @property
    def weighted(self) -> bool:
        """Its weights are trained (a convolution kernel)."""
        return self.kernel is TrainKernel.conv


def conv_geometry(layer: Conv, in_shapes: Sequence[Shape], out_shape: Shape,
                  axes: Axes[Conv]) -> TrainGeometry:
    shape = in_shapes[0]
    pooling = None
    if layer.pool is not None:
        pooling = pool_plane(layer.pool, shape, vertical=True)
        shape = pooled(shape, layer.pool, len(shape) - 1)
    plane = conv.conv_plane(layer, shape, out_shape, axes, vertical=True)
    return TrainGeometry(plane, pooling, None if layer.pool is None else layer.pool.mode.value)


def _convolution(axes: Axes[Conv]) -> TrainOp:
    return TrainOp(TrainKernel.conv, lambda layer, shapes, out: conv_geometry(layer, shapes,
                                                                            out, axes))


def linear_geometry(layer: Linear, shapes: Sequence[Shape], out: Shape) -> TrainGeometry:
    return TrainGeometry(conv=linear.plane(layer, shapes[0]), fully_connected=True)


def pool_geometry(layer: Pool1d | Pool2d, shapes: Sequence[Shape], out: Shape) -> TrainGeometry:
    return TrainGeometry(pool=pool_plane(pool.window(layer), shapes[0], vertical=True),
                         pool_mode=layer.mode.value)


def global_pool_geometry(layer: GlobalPool, shapes: Sequence[Shape],
                         out: Shape) -> TrainGeometry:
    """ebt_pool with the whole map as its one window (a column for a 1-D map, as pool1d)."""
    plane = pool_plane(pool.map_window(layer.mode, shapes[0]), shapes[0], vertical=True)
    return TrainGeometry(pool=plane, pool_mode=layer.mode.value)


VIEW = TrainOp(TrainKernel.view)

OPERATORS: Extensions[TrainOp] = Extensions("on-device training", {
    "conv1d": _convolution(conv1d.axes),
    "conv2d": _convolution(conv2d.axes),
    "linear": TrainOp(TrainKernel.conv, linear_geometry),
    "pool1d": TrainOp(TrainKernel.pool, pool_geometry),
    "pool2d": TrainOp(TrainKernel.pool, pool_geometry),
    "global_pool": TrainOp(TrainKernel.pool, global_pool_geometry),
    "add": TrainOp(TrainKernel.add),
    "concat": TrainOp(TrainKernel.concat),
    "flatten": VIEW,
    "reshape": VIEW,
    "passthrough": VIEW,
}, unsupported={
    "buffer": "its window holds the features of earlier inferences, which a training step "
              "does not keep; make the first trainable layer one after the buffer",
    "conv_transpose2d": "the training kernels have no transposed convolution; keep it "
                        "frozen, before the first trainable layer",
})
