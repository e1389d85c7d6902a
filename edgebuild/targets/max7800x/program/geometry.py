"""One hardware layer as the register programming sees it: operator, dimensions, passes,
processor maps and number format, derived from the hardware layer (hwlayer.HwLayer), its
placement (placement.LayerPlan) and its quantization.

Conventions (the accelerator's, as its synthesis tool computes them):
- Passes ("expansion"): a layer with C channels reads or writes ceil(C / 64) passes whatever
  its processor count; a pass holds ceil(C / passes) channels, rounded up to whole memory
  instances (4) when C exceeds 64.
- A linear layer is a 1x1 convolution. When it flattens its input it reads the C x H x W
  tensor as C channels of H x W pixels: the pooled dimensions stay H x W, the row and column
  counters see 1 x 1. Flattening data that is already flat (1 x 1) is no flatten at all
  (as the vendor's tool sees a network description without `flatten` there).
- A conv1d is a convolution over rows of length L with a k x 1 kernel. A dilated conv1d
  whose dilated span (k - 1) x d + 1 fits in the 9 taps the hardware has is that longer
  kernel with d - 1 zero taps between the weights (`device_weights`). A longer span runs,
  as the vendor's tool runs it, on the 2-D hardware (`columns_conv1d`): the row of L is read
  as ceil(L / d) rows of d columns, so that tap j of the kernel is one row further down; a
  3x3 kernel holds the taps in its middle column, padded by 1 on every side. A 3-tap kernel
  centred so computes its first output one row early: that row lands `out_ignore` bytes
  before the output offset.
- An element-wise layer reads `operands` tensors interleaved in data memory (operand i at
  word i of every group of `operands` words) and combines them before its convolution (or,
  an operator "none", as its whole operation); the only operation edgebuild has is `add`.
  Its pooling, if any, follows the operation (the description's `pool_first: false`): a
  hardware layer pools only in the convolution after a merged add; operands pooled first
  are pool layers of their own.
- A depthwise convolution (groups = input = output channels, MAX78002) holds one kernel
  per channel and pass; in broadcast mode (output processors = input processors, the mode
  the vendor's networks use) each processor writes its own channel, otherwise each quadrant
  writes its channels from its own write pointer (registers) with its biases in processor
  order (bias).
- A transposed convolution ("convtranspose2d", the hardware's stride-2 upsampling) walks a
  stride-times larger input with the padding PyTorch's convention implies,
  kernel - 1 - pad, and its kernels flipped with input and output channels swapped
  (`device_weights`); its stride register stays 0.
- `shift` is what the post-processing register's shift field holds: the layer's output
  shift (the network description's `output_shift`, edgebuild's `scale_exp`) plus
  8 - weight_bits, since 1/2/4-bit weights make products 2^(8 - bits) times smaller.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edgebuild.targets.max7800x.hwlayer import HwLayer
from edgebuild.targets.max7800x.operators import of_operation
from edgebuild.targets.max7800x.placement.datamemory import lead_bytes
from edgebuild.targets.max7800x.placement.kernelmemory import MAX_1D_TAPS, ChannelPasses
from edgebuild.targets.max7800x.placement.kernelmemory import PROCESSORS as PROCESSORS
from edgebuild.targets.max7800x.placement.records import LayerPlan


@dataclass(frozen=True)
class Geometry(ChannelPasses):
    name: str
    operator: str  # "conv2d", "conv1d", "linear", "none" (passthrough/pool only)
    in_channels: int
    out_channels: int
    in_dim: tuple[int, int]  # rows, columns the input counters walk (before pooling)
    pooled_dim: tuple[int, int]
    out_dim: tuple[int, int]
    kernel: tuple[int, int]
    pad: tuple[int, int]
    stride: tuple[int, int]
    pool: tuple[int, int]
    pool_stride: tuple[int, int]
    average: bool
    relu: bool
    flatten: bool
    wide: bool  # 32-bit output
    weight_bits: int
    shift: int
    big_data: bool  # CHW input (the model input only)
    processors: int
    output_processors: int
    in_offset: int
    out_offset: int
    write_gap: int
    operands: int = 1  # element-wise operands read interleaved (1: none)
    output_pad: int = 0  # a transposed convolution's extra output columns
    dilation: int = 1  # a conv1d's dilation, run as a stretched kernel (`kernel` is that)
    # or, operator "conv2d", as 3x3 over `dilation` columns (columns_conv1d)
    out_ignore: int = 0  # bytes written before out_offset (columns_conv1d)
    depthwise: bool = False  # groups = input = output channels: one kernel per channel
    streaming: bool = False  # reads its input from a circular buffer (program.stream)
    read_gap: int = 0  # input words skipped after each one read (interleaved data)

    @property
    def broadcast(self) -> bool:
        """A depthwise layer whose output processors are its input processors: each
        processor convolves and writes its own channel ("broadcast mode")."""
        return self.depthwise and self.processors == self.output_processors

    @property
    def output_width(self) -> int:
        return 32 if self.wide else 8

    @property
    def kernel_elements(self) -> int:
        return self.kernel[0] * self.kernel[1]

    @property
    def tram_max(self) -> int:
        """Columns one TRAM row holds: the padded pooled width less the kernel, plus one."""
        if self.operator == "none":
            return 1
        columns = self.pooled_dim[1]
        if self.operator == "convtranspose2d":  # the upsampled row, and its output padding
            columns = (columns - 1) * self.stride[1] + 1 + self.output_pad
        return max(0, columns + 2 * self.pad[1] - self.kernel[1]) + 1

    def description(self) -> str:
        """One line for the generated C's header comment, in the words a MAX7800x developer
        reads in the vendor's projects (input, pooling, operator, activation, output)."""
        rows, columns = self.pooled_dim if self.flatten else self.in_dim
        shape = f"{self.in_channels}x{rows}x{columns}"
        if self.flatten:
            shape += f" flattened to {self.in_channels * self.pooled_dim[0] * self.pooled_dim[1]}x1x1"
        pool = "no pooling" if max(self.pool) == 1 else (
            f"{'avg' if self.average else 'max'} pool {self.pool[0]}x{self.pool[1]} with stride "
            f"{self.pool_stride[0]}/{self.pool_stride[1]}")
        op = {"linear": "linear", "none": "no convolution"}.get(
            self.operator, f"{self.operator} with kernel size {self.kernel[0]}x{self.kernel[1]}, "
            f"stride {self.stride[0]}/{self.stride[1]}, pad {self.pad[0]}/{self.pad[1]}")
        out = "x".join(str(v) for v in (self.out_channels, *self.out_dim))
        width = ", 32-bit output" if self.wide else ""
        return f"{shape}, {pool}, {op}, {'ReLU' if self.relu else 'no activation'}, " \
               f"{out} output{width}"


