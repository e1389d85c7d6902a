"""Data memory contents: the sample input the known-answer test loads, and the output words
it expects, with the mask of the bytes that hold output channels.

Layouts (the accelerator's):
- CHW input (the model input only): each channel in its own memory instance, 4 consecutive
  pixels to a 32-bit word, little-endian, from the layer's input offset.
- HWC: the channels of the processors that share an instance in one word (byte = processor
  within the instance), one word per pixel; a tensor of several passes interleaves them: pixel
  k of pass e is word k x passes + e.
- Expected output: HWC words of the last layer at its output offset; a 32-bit output takes
  one word per channel (4 words per pixel and instance). A word whose bytes are not all
  output channels is compared under a mask.
"""

from __future__ import annotations

import numpy as np

from edgebuild.targets.max7800x.program.device import Device
from edgebuild.targets.max7800x.program.geometry import PROCESSORS, Geometry
from edgebuild.targets.max7800x.program.kernels import ffs

INSTANCE = 4


def _bytes(values: np.ndarray) -> list[int]:
    return [int(v) & 0xFF for v in values.ravel()]


def input_words(dev: Device, g: Geometry, data: np.ndarray) -> list[tuple[int, list[int]]]:
    """[(address, words)] that load `data` (C, H, W) for the first layer `g`."""
    if g.big_data:
        return _chw(dev, g, data)
    return _hwc(dev, g, data)


def _chw(dev: Device, g: Geometry, data: np.ndarray) -> list[tuple[int, list[int]]]:
    runs, c = [], 0
    for p in range(PROCESSORS):
        if not g.processors >> p & 1:
            continue
        values = _bytes(data[c]) + [0] * (-data[c].size % 4)
        words = [sum(values[i + k] << 8 * k for k in range(4)) for i in range(0, len(values), 4)]
        runs.append((dev.data_address(p, g.in_offset), words))
        c += 1
        if c >= g.in_channels:
            break
    return runs


def _hwc(dev: Device, g: Geometry, data: np.ndarray) -> list[tuple[int, list[int]]]:
    """One run per memory instance the layer reads: its passes interleaved per pixel."""
    passes, thresh = g.in_expand, g.in_expand_thresh
    pixels = data.reshape(data.shape[0], -1)
    runs: dict[int, list[list[int]]] = {}
    c = 0
    for ch in range(0, PROCESSORS * 16, INSTANCE):
        nibble = g.processors >> ch % PROCESSORS & 0xF
        if not nibble:
            continue
        words = []
        for k in range(pixels.shape[1]):
            value, this_c = 0, c
            for i in range(INSTANCE):
                if nibble >> i & 1:
                    if this_c < data.shape[0]:
                        value |= (int(pixels[this_c, k]) & 0xFF) << 8 * i
                    this_c += 1
            words.append(value)
        runs.setdefault(ch % PROCESSORS, []).append(words)
        c += nibble.bit_count()
        if c >= thresh * passes:
            break
    return [(dev.data_address(p, g.in_offset), _interleave(parts)) for p, parts in runs.items()]


def _interleave(parts: list[list[int]]) -> list[int]:
    return [part[k] for k in range(len(parts[0])) for part in parts]


def expected_words(dev: Device, g: Geometry, out: np.ndarray) -> dict[int, tuple[int, int]]:
    """address -> (value, mask) of the last layer's output `out` (C, H, W)."""
    out = out.reshape(out.shape[0], -1)
    channels = out.shape[0]
    omap = g.output_processors
    first = ffs(omap) & ~3
    size = g.output_width // 8
    width = g.out_expand * size
    found: dict[int, tuple[int, int]] = {}
    for pixel in range(out.shape[1]):
        c, poffs, this_map = 0, first, omap >> first
        while c < channels:
            if c % g.out_expand_thresh == 0:
                poffs, this_map = first, omap >> first
            this_c, expand, proc = c, c // g.out_expand_thresh, poffs & ~3
            lanes = [this_map >> i & 1 for i in range(4)]
            this_map >>= 4
            values = []
            for lane in lanes:
                values.append(int(out[c, pixel]) if lane and c < channels else 0)
                c += lane
            word = (pixel * width + expand * size) * (g.write_gap + 1)
            address = dev.data_address(proc, g.out_offset) + word * 4
            if any(lanes):
                _expect(found, address, values, min(c, channels) - this_c, size, proc, omap)
            poffs += 4
    return found


def _expect(found: dict[int, tuple[int, int]], address: int, values: list[int], count: int,
            size: int, proc: int, omap: int) -> None:
    """One output word (8-bit: four channels' bytes) or `count` words (32-bit: lane i's
    channel at word i, as the vendor's tool lays them out)."""
    if size == 1:
        value = sum((v & 0xFF) << 8 * i for i, v in enumerate(values))
        mask = 0xFFFFFFFF if count == 4 else \
            ((1 << 8 * count) - 1) << (ffs(omap >> proc) % 4) * 8
        found[address] = (value & mask, mask)
        return
    for i, value in enumerate(values[:count]):
        found[address + 4 * i] = (value & 0xFFFFFFFF, 0xFFFFFFFF)
