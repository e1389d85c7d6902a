"""The depthwise stride-2 kernel of 3-wide kernel rows (eb_dw_opt.c, eb_dw_s2): which
convolutions it takes -- the twin of eb_dw_s2_takes, so that a step links its path
("dw_s2"). A 3x3 stride-2 depthwise layer (a MobileNet's downsampling) or a 1-D k3
stride 2: a band of an input channel's rows copied zero-padded as int8 into the tile
kernel's patch, 4 outputs a block from two words and a byte of each kernel row (17
instructions per 12 multiplies), no edge case."""

from __future__ import annotations

from edgebuild.core.geometry import Plane
from edgebuild.ops import dw_spec
from edgebuild.ops.dw_rows import row_major

KH = 7  # eb_dw_opt.c: EB_DW_S2_KH, kernel rows at most
BAND_BYTES = 2 * ((dw_spec.DW_PAD_BYTES + 1) // 2)  # the tile kernel's patch (its claim)


def pitch(conv: Plane) -> int:
    """eb_dw_s2_pitch: a padded row's bytes, the 2 out_w + 1 a row's outputs read rounded
    up to a word (row-major view)."""
    return (2 * row_major(conv).out_w + 1 + 3) & ~3


def takes(conv: Plane) -> bool:
    """eb_dw_s2_takes: a depthwise conv of multiplier 1 whose kernel rows are 3 wide at
    stride 2 and dilation 1 along them (row-major view), at most KH of them, rows of 8
    outputs or more, and one output row's input rows fitting the patch (shorter rows or a
    multiplier ran slower here than on the paths after it)."""
    g = row_major(conv)
    return conv.groups == conv.in_c == conv.out_c and g.k_w == 3 and g.stride_w == 2 and \
        g.dil_w == 1 and g.k_h <= KH and g.out_w >= 8 and \
        ((g.k_h - 1) * g.dil_h + 1) * pitch(conv) <= BAND_BYTES
