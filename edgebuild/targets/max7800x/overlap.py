"""Overlap: when a hardware layer may write its output over its own input.

The MAX7800x reads and writes data memory while it computes, output pixel by output pixel in
raster order. A layer's output may therefore share bytes with its input as long as every
input value it overwrites has been read for the last time: that is how the toolchain's
CamVid UNet fits 88 x 88 x 64 tensors into one half of the data memory (its generator can
only turn the check off, `--overlap-data`; edgebuild checks it exactly).

Model of the hardware (the one the toolchain's simulator uses): output pixel i (raster index
over the output's spatial shape) is written after every input value it needs has been read
and before output pixel i + 1 is computed. So writing output pixel i over input pixel j is
safe when no output pixel after i reads j: `last_reader(j) <= i` (output pixel i itself has
read its input already, so a 1 x 1 layer may run in place).

The outputs that read input pixel (x, y) are a product of one set per axis, so the last one
in raster order is (last row reading x) * W_out + (last column reading y). Per axis, an
optional pool (window P, stride SP) comes first, then the operation's taps:

- convolution (kernel K, stride S, pad p, dilation d): output o reads pooled o*S - p + k*d;
- transposed convolution: output o reads pooled i where i*S - p + k*d = o;
- pass-through, pool, add, concatenation: output o reads pooled o;
- linear: its one output reads every input.

An input read in several passes keeps its words pixel by pixel, the passes of one pixel in
consecutive words (the manual's "Multi-Pass": memory 0 holds channels 0-3 in the first word,
64-67 in the second, ...), and each output pixel reads every pass of the input pixels it
needs, so input entry e belongs to pixel e // passes. Outputs must take one pass (or one
32-bit value per pixel): the manual does not say in which order a multi-pass output is
written, so such an overlap is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from edgebuild.targets.max7800x.hwlayer import HwLayer, pixels

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.targets.max7800x.placement.regions import Region


def _axis_last(layer: HwLayer, axis: int, inputs: int, outputs: int) -> NDArray[np.int64]:
    """For each input coordinate along spatial `axis`, the last output coordinate that
    reads it (-1: none does)."""
    last = np.full(inputs, -1, dtype=np.int64)
    window = layer.pool.size[axis] if layer.pool is not None else 1
    step = layer.pool.stride[axis] if layer.pool is not None else 1
    pooled = layer.pooled_shape[1 + axis]
    for o in range(outputs):
        for q in _taps(layer, axis, o):
            if 0 <= q < pooled:
                x = np.arange(q * step, min(q * step + window, inputs))
                last[x] = o  # outputs ascend: the latest reader wins
    return last


def _taps(layer: HwLayer, axis: int, o: int) -> list[int]:
    """Pooled coordinates output coordinate `o` reads along `axis`."""
    if layer.kernel is None:
        return [o]
    # a convolution's hardware layer has its whole geometry (operators._conv)
    assert layer.stride is not None and layer.pad is not None and layer.dilation is not None
    k, s, p, d = (v[axis] for v in (layer.kernel, layer.stride, layer.pad, layer.dilation))
    if layer.op == "conv_transpose2d":
        return [(o + p - t * d) // s for t in range(k) if (o + p - t * d) % s == 0]
    return [o * s - p + t * d for t in range(k)]


def last_reader(layer: HwLayer) -> NDArray[np.int64]:
    """For each input pixel in raster order, the last output pixel that reads it (-1: none)."""
    spatial_in, spatial_out = layer.in_shape[1:], layer.out_shape[1:]
    if layer.op == "linear" or not spatial_out:
        return np.zeros(pixels(layer.in_shape), dtype=np.int64)
    rows = _axis_last(layer, 0, spatial_in[0], spatial_out[0])
    if len(spatial_out) == 1:
        return rows
    cols = _axis_last(layer, 1, spatial_in[1], spatial_out[1])
    last = rows[:, None] * spatial_out[1] + cols[None, :]
    return np.where((rows[:, None] < 0) | (cols[None, :] < 0), -1, last).reshape(-1)


def clash(layer: HwLayer, written: Region, read: Region, out_pixels: int, in_pixels: int
          ) -> tuple[int, int] | None:
    """None when `layer` writing region `written` (its output, in one data memory instance,
    one pass or one 32-bit value per pixel) over region `read` (one of its inputs, same
    instance, any number of passes) never destroys a value it still reads; else the first
    (output pixel, input pixel) it writes over too early. Regions are
    edgebuild.targets.max7800x.placement.Region records."""
    if written.count % out_pixels or read.count % in_pixels:
        raise ValueError("overlap.clash needs whole pixels in both regions (see the module doc)")
    per = written.count // out_pixels  # entries per output pixel
    passes = read.count // in_pixels  # entries per input pixel
    last = last_reader(layer)
    i = np.repeat(np.arange(out_pixels, dtype=np.int64), per)
    first = written.start + written.stride * np.arange(written.count, dtype=np.int64)
    low = np.maximum(0, (first - read.width - read.start) // read.stride + 1)
    high = np.minimum(read.count - 1, (first + written.width - 1 - read.start) // read.stride)
    worst = None
    for k in range(int(np.max(high - low, initial=-1)) + 1):
        j = (low + k) // passes  # the input pixel of the entry written over
        bad = np.flatnonzero((low + k <= high) & (last[np.minimum(j, in_pixels - 1)] > i))
        if bad.size and (worst is None or bad[0] < worst[0]):
            worst = (int(bad[0]), int(j[bad[0]]))
    return None if worst is None else (int(i[worst[0]]), worst[1])
