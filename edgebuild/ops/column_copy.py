"""The column kernels over a copy (eb_dw_opt.c, eb_colc_layer): which convolutions take
them and the scratch their copy claims -- the twin of eb_colc_gains, so that a step links
the path ("dw_column_copy") and the plan counts its bytes.

A dense or grouped conv of at most COLUMN_MAX_OUT outputs a group copies each group's input
once into the scratch as int16 channel pairs (a word a pair and padded pixel, the padding
zeros, at stride 2 a row's even pixels before its odd ones): a tap of a channel pair and 4
pixels is then a record, an ADD, an LDM and 4 SMLAD -- 8 instructions per 8 multiplies
where the tap pairs from the input take 13 -- and no output reaches into the padding. The
copy costs about 6.5 instructions a word, a record 25 to write."""

from __future__ import annotations

from edgebuild.core.geometry import Plane

COPY_BYTES = 12288  # eb_kernels_opt.h: EB_COL_COPY_BYTES, the copy's cap
# Estimates x10 (instructions, cycles) over the copy: a multiply, a word copied
# (eb_colc_fill), a record written an output channel (eb_colc_records)
MAC, WORD, RECORD = (10, 20), (65, 95), (250, 350)
# ... by the tap pairs from the input, instructions: a multiply of an output channel by
# (run alone, stride_w); a block of 4 outputs of a channel pair beside its taps; an edge
# output beside 3 times an inside one's multiplies (eb_col_edge's loops); cycles about 1.4
# an instruction
PAIRS = {(True, 1): 18, (True, 2): 21, (False, 1): 13, (False, 2): 15}
BLOCK, EDGE, CYCLES = 300, 3000, 14


def size(conv: Plane) -> tuple[int, int, int]:
    """eb_colc_size: the copy's padded rows and columns, and its words (channel pairs of a
    group x rows x columns)."""
    rows = (conv.out_h - 1) * conv.stride_h + (conv.k_h - 1) * conv.dil_h + 1
    cols = (conv.out_w - 1) * conv.stride_w + (conv.k_w - 1) * conv.dil_w + 1
    return rows, cols, (conv.in_c // conv.groups + 1) // 2 * rows * cols


def record_count(conv: Plane) -> int:
    """The copy's records an output channel (eb_colc_records): one a tap of a channel pair,
    an even count."""
    return ((conv.in_c // conv.groups + 1) // 2 * conv.k_h * conv.k_w + 1) // 2 * 2


def gains(conv: Plane, width: int) -> bool:
    """eb_colc_gains: of a padded conv the column kernels take with several inputs a group
    (its outputs `width` of a row inside the input; a tiled pass's tiles come unpadded, so
    no tile takes the copy), whether the copy fits COPY_BYTES and the
    estimates over it -- multiplies, copied words, records -- are below the tap pairs' from
    the input (an odd count's last output channel alone, the others in pairs; edge outputs,
    blocks) in instructions and in cycles: a 96 -> 1 k5 pad 2 on 40-wide rows ran 7 %
    fewer instructions over the copy but 14 % more cycles, 32 -> 1 1x8 pad 3 30 % and 10 %
    fewer."""
    cin_g, cout_g = conv.in_c // conv.groups, conv.out_c // conv.groups
    _, _, words = size(conv)
    macs = cout_g * cin_g * conv.k_h * conv.k_w * conv.out_h * conv.out_w
    records = record_count(conv)
    blocks = conv.out_h * ((conv.out_w + 3) // 4) * ((cout_g + 1) // 2)
    edges = (conv.out_w - width) * conv.out_h * cout_g
    scale = conv.out_w * cout_g
    per = cout_g % 2 * PAIRS[True, conv.stride_w] + cout_g // 2 * 2 * PAIRS[False, conv.stride_w]
    old = per * macs * (3 * conv.out_w - 2 * width) + (BLOCK * blocks + EDGE * edges) * scale
    new = [(MAC[i] * macs + WORD[i] * words + RECORD[i] * records * cout_g) * scale
           for i in (0, 1)]
    return cin_g >= 2 and (conv.pad_h > 0 or conv.pad_w > 0) and 4 * words <= COPY_BYTES \
        and new[0] < old and 10 * new[1] < CYCLES * old


def claim(conv: Plane) -> tuple[str, int]:
    """The C claim (EB_COL_COPY_SCRATCH) of a conv that takes the copy and the int16
    elements it counts -- the records' table room (EB_CONV_OPT_SCRATCH) and two a word."""
    cin_g, words = conv.in_c // conv.groups, size(conv)[2]
    taps = cin_g * conv.k_h * conv.k_w
    return (f"EB_COL_COPY_SCRATCH({cin_g}, {conv.k_h}, {conv.k_w}, {words})",
            4 * ((taps + 3) // 4 * 4) + 2 * words)
