"""Register words: the global control writes of cnn_init() and cnn_start(), and every
hardware layer's per-quadrant register file written by cnn_configure().

Each value is derived field by field from the layer's geometry, its kernel and bias slots and
the quadrants the network uses, following the accelerator's register layout (MAX78000 here).
Like the vendor's tool, a register whose value is zero is not written (the registers are
zero after the accelerator is reset), except the always-on control register.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebuild.targets.max7800x.program.bias import LayerBias
from edgebuild.targets.max7800x.program.device import Device
from edgebuild.targets.max7800x.program.geometry import Geometry
from edgebuild.targets.max7800x.program.kernels import LayerKernels, ffs, fls

CLOCKS = 1 << 3  # control register: clocks enabled
MEXPRESS = 1 << 20  # control register: the kernel loader streams 9-byte kernels
SRAM_CONTROL = 0x40E
INSTANCE_WORDS = 2048  # MAX78000 data memory instance, in words


@dataclass(frozen=True)
class Write:
    address: int
    value: int
    comment: str


def init_writes(dev: Device, groups: list[int], layers: int) -> list[Write]:
    """cnn_init(): always-on control, then per quadrant: stop, SRAM control, layer count."""
    writes = [Write(dev.aon_control, 0, "AON control")]
    for q in groups:
        writes += [Write(dev.control(q, 0), CLOCKS | MEXPRESS, "Stop SM"),
                   Write(dev.control(q, 1), SRAM_CONTROL, "SRAM control"),
                   Write(dev.control(q, 2), layers - 1, "Layer count")]
    return writes


def start_writes(dev: Device, groups: list[int]) -> list[Write]:
    """cnn_start(): every quadrant enabled (the first as the master, synchronized to it),
    then the master started."""
    first = groups[0]
    base = CLOCKS | MEXPRESS
    writes = [Write(dev.control(q, 0), base | (q != first) | 1 << 11 | first << 9,
                    f"Enable quadrant {q}") for q in groups]
    return writes + [Write(dev.control(first, 0), base | 1, f"Master enable quadrant {first}")]


@dataclass(frozen=True)
class LayerContext:
    """What a layer's registers need besides its geometry."""

    index: int
    kernels: LayerKernels | None
    bias: LayerBias | None
    groups: list[int]  # quadrants the network uses


