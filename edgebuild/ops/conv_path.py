"""Which of the optimized kernels a convolution takes (eb_kernels_opt.c, eb_dw_opt.c): the
predicates the C generator (`edgebuild.ops.conv`) and the plan's workspace count share, each
the Python twin of the test its C path makes, so that a step links the file and claims the
scratch of the path its layer runs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from edgebuild.core import numerics
from edgebuild.core.geometry import Plane
from edgebuild.core.numerics import Activation, QuantParams
from edgebuild.ops import column_copy, column_rows, dw_s2, dw_spec, im2col_band
from edgebuild.ops.column_edge import column_inside, edges_fit, gemm_cost
from edgebuild.ops.dw_few import few
from edgebuild.ops.dw_rows import row_major as _row_major
from edgebuild.ops.dw_rows import three_tap, three_tap_line, three_tap_pair

DW_TILE_SCRATCH = "EB_DW_TILE_SCRATCH"  # eb_kernels_opt.h: the tile kernel's patch, int16
DW_TILE_ELEMENTS = (dw_spec.DW_PAD_BYTES + 1) // 2  # its value
DW_GROUP_PATCH = 512  # eb_kernels_opt.h: EB_DW_GROUP_PATCH, of it a dense or grouped conv's frame


def dw_tile(conv: Plane) -> bool:
    """Whether the optimized depthwise path may run a conv by its tile kernel (eb_dw_opt.c),
    whose patch takes EB_DW_TILE_SCRATCH int16 of the scratch: a depthwise conv (one input
    channel too) that the 3-tap kernels do not take, or a dense or grouped one that claims
    it (group_claims). The kernel may still decline it (a kernel too large for its tap
    table or patch); the claim holds either way."""
    return (conv.groups == conv.in_c and not three_tap(conv)) or group_claims(conv)


COLUMN_MAX_OUT = column_rows.COLUMN_MAX_OUT  # eb_dw_opt.c: EB_COL_MAX_OUT, outputs a group


def column(conv: Plane, forms: bool = True) -> bool:
    """Whether eb_dw_opt.c's column kernels take a conv (eb_col_takes, but for packed
    weights, which they leave to the other paths): stride_w 1 or 2, rows of at least 4
    outputs; depthwise with a kernel one column wide (k_w == 1) and no width padding, or
    with at most COLUMN_MAX_OUT outputs per group of several input channels and any kernel
    (a tap is then an input row at an offset: a 1-D conv's row kernel too) and width
    padding within edges_fit's bounds or over the copy; not a 1x1 stride-1 unpadded
    depthwise or dense one (a per-channel scale, or the pointwise kernels' product; a
    grouped one it takes), nor one tile_better gives the tile kernel (`forms`: its). A
    dense one links their file."""
    conv = _flat(conv)
    cin_g, cout_g = conv.in_c // conv.groups, conv.out_c // conv.groups
    first, end = column_inside(conv)
    fits = cout_g <= COLUMN_MAX_OUT if cin_g > 1 else \
        conv.k_w == 1 and conv.pad_w == 0 and not (  # not a per-channel scale
            conv.k_h == 1 and conv.stride_h == conv.stride_w == 1 and conv.pad_h == 0)
    return fits and conv.stride_w in (1, 2) and (edges_fit(conv, end - first) or (
        conv.out_w >= 4 and copy_beats_gemm(conv))) and not tile_better(conv, forms)


def copy_beats_gemm(conv: Plane) -> bool:
    """eb_colc_beats_gemm: whether the column kernels over a copy run a conv whose rows lie
    too much in the width padding for the tap pairs (edges_fit) in fewer estimated
    instructions and cycles than the GEMM -- several inputs a group, padded, the copy
    within COPY_BYTES, and an output's estimates x10 (a multiply, its share of the copied
    words and of the records an output channel: column_copy's MAC, WORD, RECORD) below
    gemm_cost (cycles: x1.4): 32 -> 2 1x9 pad 4 on 19-wide rows ran 2.26 insn/MAC on the
    GEMM, 1.46 over the copy; 96 -> 4 k9 pad 4 on 9 samples 15 % more over it."""
    cin_g, cout_g = conv.in_c // conv.groups, conv.out_c // conv.groups
    words = column_copy.size(conv)[2]
    if cin_g < 2 or (conv.pad_h == 0 and conv.pad_w == 0) or \
            4 * words > column_copy.COPY_BYTES:
        return False
    k, outputs = cin_g * conv.k_h * conv.k_w, conv.out_h * conv.out_w * cout_g
    records = column_copy.record_count(conv)
    gemm = gemm_cost(k, cout_g)
    ins, cyc = ((column_copy.MAC[i] * k + (column_copy.WORD[i] * words + column_copy.RECORD[i]
                                           * records * cout_g) // outputs) for i in (0, 1))
    return ins < gemm and 10 * cyc < column_copy.CYCLES * gemm


def copy_taken(conv: Plane) -> bool:
    """eb_colc_takes: whether the column kernels (column) run conv over the copy: rows past
    the tap pairs' (edges_fit; column: it beats the GEMM), or a gain over those pairs."""
    flat, width = _copy_frame(conv)
    return not edges_fit(flat, width) or column_copy.gains(flat, width)


def copy_claim(conv: Plane, tiled: bool) -> tuple[str | None, int]:
    """The column kernels' copy (ops.column_copy) of an untiled conv they take over it (a
    tiled pass's tiles come unpadded: none takes it): its C claim or None, and its int16
    elements."""
    return (None, 0) if tiled or not column(conv) or not copy_taken(conv) else \
        column_copy.claim(_copy_frame(conv)[0])


def _copy_frame(conv: Plane) -> tuple[Plane, int]:
    """The frame and the outputs of a row inside the input in which eb_col_layer asks
    eb_colc_gains: eb_col_flat's."""
    flat = _flat(conv)
    first, end = column_inside(flat)
    return flat, end - first


def _flat(conv: Plane) -> Plane:
    """eb_col_flat: a 1x1, stride-1, unpadded conv as one row of in_h * in_w (its planes'
    rows are contiguous), when that fits the kernels' int16 parameters."""
    n = conv.in_h * conv.in_w
    if (conv.k_h, conv.k_w, conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w) != \
            (1, 1, 1, 1, 0, 0) or conv.in_h == 1 or n > 32767:
        return conv
    return replace(conv, in_h=1, out_h=1, in_w=n, out_w=n)


POINTWISE_COLUMN_IN = 8  # the most inputs of a pointwise conv the column kernels take


SMALL_OUT = 36      # eb_dw_opt.c: EB_DW_SMALL_OUT, outputs a channel at most
SMALL_TAPS = 25     # EB_DW_SMALL_TAPS: taps an output at most
SMALL_PLANE = 512   # EB_DW_SMALL_PLANE: int16 of a channel's padded copy
SMALL_KH = 7        # EB_DW_SMALL_KH: kernel rows at most
SMALL_PAIRS = 4     # EB_DW_SMALL_PAIRS: tap pairs a kernel row at most


def small(conv: Plane) -> bool:
    """eb_dw_small_takes: a depthwise conv (any multiplier) of at most SMALL_OUT outputs a
    channel or rows of fewer than 4 (the tile kernel's C loops; not the line kernel's: one
    kernel row of multiplier 1), a kernel row of 2 or more taps, at most SMALL_TAPS taps,
    stride 1 or 2, width dilation 1, in its row-major view (a 1-D layer laid as a column is its row), whose
    zero-padded int16 copy of a channel fits SMALL_PLANE -- the
    3x3 layers at the end of a MobileNet (256 x 3x3: 24.8 insn/MAC on the tile kernel), a
    1-D k5 of multiplier 4 on 18 samples -- not a 1x1 (the per-channel scale) nor one the
    3-tap kernels take (their rows; the padded path's generation-time loop: dw_spec)."""
    g = _row_major(conv)
    rows, pitch = g.in_h + 2 * g.pad_h, (g.in_w + 2 * g.pad_w + 2) & ~1
    return (conv.groups == conv.in_c and g.dil_w == 1 and not three_tap(conv) and
            g.stride_h <= 2 and
            g.stride_w <= 2 and g.k_h <= SMALL_KH and (g.k_w + 1) // 2 <= SMALL_PAIRS and
            g.k_w >= 2 and g.k_h * g.k_w <= SMALL_TAPS and
            (g.out_h * g.out_w <= SMALL_OUT or g.out_w < 4 and (
                conv.out_c != conv.in_c or g.k_h > 1)) and rows * pitch + 2 <= SMALL_PLANE)


def pointwise_column(conv: Plane, forms: bool = True) -> bool:
    """Whether an untiled pointwise conv (dense 1x1, stride 1, unpadded) runs on
    eb_conv2d_opt's kernels rather than the pointwise ones, whose per-pixel work is not
    amortised over so few MACs: of 2..FEW_IN inputs, any outputs, on the few-input kernel
    where a form of it requantizes (3 -> 1 16.5 insn/MAC there, 2.9 here; 3 -> 64 on 32 x 32
    5.6; 2 -> 16 8.8); else of at most POINTWISE_COLUMN_IN inputs and COLUMN_MAX_OUT outputs
    on the column kernels' row of taps over the flattened plane (3 -> 1: 4.8). With more
    inputs the pointwise GEMM is the faster (48 -> 4: 1.75 against 2.11)."""
    return conv.groups == 1 and (few(conv, forms) or (
        conv.out_c <= COLUMN_MAX_OUT and conv.in_c <= POINTWISE_COLUMN_IN and column(conv)))


def tile_better(conv: Plane, forms: bool = True) -> bool:
    """eb_dw_tile_better: whether the tile kernel runs a depthwise conv (one the column
    kernels also take) in under 3/4 of their multiply instructions -- theirs one per tap,
    pixel and channel over rows in blocks of 4 (multiplier 1 on rows of 16 or more: one per
    tap pair; a channel pair's rows cost about the tile's a pair a tap, a shorter row's
    set-up more than pairs save), the tile's one per tap pair in its frame (a Kx1 kernel
    turned: its taps pair along the frame's rows) -- or the fan (C: its `fan` argument) in its
    `forms` (few_requantizes), a multiplier of FAN_BETTER_M or more, rows of FAN_BETTER_W."""
    if conv.groups != conv.in_c or not tile_takes(conv):
        return False
    f = tile_frame(conv)
    if forms and conv.out_w <= FAN_BETTER_W and fans(m := conv.out_c // conv.in_c, f.ntaps) \
            and m >= FAN_BETTER_M:
        return True
    pairs = (conv.k_h + 1) // 2 if conv.out_c == conv.in_c and conv.out_w >= 16 else conv.k_h
    column_macs = pairs * ((conv.out_w + 3) & ~3) * conv.out_h
    return 4 * f.ntaps * f.phases * ((f.out_w + 3) & ~3) * f.out_h < 3 * column_macs


def split(conv: Plane) -> bool:
    """Whether the optimized kernels run the tiled conv split (eb_conv2d_tiled_cols: columns
    built once per row tile, weights streamed; memory.tiling's split layout): a dense conv
    with more than one input channel (one input channel takes the depthwise kernel)."""
    return conv.groups == 1 and conv.in_c > 1


DW_TILE_TAPS = 128  # eb_dw_opt.c: EB_DW_TILE_TAPS, tap pairs per output channel
DW_TILE_SLACK = 2  # eb_dw_opt.c: EB_DW_TILE_SLACK(s) = 3 s + 2
DW_MAX_ENTRIES = 16  # eb_dw_opt.c: EB_DW_MAX_ENTRIES, the table kernel's entries
DW_UNPACKED_TAPS = 4 * DW_MAX_ENTRIES  # eb_dw_layer: one channel's taps unpacked


def _pairs(k: int, dil: int) -> int:
    return (k + 1) // 2 if dil == 1 else k  # eb_dw_npairs


@dataclass(frozen=True)
class TileFrame:
    """The frame eb_dw_tile_plan runs a depthwise conv in: its rows and columns swapped
    (`turned`: the patch copied transposed, outputs stored down the columns) when that takes
    fewer SMLADs. k_h tap rows of `pairs` tap pairs each; columns stride s_w, dilation d_w."""

    turned: bool
    k_h: int
    k_w: int
    d_h: int
    d_w: int
    s_w: int
    out_h: int
    out_w: int
    dst_c: int  # output elements from one frame column to the next
    phases: int = 1  # a dilation split into phases: the fields are phase 0's (split_phases)
    chans: int = 1  # a group's input channels side by side in the patch (a dense conv's)
    s_h: int = 1  # the stride from one frame row to the next

    @property
    def pairs(self) -> int:
        return _pairs(self.k_w, self.d_w)

    @property
    def ntaps(self) -> int:
        return self.k_h * self.pairs * self.chans


TILE_PHASES = 8  # eb_dw_opt.c: EB_DW_TILE_PHASES, the largest dilation split into phases


def split_phases(f: TileFrame) -> TileFrame:
    """eb_dw_tile_plan's phases: a dilation D (2..TILE_PHASES) along the frame's rows at
    stride 1, a kernel wider than 1 and at least 16 outputs a phase run as D dilation-1
    convs over every D-th column (eb_dw_tile_phase), whose taps pair; the frame is phase
    0's (the most outputs: ceil(out_w / D)), its outputs D apart."""
    d = f.d_w
    if not (1 < d <= TILE_PHASES and f.s_w == 1 and f.k_w > 1 and f.out_w >= 16 * d):
        return f
    return replace(f, d_w=1, out_w=-(-f.out_w // d), dst_c=d * f.dst_c, phases=d)


def tile_frame(conv: Plane) -> TileFrame:
    """The tile kernel's frame of a depthwise conv, or of a group's input channels
    (eb_dw_tile_plan's choice)."""
    g = _row_major(conv)
    chans = conv.in_c // conv.groups
    as_is = g.k_h * _pairs(g.k_w, g.dil_w) * ((g.out_w + 3) & ~3) * g.out_h
    turned = g.k_w * _pairs(g.k_h, g.dil_h) * ((g.out_h + 3) & ~3) * g.out_w
    if turned < as_is:  # rows and columns swap
        return split_phases(TileFrame(True, g.k_w, g.k_h, g.dil_w, g.dil_h, g.stride_h,
                                      g.out_w, g.out_h, g.out_w, chans=chans,
                                      s_h=g.stride_w))
    return split_phases(TileFrame(False, g.k_h, g.k_w, g.dil_h, g.dil_w, g.stride_w, g.out_h,
                                  g.out_w, 1, chans=chans, s_h=g.stride_h))


ROW1_LONG_PAIRS = 5  # eb_dw_opt.c: EB_DW_ROW1_LONG_PAIRS, the unrolled one-channel rows' least
ROW1_FIX_PAIRS = (2, 3, 4)  # eb_dw_opt.c: EB_DW_FIX2_1 ...: rows of so many pairs straight


def tile_paths(conv: Plane) -> frozenset[str]:
    """The tile kernel's specialised loops a depthwise conv it takes runs (eb_dw_opt.c:
    eb_dw_tile_block): two channels at a time with a multiplier of 2 or more, at least two
    tap pairs and stride 1 or 2 ("dw_tile_pair_s1" / "_s2" along the rows at stride 1 / 2,
    else "dw_tile_pair"); one channel (a multiplier of 1, or an odd one's last channel) along the
    rows at stride 1 or 2 ("dw_tile_s1", "dw_tile_s2"), in any other frame "dw_tile_one" --
    of one tap pair (a 1x1 or 1x2 kernel in the frame) along the rows at stride 1, shifting
    by an immediate too ("dw_tile_tap1"), of ROW1_LONG_PAIRS tap pairs a row or more at
    stride 1 unrolled ("dw_tile_long"), of exactly 2, 3 or 4 straight ("dw_tile_fix2" ...,
    at stride 2 "dw_tile_fix2_s2" ...); with the fan ("dw_fan") where it runs."""
    f = tile_frame(conv)
    m = conv.out_c // conv.groups
    paths = set()
    pair = m >= 2 and f.ntaps >= 2 and f.s_w in (1, 2)
    if pair:
        paths.add(f"dw_tile_pair_s{f.s_w}" if f.dst_c == 1 else "dw_tile_pair")
    if not pair or m % 2:
        paths.add(f"dw_tile_s{f.s_w}" if f.dst_c == 1 and f.s_w in (1, 2) else "dw_tile_one")
        if f.ntaps == 1 and f.dst_c == 1 and f.s_w == 1:
            paths.add("dw_tile_tap1")
        if f.s_w == 1 and f.pairs >= ROW1_LONG_PAIRS and f.d_w in (1, 2):
            paths.add("dw_tile_long")
        if f.s_w in (1, 2) and f.pairs in ROW1_FIX_PAIRS and f.d_w in (1, 2):
            paths.add(f"dw_tile_fix{f.pairs}" + ("_s2" if f.s_w == 2 else ""))
    if fan(conv):
        paths.add("dw_fan")
    return frozenset(paths)


FAN_MIN = 4  # eb_dw_opt.c: EB_DW_FAN_MIN, the multiplier from which the fan runs
FAN_BETTER_M = FAN_BETTER_W = 16  # EB_DW_FAN_BETTER_M / _W: the fan before the column kernels
FAN_TAPS = 6  # eb_dw_opt.c: EB_DW_FAN_TAPS, its most tap pairs a pixel (over 4: one pixel)


def fan(conv: Plane) -> bool:
    """Whether the tile kernel runs a depthwise conv it takes by the fan (eb_dw_fan_tile:
    a multiplier of FAN_MIN or more -- one input channel's many outputs -- over at most
    FAN_TAPS tap pairs a pixel; one tap pair only from 2 * FAN_MIN channels, more than 4
    (one pixel at a time) from 3 * FAN_MIN, below which the pair loop costs less: fans):
    its tiles whose tap rows lie inside the input, and channels in the fast requantization;
    the rest (near the padding, a bias near the int32 limits) take tile_paths' loops."""
    f = tile_frame(conv)
    return fans(conv.out_c // conv.groups, f.ntaps)


def fans(m: int, n: int) -> bool:
    """eb_dw_fan_takes: m outputs of one input channel over n tap pairs a pixel by the fan."""
    return 0 < n <= FAN_TAPS and m >= FAN_MIN and \
        m * (1 if n > 4 else n) >= (3 if n > 4 else 2) * FAN_MIN


def tile_takes(conv: Plane) -> bool:
    """eb_dw_tile_plan's answer for a depthwise conv the 3-tap kernels do not take (or a
    group's channels): whether the tile kernel runs it (at most DW_TILE_TAPS tap pairs, a
    4-column tile fits the patch), in its frame (tile_frame)."""
    f = tile_frame(conv)
    return f.ntaps <= DW_TILE_TAPS and tile_shape(f)[1] > 0


def tile_shape(f: TileFrame) -> tuple[int, int]:
    """eb_dw_tile_plan's tile in frame f: (rows, columns) of output, each channel's share
    of the patch holding their inputs; no columns when not even 4 fit."""
    band = (f.k_h - 1) * f.d_h + 1
    patch = DW_TILE_ELEMENTS if f.chans == 1 else DW_GROUP_PATCH
    room = (patch - (3 * f.s_w + DW_TILE_SLACK)) // f.chans
    cols = (f.out_w + 3) & ~3
    while cols > 0 and band * _tile_pitch(min(cols, f.out_w), f.s_w, f.k_w, f.d_w) > room:
        cols -= 4
    if cols == 0:
        return 0, 0
    pitch = _tile_pitch(min(cols, f.out_w), f.s_w, f.k_w, f.d_w)
    return min((room // pitch - band) // f.s_h + 1, f.out_h), cols


def _tile_pitch(cols: int, stride: int, k: int, dil: int) -> int:
    return ((cols - 1) * stride + (k - 1) * dil + 2 + 1) & ~1  # eb_dw_tile_pitch


def two_pixel_block(conv: Plane, rows: int | None = None) -> bool:
    """Whether the im2col/GEMM rows meet a block of exactly 2 pixels, which eb_gemm22_* take
    two rows at a time ("gemm_2px"): the blocks run over a pass's pixels 4 at a time, so a
    pass -- the whole plane, or (tiled) a tile of `rows` output rows and the last, shorter
    one -- whose pixel count is 2 mod 4."""
    counts = {conv.out_h} if rows is None else {min(rows, conv.out_h), conv.out_h % rows}
    return any(r * conv.out_w % 4 == 2 for r in counts if r)


LINE_PAIRS = 8  # eb_dw_line.h: EB_DW_LINE_PAIRS, the line kernel's most tap pairs a row
LINE_PHASE = 256  # EB_DW_LINE_PHASE: int16 from a dilation-2 row's even phase to its odd one


def line(conv: Plane) -> bool:
    """eb_dw_line_kind (and eb_dw_layer's test before it): whether the line kernel may take a
    depthwise conv of multiplier 1 -- a frame of one tap row of 4..2 LINE_PAIRS taps at
    stride 1 dilation 1 or 2, or stride 2 dilation 1, rows of at least 2 outputs whose
    widened row fits the tile patch (at dilation 2 each phase LINE_PHASE). Its biases may
    still send it to the tile kernel (line_fits_biases)."""
    g = _row_major(conv)
    n, pairs = g.out_w, (g.k_w + 1) // 2
    if (g.stride_w, g.dil_w) == (1, 1):
        room = n + 2 * pairs + 2 <= DW_TILE_ELEMENTS
    elif (g.stride_w, g.dil_w) == (1, 2):
        room = (n + 1) // 2 + 2 * pairs <= LINE_PHASE
    else:
        room = (g.stride_w, g.dil_w) == (2, 1) and 2 * n + 2 * pairs + 2 <= DW_TILE_ELEMENTS
    return conv.groups == conv.in_c == conv.out_c and g.k_h == 1 and \
        4 <= g.k_w <= 2 * LINE_PAIRS and n >= 2 and room


def line_fits_biases(conv: Plane, bias: tuple[int, ...], shift: int, half_up: bool) -> bool:
    """eb_dw_line_layer's test of the requantization: a right shift s of 0..16 and every
    output channel's start (its bias, plus 2^(s - 1) rounding half up), scaled to the
    immediate, within eb_dw_imm_limit. Else the tile kernel takes the layer. (Such a start
    also lies in eb_dw_setup's fast range, k 2^14 and the rounding term inside the int32
    limits: the limit keeps 2 P 2^22 >= k 2^14 + 2^15 from them.)"""
    s = -shift
    if not 0 <= s <= 16:
        return False
    pairs = (_row_major(conv).k_w + 1) // 2
    half = 1 << (s - 1) if half_up and s > 0 else 0
    lim = (2**31 - 1 - (2 * pairs << 22)) >> ((8 if s <= 8 else 16) - s)
    return all(-lim <= b + half <= lim for b in bias)


def line_requantizes(conv: Plane, quant: QuantParams | None, wide: bool, act: Activation,
                     rounding: str) -> bool:
    """Whether the line kernel (eb_dw_line_layer) would requantize a layer's outputs by an
    immediate: int8 out, relu or none, and every bias within its limits (line_fits_biases);
    else a layer of its shape takes the tile kernel, which its step then links instead."""
    if quant is None or wide or act not in (Activation.none, Activation.relu):
        return False
    bias = (0,) if quant.bias is None else tuple(int(b) for b in quant.bias.reshape(-1))
    return line_fits_biases(conv, bias, quant.shift,
                            numerics.requantize_rounding(rounding) == "half_up")


def gathers(conv: Plane) -> bool:
    """Whether the GEMM's columns of a conv take the strided gathers ("im2col_s2"): stride_w 2
    (eb_taps_row4s2), or more with outputs whose taps lie inside the row (eb_taps_gather's
    inside rows). Not a narrow map's at stride 1: their checks cost more than they save
    (motions_ondevice's 1-D conv laid as a column +231 instructions, digits' 2 x 2 +250)."""
    first, end = column_inside(conv)
    return conv.stride_w == 2 or (conv.stride_w > 2 and end > first)


def pointwise(conv: Plane) -> bool:
    """A 1x1, stride-1, unpadded, dense convolution: a plain matrix product over its input
    as it lies in memory, which the optimized kernels run without im2col (eb_pw_opt.h)."""
    return (conv.k_h, conv.k_w, conv.stride_h, conv.stride_w, conv.pad_h, conv.pad_w,
            conv.groups) == (1, 1, 1, 1, 0, 0, 1)


def kernel_paths(conv: Plane, packed: bool = False, lines: bool = True,
                 forms: bool = True) -> frozenset[str]:
    """kernel_choice, and with "im2col" the GEMM rows' 2-pixel path where a block of 2
    pixels occurs (two_pixel_block; untiled: a tiled pass adds its tiles', ops.conv), their
    short rows' (gemm_short) and a padded conv's band (ops.im2col_band)."""
    paths = kernel_choice(conv, packed, lines, forms)
    gemm = "im2col" in paths
    return paths | ({"gemm_2px"} if gemm and not packed and two_pixel_block(conv)
                    else frozenset()) | (gemm_short(conv) if gemm else frozenset()) | (
        {"im2col_band"} if gemm and im2col_band.band_bytes(conv) else frozenset())


def gemm_short(conv: Plane) -> frozenset[str]:
    """"gemm_short" where a GEMM of the conv runs rows of fewer than 4 weights (eb_dot_short:
    a grouped 1x1 of 2 or 3 inputs a group), which its assembly rows leave."""
    k = conv.in_c // conv.groups * conv.k_h * conv.k_w
    return frozenset({"gemm_short"} if k < 4 else ())


def _first_kernel(conv: Plane, forms: bool) -> frozenset[str] | None:
    """The kernels eb_dw_conv_opt tries first, for unpacked weights: the few-input kernel,
    the small-plane one, then the stride-2 one of 3-wide kernel rows; None where none takes
    the conv."""
    if few(conv, forms):
        return frozenset({"depthwise", "dw_few"})
    if small(conv):
        return frozenset({"depthwise", "dw_small"})
    if dw_s2.takes(conv):
        return frozenset({"depthwise", "dw_s2"})
    return None


def kernel_choice(conv: Plane, packed: bool = False, lines: bool = True,
                  forms: bool = True) -> frozenset[str]:
    """The optional kernel paths (ops.c OPTIONAL_PATHS) a conv that neither the pointwise
    kernels nor the linear one take runs on the optimized kernels, in the order
    eb_conv2d_opt tries them: the few-input kernel ("dw_few": few), the small-plane kernel
    ("dw_small": small), the stride-2 kernel of 3-wide kernel rows ("dw_s2": ops.dw_s2), the
    column kernels
    ("dw_column"; rows two at a time, "dw_column_rows2": column_rows; over a copy,
    "dw_column_copy": column_copy), for a depthwise conv the
    3-tap ones ("dw_three_tap", "dw_three_tap_pair", "dw_three_tap_line"), the tile kernel ("dw_tile", and its loops: tile_paths; for
    a dense or grouped conv, "dw_group": group_tile) or
    the table kernel and the
    per-channel scale ("dw_table"), with "depthwise" (their file) -- and "im2col", the
    generic path, for a conv none of those take. Before the tile kernel the line kernel
    ("dw_line", at dilation 2 "dw_line_d2", at stride 2 "dw_line_s2"; line), unless `lines`
    is false (its biases send the layer on: line_fits_biases), and the few-input kernel
    only where `forms` (few_requantizes). A model's eb_config.h leaves
    out the paths no layer names (EB_OPT_NO_...), so it links the kernels its layers run; a
    layer whose path was left out would still run exact, on the next one."""
    g = _row_major(conv)
    first = None if packed else _first_kernel(conv, forms)
    if first is not None:
        return first
    if group_tile(conv, packed):
        return frozenset({"depthwise", "dw_tile", "dw_group"}) | tile_paths(conv)
    if column(conv, forms) and not packed:  # stride-2 rows, several inputs a group: theirs
        return frozenset({"depthwise", "dw_column"} |
                         ({"dw_column_s2"} if conv.stride_w == 2 else set()) |
                         ({"dw_column_rows2"} if column_rows.takes(conv) else set()) |
                         ({"dw_column_copy"} if copy_taken(conv) else set()) |
                         ({"dw_column_dense"} if conv.in_c > conv.groups else set()))
    if conv.groups != conv.in_c:  # one input channel counts as depthwise
        return frozenset({"im2col"})
    taps = conv.k_h * conv.k_w
    if packed and taps > DW_UNPACKED_TAPS:
        return frozenset({"im2col"})
    if three_tap(conv):  # its rows two channels a pass: "dw_three_tap_pair"; quads: "_line"
        return frozenset({"depthwise", "dw_three_tap"} |
                         ({"dw_three_tap_pair"} if three_tap_pair(conv) else set()) |
                         ({"dw_three_tap_line"} if three_tap_line(conv) else set()))
    if (g.k_h, g.k_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w) == (1, 1, 1, 1, 0, 0):
        return frozenset({"depthwise", "dw_table"})  # a per-channel scale
    if lines and not packed and line(conv):
        return frozenset({"depthwise", "dw_line"} |
                         ({"dw_line_d2"} if g.dil_w == 2 else set()) |
                         ({"dw_line_s2"} if g.stride_w == 2 else set()))
    if tile_takes(conv):
        return frozenset({"depthwise", "dw_tile"}) | tile_paths(conv)
    entries = g.k_h * (((g.k_w - 1) * g.dil_w + 4) >> 2)
    return frozenset({"depthwise", "dw_table"} | ({"im2col"} if entries > DW_MAX_ENTRIES
                                                 else set()))


def shift_forms(paths: frozenset[str], shift: int) -> frozenset[str]:
    """The forms of the tile kernel's row functions, of its fan, of the line kernel and of the
    few-input kernel a layer on them runs (eb_dw_tile_init, eb_dw_fan_tile, eb_dw_line_form,
    eb_dw_few_channel): requantizing by the immediate 8 ("dw_tile8", "dw_fan8", "dw_line8",
    "dw_few8": a right shift of 0..8) or 16 ("dw_tile16", ...: 9..16); none other."""
    if not 0 <= shift <= 16:
        return frozenset()
    c = 8 if shift <= 8 else 16
    return frozenset(f"{kind}{c}" for kind in ("dw_tile", "dw_fan", "dw_line", "dw_few")
                     if kind in paths)


def as_linear(conv: Plane) -> bool:
    """eb_conv_as_linear: a dense conv with one output pixel whose window is the whole
    unpadded input runs as a linear layer (no column, no depthwise path)."""
    return conv.groups == 1 and (conv.out_h, conv.out_w, conv.pad_h, conv.pad_w) == (1, 1, 0, 0) \
        and (conv.k_h, conv.k_w) == (conv.in_h, conv.in_w) and \
        (conv.k_h == 1 or conv.dil_h == 1) and (conv.k_w == 1 or conv.dil_w == 1)


GROUP_CHANS = 8  # eb_dw_opt.c: EB_DW_GROUP_CHANS, a group's most input channels in the patch


def tile_cost(conv: Plane, n: int, turned: bool, per_value: int) -> int:
    """eb_dw_tile_cost: the tile kernel's estimated instructions an output (x10) over n tap
    pairs with m outputs a group (the fan, the pair loop, one channel), and its patch's
    copy at per_value a value (fill_cost), along the rows or turned."""
    m = conv.out_c // conv.groups
    # the frame's tap rows, its stride from row to row and along them
    k_r, s_r, s_c = (conv.k_w, conv.stride_w, conv.stride_h) if turned else \
        (conv.k_h, conv.stride_h, conv.stride_w)
    rows = 1 if turned and k_r == 1 else s_r  # turned: only the rows its taps read
    fill = per_value * (conv.in_c // conv.groups) * rows * s_c // m
    return fill + (10 * n + 85 if fans(m, n) else 28 * n + 60 if m >= 2 else 30 * n + 100)


def fill_cost(f: TileFrame) -> int:
    """eb_dw_tile_fill_cost: the patch's copy per value (x10) in frame f -- 15 along the
    rows; turned 30 where two patch rows are copied at a time, else 45."""
    skip = f.s_h if f.k_h == 1 else 1
    read = 2 if f.k_h > 1 else tile_shape(f)[0]
    return 15 if not f.turned else 30 if read >= 2 and skip <= 2 else 45


def col_cost(k: int, stride: int) -> int:
    """eb_dw_col_cost: the column kernels' (k taps)."""
    return k * (30 if stride == 1 else 35)


def group_claims(conv: Plane) -> bool:
    """eb_dw_group_claims: whether a dense or grouped conv (at most GROUP_CHANS input
    channels a group, a kernel of more than one tap) claims the tile kernel's patch -- in its frame of fewer tap pairs, the
    tile's estimated cost under 4/5 of the costlier path it could otherwise take. Channels,
    kernel and strides only: every tile of the layer claims it alike."""
    ipg, m = conv.in_c // conv.groups, conv.out_c // conv.groups
    k = ipg * conv.k_h * conv.k_w
    n = ipg * min(conv.k_h * _pairs(conv.k_w, conv.dil_w),
                  conv.k_w * _pairs(conv.k_h, conv.dil_h))
    if conv.groups == conv.in_c or ipg > GROUP_CHANS or n > DW_TILE_TAPS or k == ipg:
        return False
    other = gemm_cost(k, m)
    if conv.pad_w == 0 and conv.stride_w in (1, 2) and m <= COLUMN_MAX_OUT:  # any k_w
        other = max(other, col_cost(k, conv.stride_w))
    return 5 * tile_cost(conv, n, False, 15) < 4 * other


def group_tile(conv: Plane, packed: bool = False) -> bool:
    """eb_dw_group_tile: whether the tile kernel runs a dense or grouped conv -- it claims
    the patch, the kernel takes its frame, and there its estimated cost is under 4/5 of the
    column kernels' (where they take it) or else the GEMM's."""
    ipg, m = conv.in_c // conv.groups, conv.out_c // conv.groups
    k = ipg * conv.k_h * conv.k_w
    if not group_claims(conv) or not tile_takes(conv):
        return False
    other = col_cost(k, conv.stride_w) if column(conv) and not packed else gemm_cost(k, m)
    f = tile_frame(conv)
    return 5 * (tile_cost(conv, f.ntaps, f.turned, fill_cost(f)) + tile_fixed(f)) < 4 * other


def tile_fixed(f: TileFrame) -> int:
    """eb_dw_tile_fixed: the tile's cost per output channel and tile (x10) in frame f,
    spread over the tile's outputs."""
    rows, cols = tile_shape(f)
    return (120 * f.ntaps + 1000) // min(f.out_h * f.out_w, rows * cols)
