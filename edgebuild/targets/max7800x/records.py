"""The typed shape of a device profile (profile.py reads profiles/<name>.yaml;
docs/targets/max7800x.md)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from edgebuild.core.fields import Strict

Range = tuple[int, int]  # inclusive [low, high]


class DataMemory(Strict):
    instances: int = Field(ge=1)
    instance_bytes: int = Field(ge=4)


class KernelMemory(Strict):
    word_bits: int = Field(ge=8)
    words: int = Field(ge=1)
    words_by_processor: dict[int, int] = {}
    start_multiple: int = Field(default=1, ge=1)

    def words_of(self, processor: int) -> int:
        return self.words_by_processor.get(processor, self.words)


class BiasMemory(Strict):
    instances: int = Field(ge=1)
    bytes: int = Field(ge=1)
    flatten_first: bool = True  # flattening layers' biases are placed before all others
    stream_gap: int = Field(default=0, ge=0)  # zero bytes before a streaming first layer's


class Limits(Strict):
    layers: int
    in_channels: int
    out_channels: int
    bias_channels: int
    dimension: int
    flatten_elements: int
    linear_in: int
    linear_out: int
    linear_out_per_processor: int
    eltwise_operands: Range
    eltwise_inflight_channels: int
    eltwise_inflight_channels_two_operands: int
    pool_unfused_channels: int
    read_gap: bool = False  # a one-pass layer can read interleaved data (`read_gap`)


class Conv2dRules(Strict):
    kernels: tuple[tuple[int, int], ...]
    pad: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: Range
    depthwise: bool


class Conv1dRules(Strict):
    kernel: Range
    pad: tuple[int, ...]
    pad_wide_input: tuple[int, ...]
    stride: tuple[int, ...]
    dilation_short_kernel: Range
    dilation_long_kernel: Range
    depthwise: bool


class ConvTranspose2dRules(Strict):
    kernels: tuple[tuple[int, int], ...]
    pad: tuple[int, ...]
    stride: tuple[int, ...]
    output_pad: tuple[int, ...]
    dilation: Range
    depthwise: bool


class PoolRules(Strict):
    size: Range
    stride: Range
    square_stride: bool


class Numbers(Strict):
    """The device's arithmetic (see numerics.Arithmetic)."""

    weight_bits: tuple[int, ...]
    bias_bits: int
    bias_scale_log2: int
    total_shift: Range
    rounding: Literal["half_up", "floor"]
    avg_pool: Literal["trunc", "floor", "half_up"]


class Streaming(Strict):
    hwc_pixels: int
    chw_pixels: int
    layers: int
    elements: int
    fifo_channels_hwc: int
    fifo_channels_chw: int
    last_padded: bool = False  # the last streaming layer must pad (a 1x1 is made a padded 3x3)
    convolutions_only: bool = False  # every streaming layer must be a convolution


class Profile(Strict):
    name: str
    description: str
    family: str  # the toolchain's name for the device; network arch names start with it
    sram: int = Field(ge=1)  # bytes of the Arm core's system RAM (its software emulation's)
    processors: int = Field(ge=1, le=64)
    quadrants: int = Field(ge=1)
    processors_per_memory: int = Field(ge=1)
    data_memory: DataMemory
    kernel_memory: KernelMemory
    bias_memory: BiasMemory
    limits: Limits
    conv2d: Conv2dRules
    conv1d: Conv1dRules
    conv_transpose2d: ConvTranspose2dRules
    pool: PoolRules
    numbers: Numbers
    streaming: Streaming

    @property
    def processors_per_quadrant(self) -> int:
        return self.processors // self.quadrants

    def processors_needed(self, channels: int) -> int:
        """Processors that read `channels` channels (the manual's multi-pass rule): all
        of them in one pass, else the channels of one pass rounded up to whole data
        memory instances (100 -> 52)."""
        passes = math.ceil(channels / self.processors)
        if passes == 1:
            return channels
        group = self.processors_per_memory
        return math.ceil(math.ceil(channels / passes) / group) * group

    def memory_of(self, processor: int) -> int:
        """The data memory instance processor `processor` reads."""
        return processor // self.processors_per_memory

    def quadrant_of(self, processor: int) -> int:
        return processor // self.processors_per_quadrant
