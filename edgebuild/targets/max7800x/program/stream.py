"""Streaming: layers that start computing before their input is complete, reading it from a
circular buffer that the previous layer (the first layer: the input FIFO) keeps filling.

A network whose first layer streams reads its input through the accelerator's FIFOs, not
from a data memory image: that is what lets an input larger than a data memory instance
(the vendor's face-identification model, 3x160x120) run at all, and the vendor's tool
refuses a streaming first layer without its FIFO ("Streaming in the first layer requires
use of a FIFO"). So here a first layer that streams means "input through the FIFO"; there
is no separate choice to make in the manifest.

Per streaming layer the accelerator needs (as the vendor's synthesis tool computes them):
- "stream start": how many input words must have arrived before the layer can compute its
  first output (the prefill): enough rows for its kernel and pooling window;
- "stream delta": how many words more each further output column (delta 1) and the step to
  the next output row (delta 2) needs, and which input volume (`invol`: the passes of all
  earlier layers) its buffer sits after;
- "rollover": the length of its circular buffer, where writing wraps around.
MAX78000 and MAX78002 compute these differently (the second from a newer formula that also
counts padding and the columns a pooling stride skips: `Device.new_streaming`). Each
streaming layer's TRAM also sits after every earlier layer's (their TRAM sizes times their
passes), since all of them run at once. The first layer reading the FIFO also gets its input
frame size (a global register), and cnn_configure() ends by setting up the FIFO.

A 1x1 convolution that streams, or runs right after a streaming layer, runs as a 3x3 one
padded by 1 (`padded_1x1`), as the vendor's tool substitutes it on both devices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edgebuild.targets.max7800x.placement.kernelmemory import streamed
from edgebuild.targets.max7800x.program.device import Device
from edgebuild.targets.max7800x.program.geometry import Geometry

INCREASE_START = 2  # the vendor tool's default extra prefill of a later streaming layer
FIFO_LANES = 4  # FIFOs, one per quadrant's first memory instance
FIFO_CONTROL = 0x02 << 2 | 0x02 << 7  # FIFO control: the fixed threshold fields
FIFO_COMPLETE = 1 << 11  # FIFO control: wait for a complete word (devices that need it)
FIFO_ENABLE_SHIFT = 12  # FIFO control: FIFO i enabled at this bit + i


@dataclass(frozen=True)
class LayerStream:
    """A layer's stream registers (all zero for a layer that neither streams nor reads the
    FIFO) and the TRAM pointer register when streaming moves it."""

    start: int = 0
    delta1: int = 0
    delta2: int = 0
    invol: int = 0
    rollover: int = 0
    tram: int | None = None  # None: the layer's usual TRAM register
    frame: int = 0  # the input frame size (global register; the FIFO-reading first layer)

    @property
    def delta(self) -> int:
        return self.delta2 << 16 | self.delta1 << 4 | self.invol


def uses_fifo(layers: list[Geometry]) -> bool:
    """The input comes through the FIFO: the first layer streams."""
    return layers[0].streaming


def padded_1x1(layers: list[Geometry]) -> list[Geometry]:
    """`layers` with every 1x1 convolution that streams, or runs right after a layer that
    streams, as a 3x3 one padded by 1 (its weight in the middle: device_weights): the
    vendor's tool does not stream 1x1 kernels on the hardware, so it substitutes this
    equivalent, which changes the registers, TRAM and kernel memory of the layer."""
    out = []
    for g, wide in zip(layers, streamed([g.streaming for g in layers]), strict=True):
        if wide and g.operator in ("conv2d", "convtranspose2d") and g.kernel == (1, 1):
            assert g.pad == (0, 0)
            g = replace(g, kernel=(3, 3), pad=(1, 1))
        out.append(g)
    return out


def streams(dev: Device, layers: list[Geometry]) -> list[LayerStream]:
    """Every layer's stream registers, in order."""
    fifo = uses_fifo(layers)
    found = []
    for i, g in enumerate(layers):
        if not (g.streaming or i == 0 and fifo):
            found.append(LayerStream())
            continue
        last = g.streaming and (i + 1 == len(layers) or not layers[i + 1].streaming)
        stream = _new(g, i, last, layers) if dev.new_streaming else _old(g, i, layers)
        found.append(replace(stream, frame=_frame(g)) if i == 0 else stream)
    return found


def _tram(g: Geometry, i: int, layers: list[Geometry]) -> int | None:
    """A later streaming layer's TRAM: its own range after all earlier layers' TRAMs."""
    if i == 0 or not g.streaming:
        return None
    before = int(np.sum([p.tram_max * p.in_expand for p in layers[:i]]))
    return before << 16 | (g.tram_max - 1 + before)


def _invol(g: Geometry, i: int, layers: list[Geometry]) -> int:
    return sum(p.in_expand for p in layers[:i]) if i > 0 and g.streaming else 0


def _round_up(value: int, multiple: int) -> int:
    return value + (-value % multiple)


