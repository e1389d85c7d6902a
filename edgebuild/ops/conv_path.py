"""Which of the optimized kernels a convolution takes (eb_kernels_opt.c, eb_dw_opt.c): the
predicates the C generator (`edgebuild.ops.conv`) and the plan's workspace count share, each
the Python twin of the test its C path makes, so that a step links the file and claims the
scratch of the path its layer runs."""

from __future__ import annotations

from edgebuild.core.geometry import Plane
from edgebuild.ops import dw_spec

DW_TILE_SCRATCH = "EB_DW_TILE_SCRATCH"  # eb_kernels_opt.h: the tile kernel's patch, int16
DW_TILE_ELEMENTS = (dw_spec.DW_PAD_BYTES + 1) // 2  # its value


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


def dw_tile(conv: Plane) -> bool:
    """Whether the optimized depthwise path may run a conv by its tile kernel (eb_dw_opt.c),
    whose patch takes EB_DW_TILE_SCRATCH int16 of the scratch: a depthwise conv (one input
    channel too) that the 3-tap kernels do not take. The kernel may still decline it (a
    kernel too large for its tap table or patch); the claim holds either way."""
    return conv.groups == conv.in_c and not three_tap(conv)


COLUMN_MAX_OUT = 4  # eb_dw_opt.c: EB_COL_MAX_OUT, outputs per group of a non-depthwise one


def column(conv: Plane) -> bool:
    """Whether eb_dw_opt.c's column kernels take a conv (eb_col_takes, but for packed
    weights, which they leave to the other paths): a kernel one column wide (k_w == 1, no
    width padding, stride_w 1 or 2) over rows of at least 4 outputs, depthwise or with at
    most COLUMN_MAX_OUT outputs per group, and not a 1x1 stride-1 unpadded one (a
    per-channel scale, or a pointwise product). A dense one links the depthwise file."""
    cin_g, cout_g = conv.in_c // conv.groups, conv.out_c // conv.groups
    return conv.k_w == 1 and conv.pad_w == 0 and conv.stride_w in (1, 2) and \
        conv.out_w >= 4 and (cin_g == 1 or cout_g <= COLUMN_MAX_OUT) and \
        not (conv.k_h == 1 and conv.stride_h == 1 and conv.stride_w == 1 and conv.pad_h == 0)


def split(conv: Plane) -> bool:
    """Whether the optimized kernels run the tiled conv split (eb_conv2d_tiled_cols: columns
    built once per row tile, weights streamed; memory.tiling's split layout): a dense conv
    with more than one input channel (one input channel takes the depthwise kernel)."""
    return conv.groups == 1 and conv.in_c > 1


def depthwise_paths(conv: Plane) -> frozenset[str]:
    """The optional kernel paths (ops.c OPTIONAL_PATHS) of eb_dw_opt.c a conv may take:
    "depthwise" (the file) for a depthwise or column conv, with "dw_three_tap" for a layer
    the 3-tap kernels take and "dw_other" for one the tile, column, table or scale kernels
    take; a model's eb_config.h leaves out the others (EB_OPT_NO_...), so it links the
    kernels its layers run, not all of them."""
    depthwise = conv.groups == conv.in_c  # one input channel too
    if not (depthwise or column(conv)):
        return frozenset()
    return frozenset({"depthwise", "dw_three_tap" if depthwise and three_tap(conv)
                      else "dw_other"})
