"""The L1 tiler: for each layer, tiles whose working set fits the L1 budget.

A layer whose whole working set (input + weights + bias + output) fits L1 is not tiled.
Otherwise it runs tile by tile through the C driver in templates/kernels/eb_tiling.c; a
tile is a block of output rows x output channels, and its L1 slot holds the input rows it
needs (the halo of the window, zero padding materialized), its weights, bias and output —
the byte formula below is the one documented in eb_tiling.h. With double buffering two
slots alternate. Among the tiles that fit, the one moving the fewest bytes between L2 and
L1 wins (then the fewest tiles). Add and concat stream between L2 tensors (no reuse).

On a target with the split kernels (the optimized Cortex-M4 ones) a pass whose Window is
`split` (a dense convolution with more than one input channel, a linear layer) runs in the
split layout instead: the kernel needs a row tile's input only while it builds the tile's
im2col columns (in its workspace, outside L1), so the input region and the double-buffered
channel slots (weights, bias, output) share the same bytes — L1 = max(input, slots x slot),
which lets far wider channel tiles fit (`split_parts`, `split_l1`). Its row tile's columns
are the workspace's: 2 bytes per tap per output pixel of the row tile, where the untiled
kernels build 4 pixels' at a time — so a tile's rows cost RAM outside L1.

`options` lists every way a pass runs within the budget, each ranked by a cost (`cost`): the
estimated Cortex-M4 instructions of the pass — the multiply-accumulates the dot runs (a row
tile's pixels go in blocks of 4, so a tile of 6 rows computes 8), a call per block and
channel tile, a fixed cost per tile (loop, staging and write-back calls), the bytes copied
between L2 and L1, the per-channel set-up of a kernel called per tile (`direct_cost`) —
then the fewest bytes moved. Fewer, wider tiles and row tiles of whole 4-pixel blocks win;
traffic alone would take narrow tiles whose per-call setup dominates. `choose` takes the
cheapest option of one pass; the plan weighs all the passes' options together against the
RAM they need, L1 and the workspace their tiles imply (memory.selection).

A transposed convolution tiles the same way, but a block of output rows reads the input
rows that reach it through some tap: at most (rows - 1 + dil*(k - 1)) // stride + 1 of them
(`input_rows`), fewer at the borders (`transposed_span`); they are staged unpadded (its
kernel skips taps that fall outside the input), as eb_tiling.h documents.

`lower_bound` is what every tiling of a layer moves at least, whatever the L1 budget, counted
the way `traffic` counts: each input row some output row's window reaches (`needed_rows`),
at full width, for every input channel, once; each weight and bias byte once; each output
byte once. Rows no window reaches are not counted — `traffic` never moves the rows a stride
leaves after the last window (floor-mode pooling, a strided 1-D conv along time), and a
tiling of one-row tiles skips those between windows when the stride exceeds the window.
A pool tiled by channels only (tiles of all the output rows) is the exception the bound
allows for: it moves its tiles' whole planes, one copy each (`pool_rows`), so it moves those
rows too — more than the bound, fewer instructions than a copy per plane.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgebuild.core.geometry import Window

__all__ = ["Window"]  # the tiler's input, from each op's `windows` facet


def _a4(n: int) -> int:
    return (n + 3) // 4 * 4


def in_per_group(w: Window) -> int:
    return w.in_c // w.groups


def step(w: Window) -> int:
    """Channel tiles are multiples of this: 1 for dense convs and pools."""
    return w.out_c // w.groups if w.weights and w.groups > 1 else 1


def tile_inputs(w: Window, channels: int) -> int:
    """Input channels a tile of `channels` output channels reads."""
    if not w.weights:
        return channels
    return w.in_c if w.groups == 1 else channels // step(w) * in_per_group(w)


@dataclass(frozen=True)
class Tile:
    layer: str
    rows: int
    channels: int
    tiles: int
    slot_bytes: int
    l1_bytes: int
    bytes_in: int  # L2 -> L1
    bytes_out: int  # L1 -> L2
    tiled: bool


def input_rows(w: Window, rows: int) -> int:
    """Input rows of a tile slot for `rows` output rows (the largest a tile can read)."""
    if w.transposed:
        return min(w.in_h, (rows - 1 + w.dil_h * (w.k_h - 1)) // w.stride_h + 1)
    k = w.dil_h * (w.k_h - 1) + 1 if w.weights else w.k_h
    return (rows - 1) * w.stride_h + k


def transposed_span(w: Window, y0: int, rows: int) -> tuple[int, int]:
    """(first, count): the input rows output rows [y0, y0 + rows) of a transposed convolution
    read. Output row y takes input row i through tap k when y + pad = i * stride + k * dil."""
    first = max(0, -(-(y0 + w.pad_h - w.dil_h * (w.k_h - 1)) // w.stride_h))
    last = min(w.in_h - 1, (y0 + rows - 1 + w.pad_h) // w.stride_h)
    return first, max(0, last - first + 1)


def rows_read(w: Window, y0: int, rows: int) -> tuple[int, int]:
    """(first, count): the input rows a tile of output rows [y0, y0 + rows) moves into L1 —
    its window's span clipped to the input (padding is materialized, not moved)."""
    if w.transposed:
        return transposed_span(w, y0, rows)
    top = y0 * w.stride_h - (w.pad_h if w.weights else 0)
    first = max(top, 0)
    return first, max(0, min(top + input_rows(w, rows), w.in_h) - first)