def _pair(values: tuple[int, ...] | None, default: int) -> tuple[int, int]:
    if not values:
        return default, default
    return (values[0], values[1]) if len(values) > 1 else (values[0], 1)


def _dims(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, columns) of a per-sample shape (C,), (C, L) or (C, H, W)."""
    if len(shape) == 3:
        return shape[1], shape[2]
    if len(shape) == 2:
        return shape[1], 1
    return 1, 1


def operator_of(layer: HwLayer) -> str:
    """The vendor tool's operator name of a hardware layer ("none": no convolution)."""
    ext = of_operation(layer.op)
    return "none" if ext is None else ext.operator


def geometry(layer: HwLayer, plan: LayerPlan, shift: int, relu: bool, first: bool) -> Geometry:
    """The register view of hardware layer `layer` placed as `plan` (`relu`: its manifest
    layer's activation; `first`: it reads the model input)."""
    operator = operator_of(layer)
    pool = layer.pool
    pool_size = _pair(pool.size, 1) if pool else (1, 1)
    pool_stride = _pair(pool.stride, 1) if pool else (1, 1)
    pooled = _dims(layer.pooled_shape)
    in_dim = (1, 1) if layer.flatten else _dims(layer.in_shape)
    if operator == "linear":
        kernel, pad, stride = (1, 1), (0, 0), (1, 1)
    elif operator == "conv1d":
        dilation = layer.dilation[0] if layer.dilation else 1
        kernel = ((layer.kernel[0] if layer.kernel else 1) - 1) * dilation + 1, 1
        pad, stride = (_pair(layer.pad, 0)[0], 0), (_pair(layer.stride, 1)[0], 1)
    else:
        kernel, pad, stride = _pair(layer.kernel, 1), _pair(layer.pad, 0), _pair(layer.stride, 1)
    if operator == "conv1d" and not stretched_conv1d(layer):
        return columns_conv1d(layer, plan, shift, relu, first)
    if operator == "convtranspose2d":
        in_dim = (in_dim[0] * stride[0], in_dim[1] * stride[1])
        pad = (kernel[0] - 1 - pad[0], kernel[1] - 1 - pad[1])
    return Geometry(
        name=layer.name, operator=operator, in_channels=layer.in_channels,
        out_channels=layer.out_channels, in_dim=in_dim, pooled_dim=pooled,
        out_dim=_dims(layer.pooled_shape if layer.persistent else layer.out_shape),
        kernel=kernel, pad=pad, stride=stride,
        pool=pool_size, pool_stride=pool_stride, average=bool(pool and pool.mode == "avg"),
        relu=relu, flatten=layer.flatten and pooled != (1, 1), wide=layer.wide,
        weight_bits=layer.weight_bits or 8, shift=shift,
        big_data=first and plan.data_format == "CHW", processors=plan.processors,
        output_processors=plan.output_processors, in_offset=plan.in_offset,
        out_offset=plan.out_offset, write_gap=plan.write_gap,
        operands=max(1, layer.eltwise_operands),
        output_pad=_pair(layer.output_pad, 0)[1],
        dilation=layer.dilation[0] if operator == "conv1d" and layer.dilation else 1,
        depthwise=layer.depthwise, streaming=plan.streaming, read_gap=plan.read_gap or 0)


