"""Where the accelerator's registers and memories sit in the Cortex-M4's address space.

The device profiles (profiles/*.yaml) hold what a network may do on a device; this table holds
how the C program reaches it: register and memory base addresses, the numbering of the per-layer
registers and the widths of their fields. They are facts of the silicon, the same for every
network, read from the vendor's register documentation as the synthesis tool encodes it. The
table is keyed by the profile's `family` (ai85 = MAX78000, ai87 = MAX78002). MAX78002's entry
also says where its register layout differs in more than place (see registers).

Addresses are absolute (the APB base included). A quadrant ("group") repeats every block at
`group_stride`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerRegisters:
    """Index of each per-layer register (MAX78000's numbering; MAX78002 renumbers them,
    adds a next-layer register, splits the mask register into count and offset and adds an
    output channel count). The address is Device.layer_register's."""

    rows: int = 0
    columns: int = 1
    oned: int = 2
    pool_rows: int = 3
    pool_columns: int = 4
    stride: int = 5
    write_ptr: int = 6
    write_ptr_timeslot: int = 7
    write_ptr_mask: int = 8
    write_ptr_channel: int = 9
    read_ptr: int = 10
    control: int = 11
    mask: int = 12
    tram: int = 13
    enables: int = 14
    post: int = 15
    control2: int = 20
    next_layer: int | None = None  # MAX78002 only
    mask_offset: int | None = None  # MAX78002: the kernel offset, apart from the count
    output_channels: int | None = None  # MAX78002 only


AI87_REGISTERS = LayerRegisters(
    next_layer=0, rows=1, columns=2, oned=3, pool_rows=4, pool_columns=5, stride=6,
    write_ptr=7, write_ptr_timeslot=8, write_ptr_mask=9, write_ptr_channel=10, read_ptr=11,
    control=12, control2=13, mask=14, mask_offset=15, output_channels=16, tram=17, enables=18,
    post=19)


@dataclass(frozen=True)
class Device:
    """The address map and field layout of one accelerator family."""

    family: str
    apb_base: int
    cnn_base: int  # the quadrant-0 control block
    group_stride: int  # bytes from one quadrant's block to the next
    layer_regs_offset: int  # per-layer register file, from cnn_base
    register_stride: int  # bytes from one register index to the next (same layer)
    layer_stride: int  # bytes from one layer's register to the next layer's
    aon_control: int  # the always-on control register (absolute)
    bias_base: int  # bias memory of quadrant 0 (absolute)
    kernel_base: int  # kernel memory of processor 0 (absolute)
    kernel_processor_stride: int  # bytes between two processors' kernel memories
    data_base: int  # data memory of quadrant 0 (absolute)
    instance_bytes: int  # bytes from one data memory instance to the next
    write_ptr_shift: int  # bit of the instance number in a write pointer
    pad_shift: int  # bit of the padding count in the row/column registers
    xpch_shift: int  # bit of the output channel span in layer control 2
    processors_per_group: int = 16
    processors_per_memory: int = 4
    groups: int = 4
    registers: LayerRegisters = LayerRegisters()
    # MAX78002 only (None on MAX78000): its row and column counters stop at the last pooling
    # fetch and hold the bytes to the next start (at this bit), with a padding-enable bit
    counter_step_shift: int | None = None
    pad_enable_shift: int | None = None
    pass_stride_shift: int | None = None  # stride register: bytes per pooled row, all passes
    prime_shifts: tuple[int, int] | None = None  # layer control: kernel rows-1, columns-1
    # cnn_init() clears the register files (SRAM test register bits; the bias memory too
    # when the network has one) and waits for the done bit
    clear_registers: int | None = None
    clear_bias: int = 0
    clear_done: int = 0
    # streaming (program.stream): the stream start, delta and rollover registers' indices,
    # in a file of their own on MAX78002 (one word per layer); the input frame size
    # register's index among the control registers; the FIFO control register
    stream_registers: tuple[int, int, int] = (16, 17, 18)
    stream_register_stride: int = 4 * 32
    frame_register: int = 612
    fifo_control: int = 0x50000000
    fifo_complete: bool = True  # the FIFO control's wait-for-complete-word bit is needed
    new_streaming: bool = False  # MAX78002's formulas for the stream registers
    # MAX78000 runs a standalone element-wise operation of more than two passes (or of more
    # than two operands over several passes) as one pass over the passes stacked as rows
    # (registers.emulated_eltwise)
    emulate_eltwise_passes: bool = False
    # MAX78002: cnn_start()'s control word says (this bit) that a CHW input streams in
    chw_stream_bit: int | None = None

    @property
    def instance_words(self) -> int:
        """32-bit words of address space of one data memory instance."""
        return self.instance_bytes // 16

    def control(self, group: int, index: int) -> int:
        """A global control register (0 = control, 1 = SRAM, 2 = layer count) of a quadrant."""
        return self.cnn_base + group * self.group_stride + index * 4

    def layer_register(self, group: int, index: int, layer: int) -> int:
        return (self.cnn_base + group * self.group_stride + self.layer_regs_offset
                + index * self.register_stride + layer * self.layer_stride)

    def stream_register(self, group: int, index: int, layer: int) -> int:
        """Stream register `index` (one of stream_registers) of `layer` in a quadrant."""
        return (self.cnn_base + group * self.group_stride + self.layer_regs_offset
                + index * self.stream_register_stride + layer * 4)

    def kernel_address(self, processor: int, column: int) -> int:
        """Kernel memory word `column` of `processor`, in the loader's compressed address form:
        the loader streams 9-byte kernels into consecutive 32-bit words from this address."""
        group, local = divmod(processor, self.processors_per_group)
        return (self.kernel_base + group * self.group_stride
                + local * self.kernel_processor_stride + column * 4)

    def quadrant(self, address: int) -> int:
        """The quadrant whose register block, bias or data memory `address` is in."""
        return (address - self.cnn_base) // self.group_stride

    def bias_address(self, group: int) -> int:
        return self.bias_base + group * self.group_stride

    def data_address(self, processor: int, offset: int) -> int:
        """Byte `offset` in the data memory instance that `processor` reads."""
        group, local = divmod(processor, self.processors_per_group)
        instance = local // self.processors_per_memory
        return (self.data_base + group * self.group_stride
                + instance * self.instance_bytes + offset)


