"""Kernel memory: where every layer's weights go in the 64 processors' kernel memories. One
rule, used by validation, maps.txt and the report (`KernelMemory`, from layer shapes) and by
the accelerator program (program.kernels, which writes the weight bytes through `place`), so
what the maps show is what the program loads.

Each processor has its own kernel memory of 72-bit words ("columns"); one word holds one 3x3
kernel of 8-bit weights, or 9 weights of a 1x1 / linear layer, or 2/4/8 kernels of 4/2/1-bit
weights side by side. A layer's weights start at the same column in every processor it uses.

The rule is the vendor's synthesis tool's, so that a program built here is the program its
users know (and compares equal to it):
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
- A column is taken once a byte is written to it: columns a layer skips (gaps in its output
  map, the lead before its first output processor) stay free for later layers, which is why
  the fill walk, not only the length, decides what is used.
- a layer whose weights duplicate an earlier layer's (the vendor's deduplication) takes no
  columns of its own and uses the earlier layer's slot.
Everything here needs only shapes, never weight values, except that last rule: deciding it
needs the values (placement.sharing, made by program.duplicates from the quantized
weights), which the plan stage and the program pass in; `check`, which runs before weights
exist, places every layer's kernels as its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from edgebuild.targets.max7800x import advice
from edgebuild.targets.max7800x.hwlayer import HwLayer
from edgebuild.targets.max7800x.operators import of_operation
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.maps import bits, spans
from edgebuild.targets.max7800x.placement.records import KernelSlot
from edgebuild.targets.max7800x.placement.sharing import Sharing, kernel_sources

PROCESSORS = 64
WORD_BYTES = 9
START_MULTIPLE = 4
MEMORY_GROUP = 4  # processors sharing one data memory instance


def holds_kernels(layer: HwLayer) -> bool:
    """A layer whose operation has a convolution operator keeps kernels in kernel memory
    (operators.HardwareOp.holds_kernels)."""
    ext = of_operation(layer.op)
    return ext is not None and ext.holds_kernels


def ffs(value: int) -> int:
    """Index of the lowest set bit."""
    return (value & -value).bit_length() - 1


def fls(value: int) -> int:
    """Index of the highest set bit."""
    return value.bit_length() - 1


def passes(channels: int) -> int:
    """Passes a layer of `channels` channels reads or writes: ceil(C / 64) whatever its
    processor count (the vendor tool's "expansion")."""
    return math.ceil(channels / PROCESSORS)


def per_pass(channels: int) -> int:
    """Channels in one pass: ceil(C / passes), rounded up to whole memory instances (4)
    when C exceeds 64."""
    count = math.ceil(channels / passes(channels))
    if channels > PROCESSORS:
        count = min(math.ceil(count / MEMORY_GROUP) * MEMORY_GROUP, PROCESSORS)
    return count


class ChannelPasses:
    """A layer's passes and channels per pass, in and out (the vendor tool's "expansion"
    and "expansion threshold"), from its channel counts: shared by the kernel placement's
    shape and the program's geometry of a layer."""

    in_channels: int
    out_channels: int

    @property
    def in_expand(self) -> int:
        return passes(self.in_channels)

    @property
    def out_expand(self) -> int:
        return passes(self.out_channels)

    @property
    def in_expand_thresh(self) -> int:
        return per_pass(self.in_channels)

    @property
    def out_expand_thresh(self) -> int:
        return per_pass(self.out_channels)


@dataclass(frozen=True)
class KernelShape(ChannelPasses):
    """What the placement of one layer's kernels depends on (no weight values)."""

    processors: int
    output_processors: int
    in_channels: int
    out_channels: int
    kernel_elements: int
    weight_bits: int
    flatten: bool  # reads C x H x W as C channels of `pixels` pixels
    pixels: int = 1  # pixels per input channel a flattening layer reads
    depthwise: bool = False  # one kernel per channel (groups = channels)

    @property
    def rows(self) -> int:
        """Kernels the loader walks: one per (output, input) channel pair, a flattening
        layer's pairs with the input passes folded into its rows."""
        if self.depthwise:  # one kernel per channel
            return self.out_channels
        return self.out_channels * (self.in_expand_thresh if self.flatten else self.in_channels)

    @property
    def per_row(self) -> int:
        """Weights in one of those kernels (a flattening layer: pixels times passes)."""
        if not self.flatten:
            return self.kernel_elements
        return self.in_channels * self.pixels // self.in_expand_thresh


@dataclass(frozen=True)
class LayerKernels:
    """Where one layer's kernels sit: first column, columns, and the kernel count the mask
    registers are programmed with."""

    offset: int
    length: int
    count: int


@dataclass
class Columns:
    """The kernel memory being filled: per processor, column -> owning layer and how many
    of its 9 bytes are written. `store` is where the bytes go (nowhere here; the program's
    image keeps them)."""

    widths: tuple[int, ...]  # columns of each processor's memory
    owner: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in range(PROCESSORS)])
    filled: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in range(PROCESSORS)])

    def store(self, p: int, column: int, position: int, byte: int) -> None:
        """Byte `position` (0..8, written from the last) of processor `p`'s `column`."""

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