def stretched_conv1d(layer: HwLayer) -> bool:
    """Whether a conv1d's dilation fits in one 1-D kernel of at most MAX_1D_TAPS taps."""
    dilation = layer.dilation[0] if layer.dilation else 1
    taps = layer.kernel[0] if layer.kernel else 1
    return dilation == 1 or (taps - 1) * dilation < MAX_1D_TAPS


def columns_conv1d(layer: HwLayer, plan: LayerPlan, shift: int, relu: bool, first: bool
                   ) -> Geometry:
    """A dilated conv1d spanning more than MAX_1D_TAPS taps (kernel of at most 3, no padding
    or pooling: validation's rules) as the 2-D hardware runs it: its L inputs as
    ceil(L / d) rows of d columns, a 3x3 kernel padded by 1. The output keeps its length
    (the rows past it are written and never read)."""
    d = layer.dilation[0] if layer.dilation else 1
    plane = (-(-_dims(layer.in_shape)[0] // d), d)
    g = replace(geometry(replace(layer, op="conv2d", kernel=(3, 3), pad=(1, 1),
                                 stride=(1, 1), dilation=(1, 1), pool=None), plan, shift,
                         relu, first), in_dim=plane, pooled_dim=plane, dilation=d)
    return replace(g, out_ignore=lead_bytes(layer))


def device_weights(g: Geometry, weight: np.ndarray) -> np.ndarray:
    """A layer's weights as the accelerator convolves with them (`oriented`); a 1x1 kernel
    run as 3x3 (stream.padded_1x1) sits in the middle of zeros."""
    if g.kernel == (3, 3):
        weight = _squared(weight)
    return oriented(g.operator, g.dilation, weight)


def layer_weights(layer: HwLayer, weight: np.ndarray, streamed: bool = False) -> np.ndarray:
    """`device_weights` of a hardware layer not placed yet; `streamed`: a 1x1 kernel of
    it runs as 3x3 (placement.kernelmemory.streamed, which its neighbours decide)."""
    operator = operator_of(layer)
    dilation = layer.dilation[0] if operator == "conv1d" and layer.dilation else 1
    if operator == "conv1d" and not stretched_conv1d(layer):
        operator = "conv2d"  # columns_conv1d
    if streamed and operator in ("conv2d", "convtranspose2d"):
        weight = _squared(weight)
    return oriented(operator, dilation, weight)


def _squared(weight: np.ndarray) -> np.ndarray:
    """A 2-D 1x1 kernel as the 3x3 one padded by 1 that computes the same (its weight in
    the middle of zeros); any other kernel as it is."""
    if weight.ndim != 4 or weight.shape[-2:] != (1, 1):
        return weight
    square = np.zeros((*weight.shape[:2], 3, 3), dtype=weight.dtype)
    square[..., 1, 1] = weight[..., 0, 0]
    return square


def oriented(operator: str, dilation: int, weight: np.ndarray) -> np.ndarray:
    """Weights as the accelerator convolves with them: a transposed convolution's PyTorch
    layout (in, out, kh, kw) becomes (out, in, kh, kw) with each kernel flipped; a dilated
    conv1d's (out, in, k) gets dilation - 1 zero taps after every tap but the last, or, run
    on the 2-D hardware (columns_conv1d: operator conv2d, dilation > 1), its taps go down a
    3x3 kernel's middle column."""
    if operator == "conv1d" and dilation > 1:
        taps = (weight.shape[-1] - 1) * dilation + 1
        stretched = np.zeros((*weight.shape[:-1], taps), dtype=weight.dtype)
        stretched[..., ::dilation] = weight
        return stretched
    if operator == "conv2d" and dilation > 1:
        taps = weight.shape[-1]
        square = np.zeros((*weight.shape[:-1], 3, 3), dtype=weight.dtype)
        square[..., 3 - taps:, 1] = weight  # 2 taps: the top row (the padding) unused
        return square
    if operator != "convtranspose2d":
        return weight
    return np.flip(weight, axis=(2, 3)).swapaxes(0, 1)