# 32 layers: the register of index i for layer l is 32 words after index i - 1's
MAX78000 = Device(family="ai85", apb_base=0x50000000, cnn_base=0x50100000,
                  group_stride=0x400000, layer_regs_offset=0x10, register_stride=4 * 32,
                  layer_stride=4, aon_control=0x50001000, bias_base=0x50108000,
                  kernel_base=0x50180000, kernel_processor_stride=0x4000,
                  data_base=0x50400000, instance_bytes=0x8000, write_ptr_shift=13,
                  pad_shift=16, xpch_shift=8, emulate_eltwise_passes=True)

# 128 layers, each with a block of 0x100 bytes of registers; 16 MB per quadrant; a data
# memory instance spans 0x20000 bytes (of which 5120 words exist); kernel memory of a
# processor 0x20000 bytes (8192 columns of address space)
MAX78002 = Device(family="ai87", apb_base=0x50000000, cnn_base=0x51000000,
                  group_stride=0x1000000, layer_regs_offset=0x100000, register_stride=4,
                  layer_stride=0x100, aon_control=0x50001000, bias_base=0x51180000,
                  kernel_base=0x51400000, kernel_processor_stride=0x20000,
                  data_base=0x51800000, instance_bytes=0x20000, write_ptr_shift=15,
                  pad_shift=13, xpch_shift=12, registers=AI87_REGISTERS,
                  counter_step_shift=16, pad_enable_shift=15, pass_stride_shift=4,
                  prime_shifts=(22, 18), clear_registers=1 << 12 | 1 << 11 | 1 << 7,
                  clear_bias=1 << 10, clear_done=1 << 25,
                  stream_registers=(0x2000, 0x2008, 0x2010), stream_register_stride=4,
                  frame_register=0x42018, fifo_complete=False, new_streaming=True,
                  chw_stream_bit=6)

DEVICES = {"ai85": MAX78000, "ai87": MAX78002}


def device(family: str) -> Device:
    """The address map of a profile's family."""
    return DEVICES[family]