class _Filler:
    """Appends bytes to one processor's columns from a layer's first column on."""

    def __init__(self, memory: Columns, layer: int, p: int, offset: int):
        self.memory, self.layer, self.p, self.offset = memory, layer, p, offset
        self.column = 0

    def add(self, byte: int) -> None:
        col = self.offset + self.column
        if col >= self.memory.widths[self.p]:
            raise ValueError(f"kernel memory exhausted at processor {self.p}")
        used = self.memory.filled[self.p].get(col, 0)
        self.memory.store(self.p, col, WORD_BYTES - 1 - used, int(byte) & 0xFF)
        self.memory.owner[self.p][col] = self.layer
        self.memory.filled[self.p][col] = used + 1
        if used + 1 == WORD_BYTES:
            self.column += 1

    def skip(self) -> None:
        self.column += 1

    def partial(self) -> bool:
        return self.memory.filled[self.p].get(self.offset + self.column, 0) > 0


# The bytes of one kernel word's worth: (layer index, kernel row indices packed into it, q
# of them, None where a slot stays zero) -> the bytes in load order. Without weights
# (`zeros`) the same count of zero bytes: the columns taken depend on the count only.
KernelBytes = Callable[[int, Sequence[int | None]], list[int]]


def zeros(shape: KernelShape) -> Callable[[Sequence[int | None]], list[int]]:
    """A layer's kernel bytes without values: a flattening row's weights q to a byte (only
    the rows that exist), else one byte per kernel element."""
    q = 8 // shape.weight_bits

    def count(rows: Sequence[int | None]) -> list[int]:
        if not shape.flatten:
            return [0] * shape.kernel_elements
        weights = shape.per_row * sum(row is not None for row in rows)
        return [0] * (-(-weights // q))
    return count


def kernel_count(shape: KernelShape) -> tuple[int, int]:
    """(kernels to program, kernel count of the mask registers): every output processor from
    the first to the last, times passes; `per_row` pixels per kernel row when flattening."""
    out_map = shape.output_processors
    start_col = ffs(out_map) % START_MULTIPLE
    first = ffs(out_map) - (start_col if shape.out_expand > 1 else 0)
    in_exp = 1 if shape.flatten else shape.in_expand
    if shape.depthwise:  # each processor holds its own channel's kernel, per pass
        return in_exp, in_exp + start_col * in_exp
    kc = (1 + fls(out_map) - first) * shape.out_expand * in_exp
    count = kc + start_col * shape.out_expand * in_exp
    if shape.flatten:
        per_row = shape.per_row
        unused = (shape.out_expand * out_map.bit_count() - shape.out_channels) * per_row
        kc, count = kc * per_row - unused, count * per_row - unused
    return kc, count


def length(shape: KernelShape, kc: int) -> int:
    """Columns a layer takes: kc kernels of the layer's size and width, padded so that the
    kernels of sub-8-bit weights sharing a word stay whole."""
    q = 8 // shape.weight_bits
    res = (kc % q) * shape.kernel_elements * (q - 1)
    return (kc * shape.kernel_elements * shape.weight_bits + res + 71) // 72


def order(shapes: Sequence[KernelShape | None]) -> list[int]:
    """The order layers are placed in: those on all 64 processors first."""
    full = [i for i, s in enumerate(shapes) if s is not None
            and s.processors == (1 << PROCESSORS) - 1]
    return full + [i for i, s in enumerate(shapes) if s is not None and i not in full]


def place(memory: Columns, shapes: Sequence[KernelShape | None],
          kernel_bytes: Callable[[int], Callable[[Sequence[int | None]], list[int]]] | None
          = None, shared: Sequence[int] | None = None) -> list[LayerKernels | None]:
    """Every layer's kernel slot (None: no kernels), filling `memory`; `kernel_bytes(i)`
    gives layer i's bytes for a word's kernel rows (default: zeros of the same count). A
    ValueError when some layer does not fit. `shared[i]` is the layer whose kernels layer i
    uses (itself unless its weights duplicate an earlier layer's: program.duplicates): a
    duplicate takes no columns, is left out of the search, and gets the original's slot,
    columns, length and kernel count alike, as the vendor's tool programs it."""
    slots: list[LayerKernels | None] = [None] * len(shapes)
    for i in order(shapes):
        shape = shapes[i]
        assert shape is not None
        if shared is not None and shared[i] != i:
            continue
        source = zeros(shape) if kernel_bytes is None else kernel_bytes(i)
        slots[i] = place_layer(memory, i, shape, source)
    if shared is not None:
        slots = [slots[shared[i]] if shapes[i] is not None else None
                 for i in range(len(shapes))]
    return slots


def place_layer(memory: Columns, index: int, shape: KernelShape,
                source: Callable[[Sequence[int | None]], list[int]]) -> LayerKernels:
    """One layer's slot, its kernels written into `memory` processor by processor."""
    kc, count = kernel_count(shape)
    size = length(shape, kc)
    processors = bits(shape.processors)
    offset = memory.offset(processors, size)
    lead = ffs(shape.output_processors) % START_MULTIPLE
    for ch, p in enumerate(processors):
        filler = _Filler(memory, index, p, offset)
        _fill_processor(filler, shape, ch, source)
        if filler.partial():
            filler.skip()
        while filler.column - lead < size:
            filler.add(0)
        if shape.flatten:
            size = filler.column
    return LayerKernels(offset, size, count)


def _fill_processor(filler: _Filler, s: KernelShape, ch: int,
                    source: Callable[[Sequence[int | None]], list[int]]) -> None:
    """The kernels processor number `ch` (of the layer's processors) multiplies its input
    channel with: for every output processor in order, `qfactor` output channels packed into
    one kernel, for every input pass. A depthwise layer's processor holds only its own
    channel's kernel of each pass: one output "column", whatever the output passes."""
    q = 8 // s.weight_bits
    in_exp = 1 if s.flatten else s.in_expand
    in_chan = s.in_expand_thresh if s.flatten else s.in_channels
    thresh = s.in_expand_thresh
    start_col = ffs(s.output_processors) % START_MULTIPLE
    skipped, leftover = divmod(start_col * s.kernel_elements * in_exp, WORD_BYTES)
    filler.column += skipped
    for _ in range(leftover // q):
        filler.add(0)
    m = 0
    for expand in range(1 if s.depthwise else s.out_expand):
        out_map = s.output_processors >> ffs(s.output_processors)
        col = expand * s.out_expand_thresh
        stop = col + (1 if s.depthwise else s.out_expand_thresh)
        while col < stop:
            if out_map:
                while out_map & ((1 << q) - 1) == 0:
                    filler.skip()
                    out_map >>= q
            out_map >>= q
            in_ch = in_chan * q if s.flatten else in_chan
            src = ch + m * in_ch
            for ie in range(in_exp):
                if ie * thresh + ch < in_ch and src < s.rows:
                    for byte in source(_rows(s, src, m, ie, in_exp, in_chan, thresh)):
                        filler.add(byte)
                else:
                    for _ in range(s.kernel_elements // q):
                        filler.add(0)
            col += 1 if s.flatten else q
            m += 1 if s.flatten else q


def _rows(s: KernelShape, src: int, m: int, ie: int, in_exp: int, in_chan: int,
          thresh: int) -> list[int | None]:
    """The kernel rows packed into one word's worth, q output channels side by side (None:
    past the last output channel or kernel row)."""
    q = 8 // s.weight_bits
    rows: list[int | None] = []
    for i in range(q):
        idx = i + ie * q
        k = src + (idx % in_exp) * thresh + (idx // in_exp) * in_chan
        rows.append(k if m < s.out_channels and k < s.rows else None)
    return rows


def _pixels(shape: tuple[int, ...]) -> int:
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def sharing_key(shape: KernelShape | None) -> tuple[int, int] | None:
    """What equal kernels must also share to share a slot: the weight width and the input
    processors (the same columns of the same memories); None: no kernels."""
    return None if shape is None else (shape.weight_bits, shape.processors)


# taps of the longest 1-D kernel the hardware runs; a 3x3 kernel's weights
MAX_1D_TAPS = 9
SQUARE = 9
# layers streaming reaches: the vendor's tool runs a 1x1 kernel there as 3x3 only within
# the first MAX_STREAM_LAYERS + 1 layers (program.stream.padded_1x1)
STREAM_REACH = 9


def streamed(streams: Sequence[bool]) -> list[bool]:
    """Per layer, whether a 1x1 kernel of it runs as 3x3 (the vendor's tool does not stream
    1x1 kernels on the hardware): it streams, or reads the layer before it, which streams,
    within the first STREAM_REACH layers. `streams`: each layer's `streaming` flag."""
    return [i < STREAM_REACH and (flag or i > 0 and streams[i - 1])
            for i, flag in enumerate(streams)]


def stored_elements(layer: HwLayer, streamed: bool = False) -> int:
    """Weights per stored kernel as the program stores it (program.geometry.oriented): a
    dilated conv1d's kernel stretched, dilation - 1 zero taps after every tap but the
    last, up to MAX_1D_TAPS; a longer span runs on the 2-D hardware as a 3x3 kernel; a 1x1
    convolution that streams or reads a streaming layer (`streamed`) runs as 3x3 too."""
    if streamed and layer.op in ("conv2d", "conv_transpose2d") and layer.kernel_elements == 1:
        return SQUARE
    dilation = layer.dilation[0] if layer.op == "conv1d" and layer.dilation else 1
    if dilation == 1:
        return layer.kernel_elements
    span = (layer.kernel_elements - 1) * dilation + 1
    return span if span <= MAX_1D_TAPS else SQUARE


def shape_of(layer: HwLayer, processors: int, output_processors: int,
             streamed: bool = False) -> KernelShape | None:
    """A hardware layer's kernel shape on its processors (None: it holds no kernels);
    `streamed`: see stored_elements."""
    if not layer.has_weights or not holds_kernels(layer):
        return None
    pixels = _pixels(layer.pooled_shape)
    return KernelShape(processors, output_processors, layer.in_channels, layer.out_channels,
                       stored_elements(layer, streamed), layer.weight_bits or 8,
                       layer.flatten and pixels != 1, pixels, layer.depthwise)


class KernelMemory:
    """Every layer's kernel slot (`kernels`, by layer name), by the rule above."""

    def __init__(self, ctx: Context, procs: dict[str, int], outs: dict[str, int],
                 sharing: Sharing | None = None):
        self.layers, self.profile = ctx.layers, ctx.profile
        self.path, self.problem, self.given = ctx.path, ctx.problem, ctx.given
        self.procs, self.outs, self.sharing = procs, outs, sharing

    def run(self) -> None:
        """Layers in the rule's order; one that does not fit is a problem and takes no
        columns; a duplicate (equal weights, `sharing`) gets its original's slot."""
        self.kernels: dict[str, KernelSlot] = {}
        memory = self.profile.kernel_memory
        columns = Columns(tuple(memory.words_of(p) for p in range(self.profile.processors)))
        streams = [bool(self.given(layer.name, "streaming")) for layer in self.layers]
        shapes = [shape_of(layer, self.procs[layer.name], self.outs[layer.name], wide)
                  for layer, wide in zip(self.layers, streamed(streams), strict=True)]
        shared = kernel_sources(self.sharing, [sharing_key(s) for s in shapes])
        for i in order(shapes):
            shape, layer = shapes[i], self.layers[i]
            assert shape is not None
            if shared[i] != i:
                continue
            kept = ([dict(o) for o in columns.owner], [dict(f) for f in columns.filled])
            try:
                slot = place_layer(columns, i, shape, zeros(shape))
            except ValueError:
                columns.owner, columns.filled = kept
                self._too_big(layer, shape, columns)
                continue
            self.kernels[layer.name] = KernelSlot(slot.offset, slot.length)
        for layer, source in zip(self.layers, shared, strict=True):
            original = self.kernels.get(self.layers[source].name)
            if original is not None:
                self.kernels[layer.name] = original

    def _too_big(self, layer: HwLayer, shape: KernelShape, columns: Columns) -> None:
        processors = bits(shape.processors)
        words = length(shape, kernel_count(shape)[0])
        free = {p: columns.widths[p] - len(columns.owner[p]) for p in processors}
        short = [p for p in processors if free[p] < words] or processors
        p = short[0]
        self.problem(self.path(layer), f"layer {layer.name!r}: kernel memory runs out on "
                     f"processor {p}: needs {words} words in one span from a start word "
                     f"shared by all its processors (a multiple of {START_MULTIPLE}), but "
                     f"processor {p} has {free[p]} of {columns.widths[p]} words free on "
                     f"{self.profile.name}"
                     + (f" (also processors {spans(short[1:])})" if len(short) > 1 else ""),
                     advice.kernel_memory(layer.name, shape.weight_bits, advice.larger(
                         self.profile.name, columns.widths[p] - free[p] + words,
                         lambda other: other.kernel_memory.words_of(p),
                         f"words on processor {p}")))
