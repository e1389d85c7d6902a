"""Kernel memory: where every layer's weights go in the 64 processors' kernel memories, and
the bytes written there.

Each processor has its own kernel memory of 72-bit words ("columns"); one word holds one 3x3
kernel of 8-bit weights, or 9 weights of a 1x1 / linear layer, or 2/4/8 kernels of 4/2/1-bit
weights side by side. A layer's weights start at the same column in every processor it uses.

The placement reproduces the vendor's synthesis tool, so that a program built here is the
program its users know (and compares equal to it):
- layers that use all 64 processors are placed first, then the others in network order;
- each layer takes the first column, a multiple of 4, from which its whole length is free in
  every processor it uses (a greedy first-fit search: on a collision the search restarts from
  the first processor at the next multiple of 4 past the used word);
- where some processors have more columns than the others (MAX78002: processors 0, 16, 32
  and 48), a layer that uses only those is first searched for from the end of their memory
  down (a last-fit search mirroring the first-fit one), keeping the shared columns free for
  the layers that need them; its start is that span's first column rounded down to a
  multiple of 4;
- a layer's length counts every output channel from the first to the last output processor
  (gaps in the output map are skipped columns), times the output passes and input passes;
  a flattening linear layer counts one word per 9 pixels of each (input, output) pair.
Bytes go into a word from its last byte to its first: a 3x3 kernel lands in order, the nine
pixel weights of a flattened linear layer in reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgebuild.targets.max7800x.program.geometry import PROCESSORS, Geometry

WORD_BYTES = 9
START_MULTIPLE = 4


def ffs(value: int) -> int:
    """Index of the lowest set bit."""
    return (value & -value).bit_length() - 1


def fls(value: int) -> int:
    """Index of the highest set bit."""
    return value.bit_length() - 1


@dataclass(frozen=True)
class LayerKernels:
    """Where one layer's kernels sit: first column, columns, and the kernel count the mask
    registers are programmed with."""

    offset: int
    length: int
    count: int


@dataclass
class KernelMemory:
    """The image being built: per processor, column -> owning layer, its 9 bytes, and how
    many of them are filled so far."""

    widths: tuple[int, ...]  # columns of each processor's memory
    owner: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in range(PROCESSORS)])
    data: list[dict[int, list[int]]] = field(
        default_factory=lambda: [{} for _ in range(PROCESSORS)])
    filled: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in range(PROCESSORS)])

    def search(self, processors: list[int], length: int) -> int:
        """First column (a multiple of 4) free for `length` words on all `processors`."""
        offset, i = 0, 0
        while i < len(processors):
            used = next((c for c in range(offset, offset + length)
                         if c in self.owner[processors[i]]), None)
            if used is None:
                i += 1
                continue
            offset = -(-(used + 1) // START_MULTIPLE) * START_MULTIPLE
            i = 0
            if offset + length > self.widths[processors[0]]:
                raise ValueError(f"kernel memory exhausted at processor {processors[0]}")
        return offset

    def search_from_end(self, processors: list[int], length: int) -> int | None:
        """The last-fit search over processors with extended memories: the highest span of
        `length` columns free on all `processors`, walking down from the last column, its
        start rounded down to a multiple of 4; None when it gives up. On a collision the
        vendor's tool moves the span's top below the used word (to a multiple of 4) and
        gives up when a span starting at that top would not fit below the memory's end: in
        effect only a span that collides with nothing, or collides right at the top, is
        found; anything else falls back to the first fit."""
        top = max(self.widths) - 1
        while top in self.owner[processors[0]]:
            top -= START_MULTIPLE
        i = 0
        while i < len(processors):
            if top - length + 1 < 0:
                return None
            p = processors[i]
            used = next((c for c in range(top, top - length, -1) if c in self.owner[p]), None)
            if used is None:
                i += 1
                continue
            top = (used - 1) & ~(START_MULTIPLE - 1)
            if top + length > self.widths[p]:
                return None
            i = 0
        return (top - length + 1) & ~(START_MULTIPLE - 1)

    def extended(self, processors: list[int]) -> bool:
        """Whether every processor has more columns than the smallest memories."""
        return all(self.widths[p] > min(self.widths) for p in processors)

    def offset(self, processors: list[int], length: int) -> int:
        """Where a layer's kernels go: from the end of extended memories when it uses only
        those and they have room, else the first fit."""
        if self.extended(processors):
            found = self.search_from_end(processors, length)
            if found is not None:
                return found
        return self.search(processors, length)

    def words(self) -> dict[int, list[tuple[int, list[int]]]]:
        """processor -> [(column, 9 bytes)] in column order, for the used columns."""
        return {p: sorted(self.data[p].items()) for p in range(PROCESSORS) if self.data[p]}


class _Filler:
    """Appends bytes to one processor's columns from a layer's first column on."""

    def __init__(self, memory: KernelMemory, layer: int, p: int, offset: int):
        self.memory, self.layer, self.p, self.offset = memory, layer, p, offset
        self.column = 0

    def add(self, byte: int) -> None:
        col = self.offset + self.column
        if col >= self.memory.widths[self.p]:
            raise ValueError(f"kernel memory exhausted at processor {self.p}")
        word = self.memory.data[self.p].setdefault(col, [0] * WORD_BYTES)
        used = self.memory.filled[self.p].get(col, 0)
        word[WORD_BYTES - 1 - used] = int(byte) & 0xFF
        self.memory.owner[self.p][col] = self.layer
        self.memory.filled[self.p][col] = used + 1
        if used + 1 == WORD_BYTES:
            self.column += 1

    def skip(self) -> None:
        self.column += 1

    def partial(self) -> bool:
        return self.memory.filled[self.p].get(self.offset + self.column, 0) > 0


def kernel_count(g: Geometry, per_row: int) -> tuple[int, int]:
    """(kernels to program, kernel count of the mask registers): every output processor from
    the first to the last, times passes; `per_row` pixels per kernel row when flattening."""
    out_map = g.output_processors
    start_col = ffs(out_map) % START_MULTIPLE
    first = ffs(out_map) - (start_col if g.out_expand > 1 else 0)
    in_exp = 1 if g.flatten else g.in_expand
    kc = (1 + fls(out_map) - first) * g.out_expand * in_exp
    count = kc + start_col * g.out_expand * in_exp
    if g.flatten:
        unused = (g.out_expand * out_map.bit_count() - g.out_channels) * per_row
        kc, count = kc * per_row - unused, count * per_row - unused
    return kc, count


def length(g: Geometry, kc: int) -> int:
    """Columns a layer takes: kc kernels of the layer's size and width, padded so that the
    kernels of sub-8-bit weights sharing a word stay whole."""
    bits = g.weight_bits
    q = 8 // bits
    res = (kc % q) * g.kernel_elements * (q - 1)
    return (kc * g.kernel_elements * bits + res + 71) // 72


def reshaped(g: Geometry, weight: np.ndarray) -> np.ndarray:
    """The weights as the loader walks them: one row per (output, input) channel pair."""
    ksize = g.kernel
    if g.flatten:
        per_pass = weight.reshape(g.out_channels, g.in_expand, -1).swapaxes(1, 2)
        return per_pass.reshape(g.out_channels * g.in_expand_thresh, -1).astype(np.int64)
    return weight.reshape(-1, ksize[0] * ksize[1]).astype(np.int64)


def place(layers: list[Geometry], weights: list[np.ndarray | None], widths: tuple[int, ...]
          ) -> tuple[KernelMemory, list[LayerKernels | None]]:
    """The kernel memory image and each layer's kernel slot (None: no weights); `widths`:
    the columns of each processor's kernel memory."""
    memory = KernelMemory(widths)
    slots: list[LayerKernels | None] = [None] * len(layers)
    full = [i for i, g in enumerate(layers) if g.processors == (1 << PROCESSORS) - 1]
    order = full + [i for i in range(len(layers)) if i not in full]
    for i in order:
        weight = weights[i]
        if weight is None or layers[i].operator == "none":
            continue
        slots[i] = _place_layer(memory, i, layers[i], reshaped(layers[i], weight))
    return memory, slots


