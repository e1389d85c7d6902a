"""Packed sub-byte weights: how 1-, 2- and 4-bit weights are stored in the generated C
(weights.c), several to a byte, and how many bytes that takes (the flash budget).

A layer's weight array is read as rows: its first axis (a convolution's output channels, a
transposed convolution's input channels, a linear layer's outputs), each row the rest of
the array flattened (the reference layout, [out][in / groups][k_h][k_w] for a convolution).
A `b`-bit row of `n` weights (b in 1, 2, 4) takes ceil(n / G) 32-bit words, G = 32 / b
weights per word, stored as 4 little-endian bytes; rows follow each other, so row r
starts at byte 4 * r * ceil(n / G). Within word j of a row, weight i = j * G + 4 * s + t
(t in 0..3, s in 0..8/b - 1) is byte t, bits [b * s, b * s + b): byte t holds weights
t, t + 4, t + 8, ... from its lowest bits up ("little-endian within the byte"). A weight is
a b-bit two's complement value in [-2^(b-1), 2^(b-1) - 1] (numerics.weight_limits: 1-bit
weights are -1 and 0); the padding at a row's end is zero.

Why this order: the 4 bytes of a word masked to the same b-bit field, moved to the top of
each byte (one AND of the shifted word), are 4 consecutive weights as int8 values times
2^(8-b) — the layout of 4 int8 weights — so the dual-MAC kernels use the int8 code path
on them and shift the sum back by 8 - b (exact: every product is a multiple of 2^(8-b)).
An 8-bit layer stays one int8 per weight, rows unpadded.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

PACKED_BITS = (1, 2, 4)  # the widths stored packed; 8-bit weights stay one per byte
WORD_BYTES = 4


def packed(bits: int) -> bool:
    """Whether weights of this width are stored packed."""
    return bits in PACKED_BITS


def per_word(bits: int) -> int:
    """Weights per 32-bit word: 32 / bits."""
    return 32 // bits


def row_bytes(elements: int, bits: int) -> int:
    """Bytes one row of `elements` weights takes: whole words when packed, else one byte
    per weight."""
    if not packed(bits):
        return elements
    return WORD_BYTES * -(-elements // per_word(bits))


def stored_bytes(shape: tuple[int, ...], bits: int) -> int:
    """Bytes a weight array of `shape` takes in weights.c: rows along the first axis."""
    if not shape:
        return 0
    rows = shape[0]
    return rows * row_bytes(math.prod(shape[1:]), bits)


def pack(weights: NDArray[np.integer[Any]], bits: int) -> NDArray[np.uint8]:
    """The stored bytes of a `bits`-bit weight array (rows along the first axis)."""
    import numpy as np

    if not packed(bits):
        raise ValueError(f"{bits}-bit weights are not packed")
    values = np.asarray(weights, dtype=np.int64)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if values.size and (values.min() < low or values.max() > high):
        raise ValueError(f"weights outside the {bits}-bit range [{low}, {high}]")
    rows = values.shape[0] if values.ndim else 1
    flat = values.reshape(rows, -1)
    group = per_word(bits)
    words = -(-flat.shape[1] // group)
    padded = np.zeros((rows, words * group), dtype=np.int64)
    padded[:, :flat.shape[1]] = flat
    # (row, word, slot s, byte t): weight j * G + 4 s + t; field s of byte t
    fields = (padded & ((1 << bits) - 1)).reshape(rows, words, group // 4, 4)
    shifts = (np.arange(group // 4, dtype=np.int64) * bits).reshape(1, 1, -1, 1)
    stored = (fields << shifts).sum(axis=2)  # disjoint fields: the sum is their OR
    return stored.astype(np.uint8).reshape(-1)


def unpack(data: NDArray[np.integer[Any]], shape: tuple[int, ...], bits: int
           ) -> NDArray[np.int64]:
    """The weights of `shape` from their stored bytes (the inverse of `pack`)."""
    import numpy as np

    rows = shape[0] if shape else 1
    elements = math.prod(shape[1:]) if shape else 1
    group = per_word(bits)
    words = -(-elements // group)
    raw = np.asarray(data, dtype=np.int64).reshape(rows, words, 1, 4)
    shifts = (np.arange(group // 4, dtype=np.int64) * bits).reshape(1, 1, -1, 1)
    fields = (raw >> shifts) & ((1 << bits) - 1)
    values = np.where(fields >= 1 << (bits - 1), fields - (1 << bits), fields)
    return values.reshape(rows, words * group)[:, :elements].reshape(shape)