def needed_rows(w: Window) -> int:
    """Input rows that some output row reads: the union of one-row tiles' spans. A tile of
    several rows moves a span covering its rows' spans, so every tiling moves at least these;
    the rows a stride leaves unread (after the last window, or between windows) are not."""
    needed: set[int] = set()
    for y in range(w.out_h):
        first, count = rows_read(w, y, 1)
        needed.update(range(first, first + count))
    return len(needed)


def pool_rows(w: Window, rows: int) -> int:
    """Input rows of a pool tile slot (eb_tiling.c pool_in_rows): its windows' span, or the
    whole planes for a tile of all the output rows — its channels are then one block of L2,
    staged in one copy, the rows a floor-mode stride leaves unread included."""
    span = input_rows(w, rows)
    return w.in_h if rows >= w.out_h and w.in_h > span else span


def slot_parts(w: Window, rows: int, channels: int) -> dict[str, int]:
    """The regions of one tile slot in L1 bytes (eb_tiling.h layout; each 4-byte aligned):
    input rows, weights, bias, output (a pool has no weights or bias)."""
    if not w.weights:
        return {"input": _a4(channels * pool_rows(w, rows) * w.in_w),
                "output": _a4(channels * rows * w.out_w)}
    cin = tile_inputs(w, channels)
    return {"input": _a4(cin * input_rows(w, rows) *
                         (w.in_w + (0 if w.transposed else 2 * w.pad_w))),
            "weights": _a4(channels * in_per_group(w) * w.k_h * w.k_w),
            "bias": 4 * channels if w.bias else 0,
            "output": _a4(channels * rows * w.out_w * (4 if w.wide else 1))}


def slot_bytes(w: Window, rows: int, channels: int) -> int:
    """L1 bytes of one tile slot (eb_tiling.h layout; every region 4-byte aligned)."""
    return sum(slot_parts(w, rows, channels).values())


def rows_outer(w: Window) -> bool:
    """A dense convolution tiles output rows outer and channel tiles inner: a slot keeps its
    row tile's input across channel tiles (eb_tiling.c)."""
    return w.weights and w.groups == 1 and not w.transposed and not w.linear


def dense_traffic(w: Window, rows: int, channels: int, slots: int) -> int:
    """Bytes L2 -> L1 of a dense conv, rows outer: a slot stages a tile's input unless it
    holds its row tile, its weights and bias unless it holds its channel tile."""
    per_oc = w.in_c * w.k_h * w.k_w + (4 if w.bias else 0)
    held: list[tuple[int, int]] = [(-1, -1)] * slots
    moved_in, i = 0, 0
    for y0 in range(0, w.out_h, rows):
        span = w.in_c * rows_read(w, y0, min(rows, w.out_h - y0))[1] * w.in_w
        for c0 in range(0, w.out_c, channels):
            s = i % slots
            moved_in += (span if held[s][0] != y0 else 0) + (
                min(channels, w.out_c - c0) * per_oc if held[s][1] != c0 else 0)
            held[s] = (y0, c0)
            i += 1
    return moved_in


