"""The im2col path's padded band (eb_kernels_opt.c, eb_conv_band): which convolutions take
it and the scratch they claim for it -- the Python twin of eb_band_bytes, so that a step
links the path ("im2col_band") and the plan counts its bytes."""

from __future__ import annotations

from edgebuild.core.geometry import Plane
from edgebuild.ops.dw_rows import row_major

BAND_BYTES = 1536  # eb_kernels_opt.h: EB_CONV_BAND_BYTES, the band's most bytes
BAND_TAPS = 512  # eb_kernels_opt.h: EB_CONV_BAND_TAPS, a group's most taps (offsets after it)


def pitch(conv: Plane) -> int:
    """EB_CONV_BAND_PITCH: a band row's bytes -- the input row between its width padding and
    8 bytes of slack (a row's last block of 1..3 pixels reads its 4, a stride-2 block's
    words 7 bytes past its first pixel), rounded up to a word."""
    return (conv.in_w + 2 * conv.pad_w + 8 + 3) & ~3


def band_bytes(conv: Plane) -> int:
    """eb_band_bytes: the band's bytes for a conv that takes it, else 0 -- a dense or grouped
    one (a depthwise layer's own kernels take it: no claim for it) with padding, stride 1 or
    2 along its rows, rows of at least 4 outputs, at most BAND_TAPS taps a
    group, whose group's in_c / groups x k_h input rows fit BAND_BYTES at the pitch. (At
    stride 2 the C takes it only with the stride-2 columns linked: the claim holds either
    way.) Its blocks then take their columns straight from the band, the edges' too."""
    ipg = conv.in_c // conv.groups
    size = ipg * conv.k_h * pitch(conv)
    takes = (conv.pad_h > 0 or conv.pad_w > 0) and conv.out_w >= 4 and \
        (conv.groups == 1 or conv.in_c != conv.groups) and \
        conv.stride_w in (1, 2) and ipg * conv.k_h * conv.k_w <= BAND_TAPS and \
        size <= BAND_BYTES
    return size if takes else 0


def scratch(conv: Plane) -> str | None:
    """The C claim (EB_CONV_BAND_SCRATCH, int16 elements: the columns and the band) of a conv
    that takes the band, else None."""
    if not band_bytes(conv):
        return None
    return (f"EB_CONV_BAND_SCRATCH({conv.in_c // conv.groups}, {conv.k_h}, {conv.k_w}, "
            f"{conv.in_w}, {conv.pad_w})")


def elements(conv: Plane, row: bool = False) -> int:
    """The int16 elements EB_CONV_BAND_SCRATCH counts: 4 columns of the taps rounded up to 4,
    the band's bytes and the taps' int32 offsets; 0 for a conv that does not take it.
    `row`: conv is a 1-D layer's window (a column, L x 1, as the tiler lays it) that runs
    untiled as one row (1 x L, as the kernels then get it)."""
    if row:
        conv = row_major(conv)
    size = band_bytes(conv)
    if not size:
        return 0
    taps = conv.in_c // conv.groups * conv.k_h * conv.k_w
    return 4 * ((taps + 3) & ~3) + size // 2 + 2 * taps