def _old(g: Geometry, i: int, layers: list[Geometry]) -> LayerStream:
    """MAX78000: the first layer waits for its pooling rows; a later one for the earlier
    layer's padded output rows its kernel and pooling span."""
    (pool_r, pool_c), (stride_r, stride_c) = g.pool, g.pool_stride
    cols = g.in_dim[1]
    if i == 0:
        start = (pool_r - 1) * cols + pool_c if g.streaming else _frame(g)
        start *= pool_r
        delta1 = (stride_c - 1) * g.operands if g.streaming else 0
        delta2 = (pool_r - 1) * cols * g.operands if g.streaming else 0
    else:
        p = layers[i - 1]
        row = p.pooled_dim[1] + 2 * p.pad[1]
        start = row * (p.kernel[0] - 1 + pool_r - 1) + p.kernel[1] - 1 + pool_c + INCREASE_START
        delta1 = stride_c * g.operands
        delta2 = (stride_r - 1) * row + pool_c * g.operands
    rollover = 0
    if g.streaming:
        rollover = 12 if g.big_data else \
            start + (pool_r - 1) * cols + max(g.stride[1], stride_c, pool_c)
        rollover = _round_up(rollover, g.in_expand)
    return LayerStream(start, delta1, delta2, _invol(g, i, layers), rollover,
                       _tram(g, i, layers))


def _frame(g: Geometry) -> int:
    """Words of one input frame per FIFO (CHW: four pixels a word)."""
    pixels = g.in_dim[0] * g.in_dim[1]
    return (pixels + 3) // 4 if g.big_data else pixels


def _quarter(value: int, g: Geometry) -> int:
    return (value + 3) // 4 if g.big_data else value


def _new(g: Geometry, i: int, last: bool, layers: list[Geometry]) -> LayerStream:
    """MAX78002: prefill, deltas and buffer length from the rows and columns the pooling
    window advances by (`row_inc`, `col_inc`), the padding, and the columns the pooling
    stride leaves over at the end of a row."""
    (pool_r, pool_c), (stride_r, stride_c) = g.pool, g.pool_stride
    cols, pad = g.in_dim[1], g.pad[1]
    row_inc, col_inc = max(pool_r, stride_r), max(pool_c, stride_c)
    padded = cols + 2 * pad
    if not g.streaming:  # the first layer reading the FIFO without streaming
        return LayerStream(start=_frame(g))
    if i == 0:
        effective = cols // stride_c
        if effective * stride_c + pool_c - 1 > cols:
            effective -= 1
        if stride_r == 1 and pool_r == 1:
            prefill = col_inc
        else:
            prefill = (row_inc * padded + pad + 2 * col_inc) * g.operands
        delta1 = stride_c * g.operands - (stride_r == 1 and pool_r == 1)
        delta1 = _quarter(delta1, g)
        skipped = max(0, cols - effective * stride_c)
        delta2 = delta1 + skipped if stride_r == 1 else \
            (stride_r - 1) * cols + skipped + pool_c - 1
        delta2 = _quarter(delta2, g)
        delta2 += delta2 > 0  # the pipeline (on by default) needs one word more
        rollover = prefill + col_inc + (stride_c - 1) * padded
        if g.big_data:
            rollover *= stride_c * 4
    else:
        effective = cols // col_inc
        if effective * stride_c + pool_c > cols:
            effective -= 1
        adjust = 0 if col_inc == 1 else cols - effective * col_inc
        prefill = (pad or stride_r) * padded + (row_inc * padded + pad + 2 * col_inc) * g.operands
        if last:
            prefill += adjust * stride_c
        delta1 = _quarter(stride_c * g.operands, g)
        delta2 = _quarter(delta1 + adjust if stride_r == 1 else (stride_r - 1) * cols + adjust, g)
        rollover = prefill + (g.in_expand - 1) * (row_inc * cols + pad + col_inc) + col_inc
        rollover = _quarter(_round_up(rollover, g.in_expand), g)
    return LayerStream(_quarter(prefill, g), delta1, delta2, _invol(g, i, layers), rollover,
                       _tram(g, i, layers))


def fifo_control(dev: Device, g: Geometry) -> int:
    """FIFO control: fixed thresholds, complete words where the device needs it, and each
    FIFO enabled whose quadrant's first processor reads an input channel."""
    value = FIFO_CONTROL | (FIFO_COMPLETE if dev.fifo_complete else 0)
    for c in range(g.in_channels):
        lane = c % FIFO_LANES
        if g.processors >> lane * dev.processors_per_group & 1:
            value |= 1 << FIFO_ENABLE_SHIFT + lane
    return value


def fifo_words(g: Geometry, data: np.ndarray) -> list[list[int]]:
    """The words written to each FIFO, in order: HWC: four channels of a pixel a word (FIFO
    f: channels 4f to 4f + 3); CHW: one channel per FIFO, four pixels a word."""
    pixels = data.reshape(data.shape[0], -1).astype(np.int64) & 0xFF
    if g.big_data:
        fifos = []
        for channel in pixels:
            values = [int(v) for v in channel] + [0] * (-channel.size % 4)
            fifos.append([sum(values[k + j] << 8 * j for j in range(4))
                          for k in range(0, len(values), 4)])
        return fifos
    groups = [pixels[c:c + 4] for c in range(0, pixels.shape[0], 4)]
    return [[sum(int(group[j, k]) << 8 * j for j in range(group.shape[0]))
             for k in range(pixels.shape[1])] for group in groups]