def _staged_rows(w: Window, y0: int, rows: int, channels: int) -> int:
    """Input rows a tile of output rows [y0, y0 + rows) moves: `rows_read`, or a pool tile's
    whole planes (`pool_rows`) when it has all the output rows but not all the channels (a
    tile: the untiled layer moves only what its windows read)."""
    if not w.weights and rows >= w.out_h and channels < w.out_c:
        return pool_rows(w, rows)
    return rows_read(w, y0, min(rows, w.out_h - y0))[1]


def traffic(w: Window, rows: int, channels: int, slots: int = 1) -> tuple[int, int, int]:
    """(tiles, bytes L2 -> L1, bytes L1 -> L2) as eb_tiling.c moves them: each tile's valid
    input rows (a dense conv's once per slot and row tile); weights and bias once per slot
    that serves a channel tile in a row of them; outputs once."""
    if rows_outer(w):
        tiles = -(-w.out_h // rows) * -(-w.out_c // channels)
        return tiles, dense_traffic(w, rows, channels, slots), output_bytes(w)
    tiles, moved_in = 0, 0
    for c0 in range(0, w.out_c, channels):
        ct = min(channels, w.out_c - c0)
        cin = tile_inputs(w, ct)
        row_tiles = 0
        for y0 in range(0, w.out_h, rows):
            moved_in += cin * _staged_rows(w, y0, rows, channels) * w.in_w
            row_tiles += 1
        if w.weights:
            moved_in += min(row_tiles, slots) * (ct * in_per_group(w) * w.k_h * w.k_w +
                                                 (4 * ct if w.bias else 0))
        tiles += row_tiles
    if w.linear:  # the input stays staged in each slot across output tiles
        moved_in -= (tiles - min(tiles, slots)) * w.in_c
    return tiles, moved_in, output_bytes(w)


def split_parts(w: Window, rows: int, channels: int) -> dict[str, int]:
    """The split layout's regions (eb_tiling.h): the input (live while columns are built:
    a row tile's rows unpadded, at most the whole input), and one channel slot's weights,
    bias and output (each 4-byte aligned)."""
    parts = slot_parts(w, rows, channels)
    parts["input"] = _a4(w.in_c * min(input_rows(w, rows), w.in_h) * w.in_w)
    return parts


def split_l1(w: Window, rows: int, channels: int, slots: int) -> tuple[int, int]:
    """(slot bytes, L1 bytes) of the split layout: the slots over the input's bytes."""
    parts = split_parts(w, rows, channels)
    slot = parts["weights"] + parts["bias"] + parts["output"]
    return slot, max(parts["input"], slots * slot)


def split_traffic(w: Window, rows: int, channels: int) -> tuple[int, int, int]:
    """(tiles, bytes L2 -> L1, bytes L1 -> L2) of the split layout: per row tile its input
    rows once and every channel tile's weights and bias (the input overwrote the slots)."""
    n_ct = -(-w.out_c // channels)
    if w.linear:
        return n_ct, w.in_c + weight_bytes(w), output_bytes(w)
    moved_in, n_rt = 0, 0
    for y0 in range(0, w.out_h, rows):
        moved_in += w.in_c * rows_read(w, y0, min(rows, w.out_h - y0))[1] * w.in_w
        moved_in += weight_bytes(w)
        n_rt += 1
    return n_rt * n_ct, moved_in, output_bytes(w)


# Estimated Cortex-M4 instructions of a tiled pass on the optimized kernels (eb_tiling.c,
# eb_kernels_opt.c; fitted to the examples' per-layer counts): what `choose` minimizes.
MAC_INSN = 1.4  # a multiply-accumulate in the dual-MAC dot, whatever the tiling
LONE_ROW_INSN = 0.4  # more per MAC for a linear tile's odd last row (no pair of rows)
BLOCK_INSN = 40  # a dot call and its stores: a 4-pixel block (linear: 2 rows) of a tile
TILE_INSN = 200  # a tile: the loop, the kernel call, its staging and write-back calls
BYTE_INSN = 0.5  # a byte moved between L2 and L1 (word copies)
POOL_INSN = 0.5  # a pooled input value (word-wide max / sums)
# A row tile of 4n + 3 output pixels leaves its last 3 to a path the assembly rows do not
# take: more per multiply-accumulate there — measured on the Cortex-M4: a dense 3x3 conv of
# 32 channels in 1-row tiles of 7 pixels (0.38 more), kws_dscnn's pw1 in 3-row tiles of 75
# (the pointwise kernels' tail: 3.1 more).
TAIL_INSN = 0.4
TAIL_PW_INSN = 3.0
# A convolution the split kernels do not take (one input channel, not banded; grouped; or
# transposed) runs its untiled optimized kernel once per tile, whose set-up is per output
# channel: fitted on a 1-D conv of one input channel, kernel 7, 16 outputs, 1460 steps
# (8.7k more instructions per extra tile, 2 to 73 tiles; benchmarks/l1_sweep.py's series).
DIRECT_CHANNEL_INSN = 540


def _chunks(total: int, size: int) -> list[int]:
    """The sizes of `total` cut in pieces of `size` (the last one smaller)."""
    return [min(size, total - first) for first in range(0, total, size)]


def compute_cost(w: Window, rows: int, channels: int) -> float:
    """The dot's instructions on tiles of `rows` x `channels`: MACs of whole 4-pixel blocks
    per row tile, a call per block and channel tile (a linear layer: pairs of rows)."""
    if w.linear:
        return sum(w.in_c * oc * MAC_INSN + (w.in_c * LONE_ROW_INSN if oc % 2 else 0) +
                   BLOCK_INSN * -(-oc // 2) for oc in _chunks(w.out_c, channels))
    k = in_per_group(w) * w.k_h * w.k_w
    if not w.weights:  # a pool: a call per channel and row tile, a compare or add per value
        n_rt = -(-w.out_h // rows)
        return w.out_c * (w.out_h * w.out_w * k * POOL_INSN + n_rt * BLOCK_INSN)
    chunks = _chunks(w.out_h, rows)
    blocks = sum(-(-r * w.out_w // 4) for r in chunks)
    tails = sum(1 for r in chunks if r * w.out_w % 4 == 3)
    return blocks * (4 * w.out_c * k * MAC_INSN + -(-w.out_c // channels) * BLOCK_INSN) + \
        tails * 3 * w.out_c * k * (TAIL_PW_INSN if pointwise(w) else TAIL_INSN)


def pointwise(w: Window) -> bool:
    """A 1x1, stride-1, unpadded, dense convolution (the pointwise kernels' matrix product)."""
    return w.weights and not w.transposed and (
        w.k_h, w.k_w, w.stride_h, w.stride_w, w.pad_h, w.pad_w, w.groups) == (1, 1, 1, 1, 0, 0, 1)


def cost(w: Window, rows: int, channels: int, tiles: int, moved: int) -> float:
    """Estimated instructions of the pass in `tiles` tiles moving `moved` bytes."""
    return compute_cost(w, rows, channels) + TILE_INSN * tiles + BYTE_INSN * moved


def direct_cost(w: Window, rows: int, split: bool) -> float:
    """On the optimized kernels (`split`), the per-call set-up of a convolution that runs its
    untiled kernel on each tile (DIRECT_CHANNEL_INSN): every row tile sets up every output
    channel once."""
    if not split or not w.weights or w.split or w.banded:
        return 0.0
    return DIRECT_CHANNEL_INSN * -(-w.out_h // rows) * w.out_c


def weight_bytes(w: Window) -> int:
    """All the layer's weights and bias (none for a pool)."""
    if not w.weights:
        return 0
    return w.out_c * in_per_group(w) * w.k_h * w.k_w + (4 * w.out_c if w.bias else 0)


def output_bytes(w: Window) -> int:
    return w.out_c * w.out_h * w.out_w * (4 if w.wide else 1)


def whole_parts(w: Window) -> dict[str, int]:
    """The untiled layer's working set (everything resident at once): input, weights, bias,
    output."""
    bias = 4 * w.out_c if w.weights and w.bias else 0
    return {"input": w.in_c * w.in_h * w.in_w, "weights": weight_bytes(w) - bias,
            "bias": bias, "output": output_bytes(w)}


def whole(w: Window) -> int:
    """Working set of the untiled layer (everything resident at once)."""
    return sum(whole_parts(w).values())


def lower_bound(w: Window, split: bool = False) -> int:
    """Bytes every tiling of the layer moves between L2 and L1 (see the module docstring):
    each needed input row once per input channel, the weights once, the output once. Equal
    to the untiled traffic unless a stride skips rows between windows. On a target with the
    split kernels (`split`) a banded pass's fused pool moves nothing of its own, and the
    pass its input (pooled: 2 x 2 input bytes per pooled one)."""
    if split and w.banded and not w.weights:
        return 0
    scale = 4 if split and w.pooled else 1
    return scale * w.in_c * needed_rows(w) * w.in_w + weight_bytes(w) + output_bytes(w)


@dataclass(frozen=True)
class Option:
    """One way a pass can run (`options`) and what ranks it among the others: the estimated
    instructions (`cost`, `banded_cost`), then the bytes moved, then the tiles."""

    tile: Tile
    key: tuple[float, int, int]


def choose(name: str, w: Window, l1: int, double_buffer: bool, split: bool = False) -> Tile | None:
    """The untiled layer if it fits, else the fitting tile of the least `cost`; None exactly
    when `l1` is below `minimum_l1` (what `edgebuild check` reports). `split`: the target
    has the split kernels, so a `split` Window takes the split layout. This is the pass on
    its own; the plan (memory.selection) weighs every pass's `options` together, with the
    workspace their tiles need."""
    found = options(name, w, l1, double_buffer, split)
    return min(found, key=lambda option: option.key).tile if found else None


def options(name: str, w: Window, l1: int | None, double_buffer: bool, split: bool = False,
            tile_fitting: bool = False) -> list[Option]:
    """Every way the pass runs within `l1` (None: no limit), the untiled pass first when it
    fits — then alone unless `tile_fitting`: a layer that fits runs whole, the cheapest, so
    its tiles are only worth weighing when they save RAM (memory.selection). A linear layer
    on the split kernels also streams (`streamed`: the same C as whole, no L1)."""
    if split and w.banded:
        return banded_options(name, w, l1, tile_fitting)
    found = [whole_option(name, w, split)] if l1 is None or whole(w) <= l1 else []
    if split and w.split and w.linear:
        return found + [Option(streamed(name, w), found[0].key if found else
                               whole_option(name, w, split).key)]
    if (found and not tile_fitting) or l1 is None or smallest_l1(w, double_buffer, split) > l1:
        return found
    for channels in range(step(w), w.out_c + 1, step(w)):
        for rows in range(1, w.out_h + 1):
            tile = _candidate(name, w, rows, channels, double_buffer, split and w.split)
            if tile.l1_bytes > l1:
                break
            moved = tile.bytes_in + tile.bytes_out
            found.append(Option(tile, (cost(w, rows, channels, tile.tiles, moved) +
                                       direct_cost(w, rows, split), moved, tile.tiles)))
    return found


def whole_option(name: str, w: Window, split: bool = False) -> Option:
    """The untiled pass: everything resident at once, one tile's fixed cost."""
    _, moved_in, out = traffic(w, w.out_h, w.out_c)
    tile = Tile(name, w.out_h, w.out_c, 1, whole(w), whole(w), moved_in, out, False)
    return Option(tile, (cost(w, w.out_h, w.out_c, 1, moved_in + out) +
                         direct_cost(w, w.out_h, split), moved_in + out, 1))


def streamed(name: str, w: Window) -> Tile:
    """A linear layer on the split kernels that does not fit L1 whole: the kernel reads its
    weight rows in place (flash, as every untiled layer does on the Cortex-M4) against its
    input expanded once into the kernels' workspace, and writes its few outputs: no L1, and
    the bytes it moves are its input, weights and output, read and written once. Staging
    rows in L1 would only add a copy: a linear layer reads each weight once per inference,
    so L1 could never save a read of flash (vowels/small_l1's fc: 4,800 instructions staged
    four rows at a time, 3,370 streamed)."""
    return Tile(name, w.out_h, w.out_c, 1, 0, 0, w.in_c + weight_bytes(w), output_bytes(w),
                False)


def _candidate(name: str, w: Window, rows: int, channels: int, double_buffer: bool,
               split: bool) -> Tile:
    """The tile of `rows` x `channels` in the direct or the split layout."""
    slots = 2 if double_buffer else 1
    if split:
        slot, need = split_l1(w, rows, channels, slots)
        tiles, moved_in, out = split_traffic(w, rows, channels)
    else:
        slot = slot_bytes(w, rows, channels)
        need = slots * slot
        tiles, moved_in, out = traffic(w, rows, channels, slots)
    return Tile(name, rows, channels, tiles, slot, need, moved_in, out, True)


def smallest_l1(w: Window, double_buffer: bool, split: bool = False) -> int:
    """L1 of the smallest tile (one output row, the fewest channels), in every slot; on a
    target with the split kernels (`split`) a split Window's in the split layout (its input
    row and slots over the same bytes), and none for a linear layer (it can stream its
    weights from flash: `streamed`)."""
    slots = 2 if double_buffer else 1
    if split and w.banded:
        return banded_l1(w, 2) if w.weights else 0
    if split and w.split:
        return 0 if w.linear else split_l1(w, 1, step(w), slots)[1]
    return slots * slot_bytes(w, 1, step(w))


def minimum_l1(w: Window, double_buffer: bool, split: bool = False) -> int:
    """The smallest L1 budget `choose` finds a tile in (None below it): the untiled layer's
    working set or the smallest tile's slots, whichever is smaller — a small layer can run
    whole in less than two slots of its smallest tile. `split` as for `smallest_l1`."""
    return min(whole(w), smallest_l1(w, double_buffer, split))


# --- the banded depthwise layout ------------------------------------------------------------
# A `banded` Window (a depthwise 3x3 stride-1 pass, one input channel too) on the optimized
# kernels runs eb_dw_conv_banded_opt (eb_dw_opt.h): the depthwise kernel copies each input
# channel's rows, zero padding included, into a buffer and runs its band loop there, so that
# buffer IS the L1 staging: L1 holds one channel's padded rows of a band of output rows (the
# whole plane when it fits, then copied once for all the output channels reading it; else
# bands of an even number of rows, refilled per output channel); the weights (9 bytes and a
# bias per channel) are read in place, each output is written once, straight from the sums.
# No double buffering: the CPU fills the buffer (the copy pads, and pools a fused 2x2 max
# pool, which a plain DMA transfer would not).
# Its cost constants, fitted on kws_dscnn's banded layers at 4 KiB (conv1, dw1, dw2, dw3: the
# estimate within 7% of each measured count; tests/test_kernels_dw_banded.py):
DW_MAC_INSN = 1.65  # a multiply-accumulate of the band loop (36 MACs in 57 instructions)
DW_FILL_INSN = 420  # a band: the fill and band-loop calls, the column loop's set-up
DW_CHANNEL_INSN = 30  # an output channel: its weights, bias and requantization mode
DW_POOL_INSN = 1.0  # more per input byte of a fused 2x2 max pool (the pooling)


def band_rows(w: Window, rows: int) -> int:
    """The output rows of a band of `rows` as eb_dw_conv_banded_opt takes it: the whole
    plane when rows >= out_h, else rows rounded down to even, at least 2."""
    return w.out_h if rows >= w.out_h else max(2, rows & ~1)


def banded_l1(w: Window, rows: int) -> int:
    """L1 bytes of a band of `rows` output rows (eb_dw_band_l1_bytes): its rows + 2 padded
    rows, in_w + pad_w bytes apart (neighbouring rows share their padding), the first row's
    left padding and 4 bytes the kernel's word stores may spill into, 4-byte aligned."""
    return _a4((band_rows(w, rows) + 2) * (w.in_w + w.pad_w) + w.pad_w + 4)


def band_starts(w: Window, rows: int) -> list[tuple[int, int]]:
    """(first output row, rows) of each band, as eb_dw3_padded runs them: even bands, the
    last two rows of an odd out_h as a band of their own (one row computed twice)."""
    band = band_rows(w, rows)
    if band >= w.out_h:
        return [(0, w.out_h)]
    found: list[tuple[int, int]] = []
    y0 = 0
    while y0 < w.out_h:
        n = min(w.out_h - y0, band) & ~1
        if n == 0:
            y0, n = w.out_h - 2, 2
        found.append((y0, n))
        y0 += n
    return found


def banded_traffic(w: Window, rows: int) -> tuple[int, int, int]:
    """(fills, bytes L2 -> L1, bytes L1 -> L2) of the banded layout: per fill the input rows
    inside the plane (the padding is written, not moved), the weights and bias once, the
    outputs once."""
    bands = band_starts(w, rows)
    scale = 4 if w.pooled else 1  # a pooled row reads 2 input rows of 2 x in_w bytes
    per_fill = [max(0, min(y0 + n + 2 - w.pad_h, w.in_h) - max(y0 - w.pad_h, 0)) * w.in_w *
                scale for y0, n in bands]
    fills = w.in_c if len(bands) == 1 else w.out_c  # a whole plane serves its m outputs
    moved = (w.in_c if len(bands) == 1 else w.out_c) * sum(per_fill)
    return fills * len(bands), moved + weight_bytes(w), output_bytes(w)


def banded_cost(w: Window, rows: int, fills: int, moved: int) -> float:
    """Estimated instructions of the banded pass: the MACs of its bands (a duplicated row
    of an odd out_h, pairs of pixels), a fixed cost per band and channel, the bytes moved,
    a fused pool's pooling."""
    computed = sum(n for _, n in band_starts(w, rows)) * -(-w.out_w // 2) * 2
    pooled = 4 * w.in_c * w.in_h * w.in_w if w.pooled else 0
    return (DW_MAC_INSN * w.out_c * computed * w.k_h * w.k_w + DW_FILL_INSN * fills +
            DW_CHANNEL_INSN * w.out_c + BYTE_INSN * moved + DW_POOL_INSN * pooled)


def banded_options(name: str, w: Window, l1: int | None, tile_fitting: bool = False
                   ) -> list[Option]:
    """A banded Window on the split kernels: its fused pool, no pass of its own (untiled, no
    L1, no bytes: the conv's pass pools); the conv whole when its working set fits (the
    fused pool's input read in place of its output; None: no limit), else — or as well,
    with `tile_fitting` — every band that fits (`banded`)."""
    if not w.weights:
        return [Option(Tile(name, w.out_h, w.out_c, 1, 0, 0, 0, 0, False), (0.0, 0, 1))]
    scale = 4 if w.pooled else 1
    moved_in = scale * w.in_c * w.in_h * w.in_w + weight_bytes(w)
    need = whole(w) + (scale - 1) * w.in_c * w.in_h * w.in_w
    moved = moved_in + output_bytes(w)
    found = [Option(Tile(name, w.out_h, w.out_c, 1, need, need, moved_in, output_bytes(w),
                         False), (banded_cost(w, w.out_h, w.in_c, moved), moved, 1))] \
        if l1 is None or need <= l1 else []
    if (found and not tile_fitting) or l1 is None:
        return found
    return found + banded(name, w, l1)


def banded(name: str, w: Window, l1: int) -> list[Option]:
    """Every band whose L1 fits `l1`, ranked by cost, then bytes moved."""
    found = []
    for rows in sorted({*range(2, w.out_h, 2), w.out_h}):
        need = banded_l1(w, rows)
        if need > l1:
            break
        fills, moved_in, out = banded_traffic(w, rows)
        found.append(Option(Tile(name, band_rows(w, rows), 1, fills, need, need, moved_in, out,
                                 True),
                            (banded_cost(w, rows, fills, moved_in + out), moved_in + out, fills)))
    return found
