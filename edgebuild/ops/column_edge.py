"""The column kernels' rows in the width padding (eb_dw_opt.c: eb_col_inside,
eb_col_edges_fit, eb_col_edge_beats_gemm): which outputs of a row their tap pairs take from
the input, and when they take a row whose other outputs (eb_col_edge's, a dot product at a
time over the taps inside the input) are many -- the twins the kernel selection, the scratch
claims and the path predictions ask, so that they answer as the C does."""

from __future__ import annotations

from edgebuild.core.geometry import Plane


def gemm_cost(k: int, m: int) -> int:
    """eb_dw_gemm_cost: the im2col/GEMM path's estimated instructions x10 an output and
    channel (columns of k values, rows of m outputs)."""
    return 9 * k + 160 + 45 * k // m


def column_inside(conv: Plane) -> tuple[int, int]:
    """eb_col_inside: the outputs [first, end) of a row whose taps all lie inside the
    input's width; the column kernels leave the rest (width padding) to eb_col_edge, which
    costs about three times as much an output -- so they take a padded conv only with at
    least 4 inside and at most a share of a row outside (edge_share), or where the GEMM
    would cost more (beats_gemm)."""
    s = conv.stride_w
    last = conv.in_w - 1 + conv.pad_w - (conv.k_w - 1) * conv.dil_w
    end = 0 if last < 0 else last // s + 1
    return (conv.pad_w + s - 1) // s, min(end, conv.out_w)


def edge_share(cout_g: int) -> int:
    """eb_col_edges_fit's share: the column kernels take a row with width padding when at
    most 1/edge_share of its outputs lie outside -- a quarter for one output a group (the
    GEMM then serves one dot product a pixel), a sixth for more (96 -> 3 k3 on an 11-wide
    row, 2 outside, ran 2.28 insn/MAC on the GEMM, 4.79 on them; 48 -> 64 3x3 dilation 2 in
    16 groups on 31-wide rows, 4 outside, 2.91 on the GEMM, 1.83 on them)."""
    return 4 if cout_g == 1 else 6


def taps_inside(start: int, dil: int, k: int, size: int) -> int:
    """eb_tap_range's count: the taps t < k with 0 <= start + t * dil < size."""
    return sum(0 <= start + t * dil < size for t in range(k))


def beats_gemm(conv: Plane, first: int, end: int) -> bool:
    """eb_col_edge_beats_gemm: on a conv of one output a group, the tap pairs for outputs
    [first, end) and eb_col_edge for the others against the GEMM, estimates x10 a row -- an
    inside output's multiply 17 (stride 1) or 22, an edge output's tap inside the input 45,
    the tables 200 a tap over the rows; the GEMM gemm_cost an output -- by a third (32 -> 1
    15x15 stride 2 pad 7 on 27 x 27, 8 of 14 outputs outside, ran 6.27 insn/MAC on the GEMM,
    3.39 here with eb_col_edge's taps a byte at a time, 2.56 with its runs by words)."""
    cin_g = conv.in_c // conv.groups
    k = cin_g * conv.k_h * conv.k_w
    edge = sum(taps_inside(x * conv.stride_w - conv.pad_w, conv.dil_w, conv.k_w, conv.in_w)
               for x in range(conv.out_w) if x < first or x >= end)
    col = (end - first) * k * (17 if conv.stride_w == 1 else 22) + \
        45 * edge * cin_g * conv.k_h + 200 * k // conv.out_h
    return 3 * col < 2 * conv.out_w * gemm_cost(k, 1)


def edges_fit(conv: Plane, width: int) -> bool:
    """eb_col_edges_fit: whether the tap pairs from the input take rows of `width` outputs
    inside the input (column_inside): at least 4, at most 1/edge_share outside, or more
    where one output a group of several inputs beats the GEMM so (beats_gemm). A row more in
    the padding runs over the copy where that beats the GEMM (conv_path.copy_beats_gemm),
    else on the GEMM."""
    return width >= 4 and (
        edge_share(conv.out_c // conv.groups) * (conv.out_w - width) <= conv.out_w or
        conv.out_c == conv.groups and conv.in_c > conv.groups and
        beats_gemm(conv, *column_inside(conv)))
