"""What the MAX7800x target knows about each op, in one table (ops.extension.Extensions):
op name -> `HardwareOp`, the op's hardware operation, how the mapping (mapping.py) treats
it, how its hardware layer record is made and how the vendor's network description and
program name it. The operator records (ops/) know nothing of the device; an op missing
here does not run on it, and `edgebuild check` says so.

Several ops may share one hardware operation (pool1d, pool2d and global_pool all run as
"pool"); they share its record, so the code that sees only a hardware layer (its `op` is
the operation) finds the same record through `of_operation`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from edgebuild.core.geometry import IntPair, Shape, pair, window_out, window_sizes
from edgebuild.ops.extension import Extensions
from edgebuild.ops.operator import Unsupported
from edgebuild.ops.pool import pool_window
from edgebuild.targets.max7800x.hwlayer import Fields, HwLayer, Pool, inputs_of

if TYPE_CHECKING:
    from edgebuild.manifest import Layer
    from edgebuild.model.graph import Node
    from edgebuild.ops.add import Add
    from edgebuild.ops.buffer import Buffer
    from edgebuild.ops.concat import Concat
    from edgebuild.ops.conv1d import Conv1d
    from edgebuild.ops.conv2d import Conv2d
    from edgebuild.ops.conv_transpose2d import ConvTranspose2d
    from edgebuild.ops.global_pool import GlobalPool
    from edgebuild.ops.linear import Linear
    from edgebuild.ops.pool import Pool1d, Pool2d

# A builder makes the hardware layer of one manifest layer from the fields every layer has
# (`common`), the flattens absorbed so far (flatten -> the tensor it flattens), the tensors'
# shapes and the weight widths. It takes the layer record of its own op (`conv_layer` a
# Conv1d or Conv2d, ...), hence `Any` for the layer, as in the operator records' facets.
Builder = Callable[[Any, "Node", Fields, dict[str, str], dict[str, Shape], dict[str, int]],
                   HwLayer]


@dataclass(frozen=True)
class HardwareOp:
    """How an op runs on a MAX7800x CNN accelerator."""

    operation: str  # the hardware layer's operation (HwLayer.op)
    # makes its hardware layer from the common fields (None: they are the whole layer)
    build: Builder | None = None
    copies: bool = False  # copies each channel to the same processors ("operation: none")
    reads_concat: bool = False  # reads a concatenation of its inputs itself (`in_sequences`)
    inflight: bool = False  # runs an element-wise add of its input in-flight (`eltwise`)
    flattens_input: bool = False  # flattens its own input (the description's `flatten`)
    view: str | None = None  # free on the device when its readers absorb it ("flatten": they
    # flatten their input; "in_dim": they read it with another height and width)
    # the program's operator (the vendor tool's name; "none": no convolution); a layer with
    # one holds kernels in kernel memory
    operator: str = "none"
    ai8x: tuple[str, ...] = ()  # network-description `op` values that import as this op
    exports_as: str | None = None  # its network-description `op` as a layer's main operation

    @property
    def holds_kernels(self) -> bool:
        return self.operator != "none"


# --- builders -----------------------------------------------------------------------------

def conv_layer(layer: Conv1d | Conv2d, node: Node, common: Fields, flattened: dict[str, str],
               shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | _conv(layer, common["in_shape"], bits))


def transposed_layer(layer: ConvTranspose2d, node: Node, common: Fields,
                     flattened: dict[str, str], shapes: dict[str, Shape],
                     bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | _conv(layer, common["in_shape"], bits)
                   | {"output_pad": pair(layer.output_pad)})


def pool_layer(layer: Pool1d | Pool2d | GlobalPool, node: Node, common: Fields,
               flattened: dict[str, str], shapes: dict[str, Shape],
               bits: dict[str, int]) -> HwLayer:
    """A pool layer's window, or a global pool's: its whole input map (limits holds it to
    the device's pool sizes)."""
    window = pool_window(layer, common["in_shape"])
    pool = _pool(layer.mode, window.size, window.stride, len(common["in_shape"]) - 1)
    return HwLayer(**common | {"pool": pool, "pooled_shape": tuple(node.out_shape)})


def add_layer(layer: Add, node: Node, common: Fields, flattened: dict[str, str],
              shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | {"eltwise_operands": len(common["inputs"]), "eltwise": layer.name})


def buffer_layer(layer: Buffer, node: Node, common: Fields, flattened: dict[str, str],
                 shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    shifted = (node.out_shape[0], node.out_shape[1] - 1)
    return HwLayer(**common | {"in_shape": shifted, "pooled_shape": shifted})


def concat_layer(layer: Concat, node: Node, common: Fields, flattened: dict[str, str],
                 shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    return HwLayer(**common | {"in_channels": node.out_shape[0],
                               "in_shape": tuple(node.out_shape),
                               "pooled_shape": tuple(node.out_shape)})


def linear_layer(layer: Linear, node: Node, common: Fields, flattened: dict[str, str],
                 shapes: dict[str, Shape], bits: dict[str, int]) -> HwLayer:
    """A flattening linear reads the tensor before the flatten: its processors see C
    channels of H x W data."""
    read = flattened.get(inputs_of(layer)[0])
    update: Fields = dict(weight_bits=bits.get(layer.name), has_bias=layer.bias,
                          wide=layer.wide, flatten=layer.flatten or read is not None)
    if read is not None:
        shape = tuple(shapes[read])
        update.update({"in_shape": shape, "pooled_shape": shape, "in_channels": shape[0],
                       "members": (inputs_of(layer)[0], *common["members"])})
    return HwLayer(**common | update)


def _conv(layer: Conv1d | Conv2d | ConvTranspose2d, in_shape: Shape, bits: dict[str, int]
          ) -> Fields:
    dims = len(in_shape) - 1
    pool = None if layer.pool is None else _pool(layer.pool.mode, layer.pool.size,
                                                  layer.pool.stride, dims)
    pooled = in_shape if pool is None else _pooled(in_shape, pool)
    # one value per axis: a 2-D layer's fields are ints or pairs, a 1-D layer's ints (Conv1d)
    shape: Callable[[IntPair], tuple[int, ...]] = pair if dims == 2 else (
        lambda v: (cast(int, v),))
    return dict(kernel=shape(layer.kernel), pad=shape(layer.pad), stride=shape(layer.stride),
                dilation=shape(layer.dilation), groups=layer.groups, pool=pool,
                pooled_shape=pooled, weight_bits=bits.get(layer.name), has_bias=layer.bias,
                wide=layer.wide)


def _pool(mode: str, size: IntPair, stride: IntPair | None, dims: int) -> Pool:
    window = _Window(size, stride)
    sizes, strides = window_sizes(window, dims)
    return Pool(getattr(mode, "value", mode), sizes, strides)


@dataclass(frozen=True)
class _Window:
    size: int | tuple[int, int]
    stride: int | tuple[int, int] | None


def _pooled(shape: Shape, pool: Pool) -> Shape:
    return (shape[0], *(window_out(n, k, s) for n, k, s in zip(shape[1:], pool.size,
                                                                 pool.stride, strict=True)))


# --- the table ----------------------------------------------------------------------------

_POOL = HardwareOp("pool", pool_layer, copies=True, reads_concat=True)

OPERATORS: Extensions[HardwareOp] = Extensions("the MAX7800x accelerator", {
    "conv1d": HardwareOp("conv1d", conv_layer, reads_concat=True, operator="conv1d",
                         ai8x=("conv1d",), exports_as="conv1d"),
    "conv2d": HardwareOp("conv2d", conv_layer, reads_concat=True, inflight=True,
                         operator="conv2d", ai8x=("conv2d",), exports_as="conv2d"),
    "conv_transpose2d": HardwareOp("conv_transpose2d", transposed_layer, reads_concat=True,
                                   operator="convtranspose2d", ai8x=("convtranspose2d",),
                                   exports_as="convtranspose2d"),
    "linear": HardwareOp("linear", linear_layer, flattens_input=True, operator="linear",
                         ai8x=("linear", "fc", "mlp"), exports_as="mlp"),
    "pool1d": _POOL,
    "pool2d": _POOL,
    "global_pool": _POOL,
    "flatten": HardwareOp("flatten", view="flatten"),
    "reshape": HardwareOp("reshape", view="in_dim"),
    "passthrough": HardwareOp("passthrough", copies=True, reads_concat=True,
                              ai8x=("none", "passthrough")),
    "add": HardwareOp("add", add_layer, ai8x=("add",)),
    "concat": HardwareOp("concat", concat_layer, copies=True),
    "buffer": HardwareOp("buffer", buffer_layer, copies=True),
}, missing="the MAX7800x accelerator has no hardware operation for it; run the model on a "
   "CPU target (host, cortex-m4)")


def unsupported(layer: Layer) -> str | None:
    """Why `layer`'s op does not run on the device (None: it does)."""
    found = OPERATORS.for_op(layer.op)
    return found.reason if isinstance(found, Unsupported) else None


def extension(layer: Layer) -> HardwareOp:
    """The record of a layer's op (every op that reaches the mapping has one: layout checks
    first, and folded and dropped ops are gone before)."""
    found = OPERATORS.for_op(layer.op)
    if isinstance(found, Unsupported):
        raise ValueError(f"layer {layer.name!r}: {found.reason}")
    return found


def of_operation(operation: str) -> HardwareOp | None:
    """The record of a hardware operation (the ops that share one share their record)."""
    return next((ext for ext in OPERATORS.values() if ext.operation == operation), None)


def runnable(operation: str) -> bool:
    """A hardware operation the device runs as a layer (a view kept as a layer is not)."""
    ext = of_operation(operation)
    return ext is not None and ext.view is None


def runnable_operations() -> list[str]:
    return list(dict.fromkeys(ext.operation for ext in OPERATORS.values() if ext.view is None))