def _place_layer(memory: KernelMemory, index: int, g: Geometry, kernels: np.ndarray
                 ) -> LayerKernels:
    per_row = kernels.shape[1] if g.flatten else 1
    kc, count = kernel_count(g, per_row)
    size = length(g, kc)
    processors = [p for p in range(PROCESSORS) if g.processors >> p & 1]
    offset = memory.offset(processors, size)
    for ch, p in enumerate(processors):
        filler = _Filler(memory, index, p, offset)
        _fill_processor(filler, g, kernels, ch)
        if filler.partial():
            filler.skip()
        while filler.column - ffs(g.output_processors) % START_MULTIPLE < size:
            filler.add(0)
        if g.flatten:
            size = filler.column
    return LayerKernels(offset, size, count)


def _fill_processor(filler: _Filler, g: Geometry, kernels: np.ndarray, ch: int) -> None:
    """The kernels processor number `ch` (of the layer's processors) multiplies its input
    channel with: for every output processor in order, `qfactor` output channels packed into
    one kernel, for every input pass."""
    q = 8 // g.weight_bits
    ksize = g.kernel_elements
    in_exp = 1 if g.flatten else g.in_expand
    in_chan = g.in_expand_thresh if g.flatten else g.in_channels
    thresh = g.in_expand_thresh
    start_col = ffs(g.output_processors) % START_MULTIPLE
    skipped, leftover = divmod(start_col * ksize * in_exp, WORD_BYTES)
    filler.column += skipped
    for _ in range(leftover // q):
        filler.add(0)
    m = 0
    for expand in range(g.out_expand):
        out_map = g.output_processors >> ffs(g.output_processors)
        col = expand * g.out_expand_thresh
        while col < (expand + 1) * g.out_expand_thresh:
            if out_map:
                while out_map & ((1 << q) - 1) == 0:
                    filler.skip()
                    out_map >>= q
            out_map >>= q
            in_ch = in_chan * q if g.flatten else in_chan
            src = ch + m * in_ch
            for ie in range(in_exp):
                if ie * thresh + ch < in_ch and src < len(kernels):
                    _add_kernel(filler, g, kernels, src, m, ie, in_exp, in_chan, thresh)
                else:
                    for _ in range(ksize // q):
                        filler.add(0)
            col += 1 if g.flatten else q
            m += 1 if g.flatten else q


def _add_kernel(filler: _Filler, g: Geometry, kernels: np.ndarray, src: int, m: int, ie: int,
                in_exp: int, in_chan: int, thresh: int) -> None:
    """One kernel word's worth: q output channels' kernels of one input channel, packed
    bits-wide side by side (or the pixel weights of a flattened row, q to a byte)."""
    bits, q = g.weight_bits, 8 // g.weight_bits
    mask = (1 << bits) - 1
    packed = np.zeros(g.kernel_elements, dtype=np.int64)
    row: list[int] = []
    for i in range(q):
        if m < g.out_channels:
            idx = i + ie * q
            k = src + (idx % in_exp) * thresh + (idx // in_exp) * in_chan
            if k < len(kernels):
                values = kernels[k] & mask
                if g.flatten:
                    row.extend(int(v) for v in values)
                else:
                    packed |= values << (i * bits)
    if g.flatten:
        row += [0] * (-len(row) % q)
        for i in range(len(row) // q):
            filler.add(sum(row[i * q + j] << (j * bits) for j in range(q)))
    else:
        for i in range(g.kernel_elements):
            filler.add(int(packed[g.kernel_elements - 1 - i]))
