"""Kernel memory: the bytes written into the 64 processors' kernel memories, where the
placement's rule (placement.kernelmemory: the vendor tool's first-fit column search, layers
on all 64 processors first, MAX78002's search from the end of its larger memories, the
fill walk) puts them. The rule needs only shapes; this module adds the weight values.

Bytes go into a word from its last byte to its first: a 3x3 kernel lands in order, the nine
pixel weights of a flattened linear layer in reverse. Sub-8-bit weights of q = 8 / bits
output channels share a byte, side by side from the lowest bits.

The vendor's tool also stores identical weight tensors once: `place` takes which layers
duplicate which (program.duplicates, decided from the values by the caller) and writes a
duplicate's kernels nowhere; it runs from the original's columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from edgebuild.targets.max7800x.placement.kernelmemory import (
    PROCESSORS,
    WORD_BYTES,
    Columns,
    KernelShape,
    LayerKernels,
    ffs,
    fls,
)
from edgebuild.targets.max7800x.placement.kernelmemory import place as place_shapes
from edgebuild.targets.max7800x.program.geometry import Geometry

__all__ = ["KernelMemory", "LayerKernels", "ffs", "fls", "place", "shape"]


@dataclass
class KernelMemory(Columns):
    """The image being built: the placement's columns, and the 9 bytes of each."""

    data: list[dict[int, list[int]]] = field(
        default_factory=lambda: [{} for _ in range(PROCESSORS)])

    def store(self, p: int, column: int, position: int, byte: int) -> None:
        self.data[p].setdefault(column, [0] * WORD_BYTES)[position] = byte

    def words(self) -> dict[int, list[tuple[int, list[int]]]]:
        """processor -> [(column, 9 bytes)] in column order, for the used columns."""
        return {p: sorted(self.data[p].items()) for p in range(PROCESSORS) if self.data[p]}


def shape(g: Geometry) -> KernelShape:
    """The placement's view of a layer: its maps, channels, kernel size, weight width."""
    return KernelShape(g.processors, g.output_processors, g.in_channels, g.out_channels,
                       g.kernel_elements, g.weight_bits, g.flatten,
                       g.pooled_dim[0] * g.pooled_dim[1], g.depthwise)


def reshaped(g: Geometry, weight: np.ndarray) -> np.ndarray:
    """The weights as the loader walks them: one row per (output, input) channel pair."""
    ksize = g.kernel
    if g.flatten:
        per_pass = weight.reshape(g.out_channels, g.in_expand, -1).swapaxes(1, 2)
        return per_pass.reshape(g.out_channels * g.in_expand_thresh, -1).astype(np.int64)
    return weight.reshape(-1, ksize[0] * ksize[1]).astype(np.int64)


def kernel_bytes(g: Geometry, kernels: np.ndarray) -> Callable[[Sequence[int | None]], list[int]]:
    """One kernel word's worth of bytes from the rows the placement's walk names: q output
    channels' kernels of one input channel packed bits-wide side by side, or the pixel
    weights of a flattened row, q to a byte."""
    bits, q = g.weight_bits, 8 // g.weight_bits
    mask = (1 << bits) - 1

    def packed(rows: Sequence[int | None]) -> list[int]:
        if g.flatten:
            row = [int(v) for k in rows if k is not None for v in kernels[k] & mask]
            row += [0] * (-len(row) % q)
            return [sum(row[i * q + j] << (j * bits) for j in range(q))
                    for i in range(len(row) // q)]
        word = np.zeros(g.kernel_elements, dtype=np.int64)
        for i, k in enumerate(rows):
            if k is not None:
                word |= (kernels[k] & mask) << (i * bits)
        return [int(v) for v in word[::-1]]
    return packed


def place(layers: list[Geometry], weights: list[np.ndarray | None], widths: tuple[int, ...],
          shared: Sequence[int] | None = None
          ) -> tuple[KernelMemory, list[LayerKernels | None]]:
    """The kernel memory image and each layer's kernel slot (None: no weights); `widths`:
    the columns of each processor's kernel memory; `shared[i]`: the layer whose kernels
    layer i uses (see placement.kernelmemory.place)."""
    memory = KernelMemory(widths)
    shapes = [None if w is None or g.operator == "none" else shape(g)
              for g, w in zip(layers, weights, strict=True)]

    def source(i: int) -> Callable[[Sequence[int | None]], list[int]]:
        weight = weights[i]
        assert weight is not None
        return kernel_bytes(layers[i], reshaped(layers[i], weight))
    return memory, place_shapes(memory, shapes, source, shared)
