"""The 3-tap kernels' rows (eb_dw_opt.c: eb_dw3_row, eb_dw3_line, the padded path's band)
as the depthwise path sees a conv: its row-major view and which of the rows' forms take it
-- the Python twins edgebuild.ops.conv_path's kernel choice builds on."""

from __future__ import annotations

from edgebuild.core.geometry import Plane
from edgebuild.ops import dw_spec

DW3_LINE_MIN = 64  # eb_dw_opt.c: EB_DW3_LINE_MIN, the 3-tap quads' shortest row the
# few-input kernel yields to them


def row_major(conv: Plane) -> Plane:
    """The conv as eb_dw_layer sees it: a 1-D layer laid as a column ([C][L][1], k_w 1, no
    width padding) is the row it is in memory."""
    if not (conv.in_w == 1 and conv.k_w == 1 and conv.pad_w == 0):
        return conv
    return Plane(in_c=conv.in_c, out_c=conv.out_c, groups=conv.groups, in_h=conv.in_w,
                 in_w=conv.in_h, out_h=conv.out_w, out_w=conv.out_h, k_h=conv.k_w,
                 k_w=conv.k_h, stride_h=conv.stride_w, stride_w=conv.stride_h,
                 pad_h=conv.pad_w, pad_w=conv.pad_h, dil_h=conv.dil_w, dil_w=conv.dil_h)


def three_tap(conv: Plane) -> bool:
    """Whether eb_dw_opt.c's 3-tap kernels take a depthwise conv (a 3x3 or 1-D k = 3, stride
    and dilation 1 along the row, rows of at least 4, at most 3 of padding); a 1-D layer laid
    as a column ([C][L][1]) counts as the row it is in memory."""
    if conv.in_w == 1 and conv.k_w == 1 and conv.pad_w == 0:  # the row is the column
        k, across, stride, dil, width, pad = (conv.k_h, conv.k_w, conv.stride_h, conv.dil_h,
                                              conv.in_h, conv.pad_h)
    else:
        k, across, stride, dil, width, pad = (conv.k_w, conv.k_h, conv.stride_w, conv.dil_w,
                                              conv.in_w, conv.pad_w)
    return k == 3 and stride == 1 and dil == 1 and across in (1, 3) and width >= 4 and pad <= 3


def three_tap_pair(conv: Plane) -> bool:
    """Whether a conv the 3-tap kernels take runs their rows two output channels a pass
    (eb_dw_opt.c, EB_DW3_PAIRS): a multiplier of 2 or more on the rows the padded path
    leaves them -- 1-D, one output row or column, a vertical stride or dilation, or rows too
    wide for a band of two output rows (eb_dw3_band)."""
    g = row_major(conv)
    if conv.out_c < 2 * conv.in_c:
        return False
    return g.k_h != 3 or g.stride_h != 1 or g.dil_h != 1 or g.out_h < 2 or g.out_w < 2 or \
        dw_spec.padded_bytes(g) == 0


def three_tap_line(conv: Plane) -> bool:
    """Whether a conv the 3-tap kernels take runs a lone channel's rows in quads
    (eb_dw_opt.c, eb_dw3_line, "dw_three_tap_line"): one kernel row (a 1-D k3, a 1x3), rows
    of at least 4 outputs and an odd multiplier (an even one's channels go in pairs, but for
    a pair whose requantization does not fit, which then runs the pixel pairs)."""
    g = row_major(conv)
    return g.k_h == 1 and g.out_w >= 4 and (conv.out_c // conv.in_c) % 2 == 1