def layer_writes(dev: Device, g: Geometry, ctx: LayerContext) -> list[Write]:
    """The non-zero registers of layer `ctx.index` in every quadrant the network uses."""
    writes = []
    for q in ctx.groups:
        regs = dev.registers
        fields = [(regs.rows, _count(g, 0), "Rows"), (regs.columns, _count(g, 1), "Columns"),
                  (regs.pool_rows, g.pool[0] - 1, "Pooling rows"),
                  (regs.pool_columns, g.pool[1] - 1, "Pooling columns"),
                  (regs.stride, _stride(g), "Stride"),
                  (regs.write_ptr, _write_ptr(dev, g, q), "SRAM write ptr"),
                  (regs.write_ptr_timeslot, _timeslot(g), "Write ptr time slot offs"),
                  (regs.write_ptr_mask, 0 if g.operator == "none" else 1 << dev.write_ptr_shift,
                   "Write ptr mask offs"),
                  (regs.write_ptr_channel, _channel_offset(g), "Write ptr multi-pass channel offs"),
                  (regs.read_ptr, g.in_offset // 4, "SRAM read ptr"),
                  (regs.control, _control(g, ctx, q), "Layer control"),
                  (regs.control2, _control2(dev, g), "Layer control 2"),
                  (regs.mask, _mask(g, ctx.kernels), "Mask offset and count"),
                  (regs.oned, _oned(g, ctx.kernels), "1D"),
                  (regs.tram, _tram(g), "TRAM ptr max"),
                  (regs.post, _post(g, ctx, q), "Post processing register"),
                  (regs.enables, _enables(g, q), "Mask and processor enables")]
        writes += [Write(dev.layer_register(q, reg, ctx.index), value, comment)
                   for reg, value, comment in fields if value]
    return writes


def _count(g: Geometry, axis: int) -> int:
    """Row (axis 0) or column counter: last input index plus both paddings, and the padding."""
    size = g.pool[axis] if g.flatten else g.in_dim[axis]
    pad = g.pad[axis]
    return (size - 1 | pad << 16) + 2 * pad


def _stride(g: Geometry) -> int:
    if g.operator == "convtranspose2d":  # the upsampling's stride is implied
        return 0
    return g.pool_stride[0] - 1 if g.pool_stride[0] > 1 else g.stride[0] - 1


def _write_ptr(dev: Device, g: Geometry, group: int) -> int:
    """Output offset in words, and the memory instance of the first output processor."""
    value = g.out_offset // 4
    if g.operator != "none":
        instance = ffs(g.output_processors) & ~3
    else:
        local = g.output_processors & 0xFFFF << group * 16
        instance = ffs(local) & ~3 if local else 0
    return value | (instance % 4) * dev.instance_bytes // 16 | (instance // 4) << dev.write_ptr_shift


def _timeslot(g: Geometry) -> int:
    if g.operator in ("conv2d", "linear"):
        return 1 if g.kernel == (1, 1) else 0
    if g.operator == "none":
        # a copy of more than one memory instance, or a multi-pass element-wise operation,
        # writes a whole instance apart per time slot
        spread = g.processors.bit_count() > 4 or g.operands > 1 and g.in_expand > 1
        return INSTANCE_WORDS * 4 if spread else INSTANCE_WORDS
    return 0


def _channel_offset(g: Geometry) -> int:
    return g.output_width // 8 * (g.write_gap + 1) if g.out_expand > 1 else 0


def _control(g: Geometry, ctx: LayerContext, group: int) -> int:
    value = (0x200 if g.relu else 0) | (0 if g.average else 0x100) \
        | (0x80 if max(g.pool) > 1 else 0) | (0x40 if g.big_data else 0) | 0x20 | 1 << 11
    if g.wide:
        value |= 1 << 16
    if g.operator != "none" and group == ctx.groups[0]:
        sources = sum(1 << t for t in range(group + 1, 4) if g.processors >> t * 16 & 0xFFFF)
        if ctx.bias is not None and ctx.bias.group != group:
            sources |= 1 << ctx.bias.group
        value |= sources << 12
    return value


def _flatten_count(g: Geometry) -> int:
    return g.in_expand * g.pooled_dim[0] * g.pooled_dim[1] - 1 if g.flatten else 0


def _control2(dev: Device, g: Geometry) -> int:
    out_map = g.output_processors
    bits = g.weight_bits if g.operator != "none" else 0  # a copy has no weights
    in_exp = _flatten_count(g) & 0x0F if g.flatten else g.in_expand - 1
    skip = g.out_expand * (g.write_gap + 1) - 1 if g.operator != "none" else g.write_gap
    return (fls(out_map) - (ffs(out_map) & ~3)) * bits << dev.xpch_shift | in_exp | skip << 4


def _mask(g: Geometry, kernels: LayerKernels | None) -> int:
    """Kernel memory start and end, in bits-sized units of 8: (start << 16) | end."""
    if g.operator == "none" or kernels is None:
        return (g.out_expand - 1) * 8
    last = (kernels.count - 1) * g.weight_bits
    start = 9 * kernels.offset // g.kernel_elements * 8
    return start << 16 | last + start


def _time_slots(g: Geometry) -> int:
    """A copy layer ("none") writes the channels of each memory instance one per time slot:
    the most slots any quadrant needs, less one (4 channels' bytes per slot)."""
    if g.operator != "none":
        return 0
    counts = [(g.processors >> 16 * q & 0xFFFF).bit_count() for q in range(4)]
    return max(((n * g.output_width // 8 - 1) // 4 for n in counts if n), default=0)


def _oned(g: Geometry, kernels: LayerKernels | None) -> int:
    value = _time_slots(g)
    if g.operator == "conv1d":
        value |= g.kernel[0] << 8 | 1 << 12
    elif g.operator in ("conv2d", "linear") and g.kernel == (1, 1) \
            or g.operator == "none" and g.operands == 1:
        value |= 1 << 8
    value |= _eltwise(g)
    if kernels is not None and g.operator != "none":
        value |= 9 * kernels.offset % g.kernel_elements << 4
    return value


ELTWISE_ADD = 0b01  # the element-wise function field's code for add (sub 0, or 2, xor 3)


def _eltwise(g: Geometry) -> int:
    """The 1D register's element-wise fields: enable, function, operand count less one,
    and whether a convolution follows. Bit 16 (pool the operands first) stays clear: a
    layer's pooling follows its element-wise operation (geometry's docstring)."""
    if g.operands == 1:
        return 0
    value = 1 << 13 | ELTWISE_ADD << 14 | (g.operands - 1) << 18
    if g.operator != "none":
        value |= 1 << 17
    return value


def _tram(g: Geometry) -> int:
    if g.operator == "conv1d" or g.operator in ("conv2d", "linear") and g.kernel == (1, 1):
        count = _flatten_count(g)
        return count << 16 | (2 * count + 1) if count >= 16 else 0
    return g.tram_max - 1


def _post(g: Geometry, ctx: LayerContext, group: int) -> int:
    value = {1: 1 << 22, 2: 2 << 22, 4: 3 << 22}.get(g.weight_bits, 0)
    value |= ((-g.shift | 16) if g.shift < 0 else g.shift) << 13
    if ctx.bias is not None and group == ctx.bias.group:
        value |= 1 << 12 | ctx.bias.offset
    if g.operator == "none":
        # no convolution: pass the data through (3), or the element-wise result (1)
        value |= (3 if g.operands == 1 else 1) << 24
    count = _flatten_count(g)
    if count >= 16:
        value |= 1 << 27 | (count >> 4) << 18
    if g.operator == "convtranspose2d":
        value |= 1 << 28
    return value


def _enables(g: Geometry, group: int) -> int:
    local = g.processors >> group * 16 & 0xFFFF
    return local << 16 | local if g.operator != "none" else local
