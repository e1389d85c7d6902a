"""Register words: the global control writes of cnn_init() and cnn_start(), and every
hardware layer's per-quadrant register file written by cnn_configure().

Each value is derived field by field from the layer's geometry, its kernel and bias slots and
the quadrants the network uses, following the accelerator's register layout. MAX78002 lays
out some fields differently (the Device record says where): its row and column counters stop
at the last pooling fetch, the stride register also counts bytes per pass, layer control
holds the kernel size ("prime" counts), the mask register is split into count and offset
beside an output channel count; and its cnn_init() clears the register files first.
Like the vendor's tool, a register whose value is zero is not written (the registers are
zero after the accelerator is reset), except the always-on control register and the writes
of the clearing sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebuild.targets.max7800x.program.bias import LayerBias
from edgebuild.targets.max7800x.program.device import Device
from edgebuild.targets.max7800x.program.geometry import Geometry
from edgebuild.targets.max7800x.program.kernels import LayerKernels, ffs, fls
from edgebuild.targets.max7800x.program.stream import LayerStream

CLOCKS = 1 << 3  # control register: clocks enabled
MEXPRESS = 1 << 20  # control register: the kernel loader streams 9-byte kernels
SRAM_CONTROL = 0x40E
SRAM_TEST = 3  # the global control register that runs memory tests and clearing
FIFO = 1 << 15  # control register: the input FIFO feeds the quadrant
STREAMING = 1 << 14  # control register (start): some layer streams
FIFO_SYNC = 1 << 11 | 1 << 19  # control register (start): FIFO input, streaming from it


@dataclass(frozen=True)
class Write:
    address: int
    value: int
    comment: str


@dataclass(frozen=True)
class Wait:
    """A busy wait until (register & mask) == mask: no state of its own, only an order."""

    address: int
    mask: int
    comment: str


def init_writes(dev: Device, groups: list[int], layers: int, bias: bool = False,
                fifo: bool = False) -> list[Write | Wait]:
    """cnn_init(): (MAX78002: clocks on and the register files cleared), always-on control,
    then per quadrant: stop, SRAM control (unless the clearing set it), layer count."""
    clears = dev.clear_registers is not None
    writes: list[Write | Wait] = [Write(dev.control(q, 0), CLOCKS, "Enable clocks")
                                  for q in groups if clears]
    writes.append(Write(dev.aon_control, 0, "AON control"))
    if clears:
        writes += _clear_writes(dev, groups, bias)
    for q in groups:
        writes.append(Write(dev.control(q, 0), CLOCKS | MEXPRESS | (FIFO if fifo else 0),
                            "Stop SM"))
        if not clears:
            writes.append(Write(dev.control(q, 1), SRAM_CONTROL, "SRAM control"))
        writes.append(Write(dev.control(q, 2), layers - 1, "Layer count"))
    return writes


def _clear_writes(dev: Device, groups: list[int], bias: bool) -> list[Write | Wait]:
    """MAX78002's registers and (when the network has a bias) bias memory are not zero after
    reset: every quadrant clears them, the program waits for all, then stops the test."""
    assert dev.clear_registers is not None
    clear = dev.clear_registers | (dev.clear_bias if bias else 0)
    return [*(Write(dev.control(q, 1), SRAM_CONTROL, "SRAM control") for q in groups),
            *(Write(dev.control(q, SRAM_TEST), clear, "Clear registers") for q in groups),
            *(Wait(dev.control(q, SRAM_TEST), dev.clear_done, "Wait for clear") for q in groups),
            *(Write(dev.control(q, SRAM_TEST), 0, "Reset BIST") for q in groups)]


def start_writes(dev: Device, groups: list[int], fifo: bool = False, chw: bool = False
                 ) -> list[Write]:
    """cnn_start(): every quadrant enabled (the first as the master, synchronized to it),
    then the master started. A network that streams from the FIFO (program.stream) runs
    every quadrant with the FIFO on and in streaming mode (on MAX78002 also marked when
    the input is `chw`)."""
    first = groups[0]
    base = CLOCKS | MEXPRESS | (STREAMING | FIFO_SYNC | FIFO if fifo else 0)
    if fifo and chw and dev.chw_stream_bit is not None:
        base |= 1 << dev.chw_stream_bit
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
    stream: LayerStream = LayerStream()


def layer_writes(dev: Device, g: Geometry, ctx: LayerContext) -> list[Write]:
    """The non-zero registers of layer `ctx.index` in every quadrant the network uses."""
    writes = []
    for q in ctx.groups:
        regs = dev.registers
        fields = [(regs.rows, _count(dev, g, 0), "Rows"),
                  (regs.columns, _count(dev, g, 1), "Columns"),
                  (regs.pool_rows, g.pool[0] - 1, "Pooling rows"),
                  (regs.pool_columns, g.pool[1] - 1, "Pooling columns"),
                  (regs.stride, _stride(dev, g), "Stride"),
                  (regs.write_ptr, _write_ptr(dev, g, q), "SRAM write ptr"),
                  (regs.write_ptr_timeslot, _timeslot(dev, g), "Write ptr time slot offs"),
                  (regs.write_ptr_mask, 0 if g.operator == "none" else 1 << dev.write_ptr_shift,
                   "Write ptr mask offs"),
                  (regs.write_ptr_channel, _channel_offset(g), "Write ptr multi-pass channel offs"),
                  (regs.read_ptr, g.in_offset // 4, "SRAM read ptr"),
                  (regs.control, _control(dev, g, ctx, q), "Layer control"),
                  (regs.control2, _control2(dev, g), "Layer control 2"),
                  *_mask_fields(dev, g, ctx.kernels),
                  (regs.oned, _oned(g, ctx.kernels), "1D"),
                  (regs.tram, _tram(g) if ctx.stream.tram is None else ctx.stream.tram,
                   "TRAM ptr max"),
                  (regs.post, _post(g, ctx, q), "Post processing register"),
                  (regs.enables, _enables(g, q), "Mask and processor enables")]
        writes += [Write(dev.layer_register(q, reg, ctx.index), value, comment)
                   for reg, value, comment in fields if value]
        writes += _stream_writes(dev, ctx, q)
    return writes


def _count(dev: Device, g: Geometry, axis: int) -> int:
    """Row (axis 0) or column counter: last input index plus both paddings, and the padding."""
    if dev.counter_step_shift is not None:
        return _stop_count(dev, g, axis)
    size = g.pool[axis] if g.flatten else g.in_dim[axis]
    if axis == 0 and emulated_eltwise(dev, g):
        size *= g.in_expand
    pad = g.pad[axis]
    return (size - 1 | pad << 16) + 2 * pad


def emulated_eltwise(dev: Device, g: Geometry) -> bool:
    """Whether MAX78000 runs this standalone element-wise layer as one pass: its hardware
    combines the operands of a multi-pass element-wise operation right only for two
    operands in two passes (operands x passes == operands + passes). Any other multi-pass
    one reads, like the vendor's tool programs it, the passes of each pixel row as rows of
    their own (the interleaved words of a row are the same either way): one pass over
    rows x passes rows, no mask offset. A convolution or pooling cannot follow such a
    layer in-flight; validation keeps them apart (the profile's in-flight channel
    limits, pool_unfused_channels)."""
    n, passes = g.operands, g.in_expand
    return dev.emulate_eltwise_passes and g.operator == "none" and n > 1 and passes > 1 \
        and n * passes != n + passes


def _pool_rest(g: Geometry, axis: int) -> int:
    """Input rows (columns) from the last pooling window's start to the end: the window
    advances by the pool stride while a whole window fits."""
    size = g.pool[axis] if g.flatten else g.in_dim[axis]
    stride = g.pool_stride[axis]
    return size - (size - g.pool[axis]) // stride * stride


def _stop_count(dev: Device, g: Geometry, axis: int) -> int:
    """MAX78002's counter: the (0-based) index where the last pooling window starts, the
    bytes from there to the next window's start (rows: the rest of this row and the rows
    the pool stride skips, in every input pass and every interleaved element-wise operand,
    and every word a `read_gap` reader skips; a conv1d's "row" is one element wide), and
    padding as an enable bit and the padding less one."""
    assert dev.counter_step_shift is not None and dev.pad_enable_shift is not None
    size = g.pool[axis] if g.flatten else g.in_dim[axis]
    rest = _pool_rest(g, axis)
    step = rest
    if axis == 0:
        columns = g.pool[1] if g.flatten else g.in_dim[1]
        last = 1 if g.operator == "conv1d" else _pool_rest(g, 1)
        step = (last + (g.pool_stride[0] - 1) * columns) * g.in_expand * g.operands \
            * (g.read_gap + 1)
    value = size - rest | step << dev.counter_step_shift
    pad = g.pad[axis]
    if pad > 0:
        value |= 1 << dev.pad_enable_shift | pad - 1 << dev.pad_shift
    return value


def _stride(dev: Device, g: Geometry) -> int:
    if g.operator == "convtranspose2d":  # the upsampling's stride is implied
        return 0
    value = g.pool_stride[0] - 1 if g.pool_stride[0] > 1 else g.stride[0] - 1
    if dev.pass_stride_shift is not None:  # MAX78002: pooled rows advance over every pass
        # and over every interleaved element-wise operand and every word read_gap skips
        value |= g.pool_stride[0] * g.in_expand * g.operands * (g.read_gap + 1) \
            << dev.pass_stride_shift
    return value


def _write_ptr(dev: Device, g: Geometry, group: int) -> int:
    """Output offset in words, and the memory instance of the first output processor."""
    value = (g.out_offset - g.out_ignore) // 4
    if g.depthwise and not g.broadcast:
        instance = _moved_write_ptr(g, group)
        return 0 if instance is None else value | instance << dev.write_ptr_shift
    if g.operator != "none":
        instance = ffs(g.output_processors) & ~3
    else:
        local = g.output_processors & 0xFFFF << group * 16
        instance = ffs(local) & ~3 if local else 0
    return value | (instance % 4) * dev.instance_bytes // 16 | (instance // 4) << dev.write_ptr_shift


def _moved_write_ptr(g: Geometry, group: int) -> int | None:
    """A depthwise layer without broadcast writes each quadrant's channels from where that
    quadrant's first channel goes: the first output processor, 16 further per quadrant
    after the first it reads with, less the first quadrant's unused leading processors;
    as a memory instance (of 4 processors). A quadrant before the first has no pointer
    (None)."""
    first = ffs(g.processors)
    first_group = first // 16
    if group < first_group:
        return None
    target = (group - first_group) * 16 + ffs(g.output_processors)
    if group != first_group:
        target -= first % 16
    return target // 4


def _timeslot(dev: Device, g: Geometry) -> int:
    if g.operator in ("conv2d", "linear"):
        if g.depthwise:  # each channel to its own processor's memory, unless broadcast
            return 0 if g.broadcast else dev.instance_words * 4
        return 1 if g.kernel == (1, 1) else 0
    if g.operator == "none":
        # a copy of more than one memory instance, or a multi-pass element-wise operation,
        # writes a whole instance apart per time slot
        words = dev.instance_words
        spread = g.processors.bit_count() > 4 or g.operands > 1 and g.in_expand > 1
        return words * 4 if spread else words
    return 0


def _channel_offset(g: Geometry) -> int:
    return g.output_width // 8 * (g.write_gap + 1) if g.out_expand > 1 else 0


def _control(dev: Device, g: Geometry, ctx: LayerContext, group: int) -> int:
    value = (0x200 if g.relu else 0) | (0 if g.average else 0x100) \
        | (0x80 if max(g.pool) > 1 else 0) | (0x40 if g.big_data else 0) | 0x20 | 1 << 11
    if g.wide:
        value |= 1 << 16
    if g.broadcast:
        value |= 1 << 29
    if g.operator != "none" and group == ctx.groups[0] and not g.depthwise:
        sources = sum(1 << t for t in range(group + 1, 4) if g.processors >> t * 16 & 0xFFFF)
        if ctx.bias is not None and ctx.bias.group != group:
            sources |= 1 << ctx.bias.group
        value |= sources << 12
    if dev.prime_shifts is not None and g.operator != "none":
        rows, columns = dev.prime_shifts
        value |= g.kernel[0] - 1 << rows | g.kernel[1] - 1 << columns
    return value


def _flatten_count(g: Geometry) -> int:
    return g.in_expand * g.pooled_dim[0] * g.pooled_dim[1] - 1 if g.flatten else 0


def _control2(dev: Device, g: Geometry) -> int:
    out_map = g.output_processors
    bits = g.weight_bits if g.operator != "none" else 0  # a copy has no weights
    in_exp = _flatten_count(g) & 0x0F if g.flatten else g.in_expand - 1
    if emulated_eltwise(dev, g):
        in_exp = 0
    skip = g.out_expand * (g.write_gap + 1) - 1 if g.operator != "none" else g.write_gap
    return (fls(out_map) - (ffs(out_map) & ~3)) * bits << dev.xpch_shift | in_exp | skip << 4


def _mask_span(g: Geometry, kernels: LayerKernels) -> tuple[int, int]:
    """Kernel memory start and end, in bit-sized units of 8."""
    last = (kernels.count - 1) * g.weight_bits
    start = 9 * kernels.offset // g.kernel_elements * 8
    return start, last + start


def _mask_fields(dev: Device, g: Geometry, kernels: LayerKernels | None
                 ) -> list[tuple[int, int, str]]:
    """MAX78000: one register, (start << 16) | end; a layer without weights holds its output
    passes there. MAX78002: the end ("count") and the start ("offset") apart, and the output
    channels the kernels cover (a copy layer: its time slots)."""
    regs = dev.registers
    offset, channels = regs.mask_offset, regs.output_channels
    weighted = None if g.operator == "none" else kernels
    if offset is None or channels is None:
        value = 0 if emulated_eltwise(dev, g) else (g.out_expand - 1) * 8
        if weighted is not None:
            start, end = _mask_span(g, weighted)
            value = start << 16 | end
        return [(regs.mask, value, "Mask offset and count")]
    if weighted is None:
        return [(offset, (g.out_expand - 1) * 8, "Mask offset"),
                (channels, _time_slots(g), "Output channel count")]
    start, end = _mask_span(g, weighted)
    count = (_time_slots(g) + 1) * g.in_expand if g.depthwise else weighted.count
    return [(regs.mask, end, "Mask count"), (offset, start, "Mask offset"),
            (channels, count - 1, "Output channel count")]


def _time_slots(g: Geometry) -> int:
    """A copy layer ("none") writes the channels of each memory instance one per time slot:
    the most slots any quadrant needs, less one (4 channels' bytes per slot). A depthwise
    layer writes one channel per slot: in broadcast mode the up to 4 channels of a memory
    instance, else every channel of the quadrant (its bytes)."""
    counts = [(g.processors >> 16 * q & 0xFFFF).bit_count() for q in range(4)]
    if g.depthwise:
        width = g.output_width
        slots = [(min(n - 1, 3) + 1) * width // 8 - 1 if g.broadcast else (n * width + 7) // 8 - 1
                 for n in counts if n]
        return max(slots, default=0)
    if g.operator != "none":
        return 0
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
    if ctx.bias is not None and ctx.bias.offsets is not None:  # depthwise: every quadrant's
        offset = ctx.bias.offsets[group]
        if offset is not None:
            value |= 1 << 12 | (offset // 4 if g.broadcast else offset)
    elif ctx.bias is not None and group == ctx.bias.group:
        value |= 1 << 12 | ctx.bias.offset
    if g.operator == "none":
        # no convolution: pass the data through (3), or the element-wise result (1)
        value |= (3 if g.operands == 1 else 1) << 24
    count = _flatten_count(g)
    if count >= 16:
        value |= 1 << 27 | (count >> 4) << 18
    if g.operator == "convtranspose2d":
        value |= 1 << 28
    if g.depthwise:  # depthwise enable, time slots
        value |= 1 << 30 | 1 << 24
    return value


def _enables(g: Geometry, group: int) -> int:
    local = g.processors >> group * 16 & 0xFFFF
    return local << 16 | local if g.operator != "none" else local


def _stream_writes(dev: Device, ctx: LayerContext, group: int) -> list[Write]:
    """A streaming layer's (or the FIFO-reading first layer's) stream registers."""
    start, delta, rollover = dev.stream_registers
    s = ctx.stream
    fields = [(start, s.start, "Stream processing start"),
              (delta, s.delta, "Stream processing delta"), (rollover, s.rollover, "Rollover")]
    writes = [Write(dev.stream_register(group, reg, ctx.index), value, comment)
              for reg, value, comment in fields if value]
    if s.frame:
        writes.append(Write(dev.control(group, dev.frame_register), s.frame, "Input frame size"))
    return writes
