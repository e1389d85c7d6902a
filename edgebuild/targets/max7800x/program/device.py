"""Where the accelerator's registers and memories sit in the Cortex-M4's address space.

The device profiles (profiles/*.yaml) hold what a network may do on a device; this table holds
how the C program reaches it: register and memory base addresses, the numbering of the per-layer
registers and the widths of their fields. They are facts of the silicon, the same for every
network, read from the vendor's register documentation as the synthesis tool encodes it. The
table is keyed by the profile's `family` (ai85 = MAX78000, ai87 = MAX78002).

Addresses are absolute (the APB base included). A quadrant ("group") repeats every block at
`group_stride`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerRegisters:
    """Index of each per-layer register: the address is base + index * stride + layer * 4."""

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


@dataclass(frozen=True)
class Device:
    """The address map and field layout of one accelerator family."""

    family: str
    apb_base: int
    cnn_base: int  # the quadrant-0 control block
    group_stride: int  # bytes from one quadrant's block to the next
    layer_regs_offset: int  # per-layer register file, from cnn_base
    max_layers: int  # per-layer registers of one index are max_layers words apart
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

    def control(self, group: int, index: int) -> int:
        """A global control register (0 = control, 1 = SRAM, 2 = layer count) of a quadrant."""
        return self.cnn_base + group * self.group_stride + index * 4

    def layer_register(self, group: int, index: int, layer: int) -> int:
        return (self.cnn_base + group * self.group_stride + self.layer_regs_offset
                + index * 4 * self.max_layers + layer * 4)

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


MAX78000 = Device(family="ai85", apb_base=0x50000000, cnn_base=0x50100000,
                  group_stride=0x400000, layer_regs_offset=0x10, max_layers=32,
                  aon_control=0x50001000, bias_base=0x50108000, kernel_base=0x50180000,
                  kernel_processor_stride=0x4000, data_base=0x50400000, instance_bytes=0x8000,
                  write_ptr_shift=13, pad_shift=16, xpch_shift=8)

DEVICES = {"ai85": MAX78000}


def device(family: str) -> Device:
    """The address map of a profile's family; MAX78002 (ai87) is not generated yet."""
    if family not in DEVICES:
        raise NotImplementedError(f"accelerator program for the {family} family is not "
                                  "generated yet (MAX78000 only)")
    return DEVICES[family]
