"""What the TFLite-format C kernels need of a generated project: the int16 scratch elements
of the optimized Cortex-M4 kernels (templates/kernels/eb_tfl_opt.c, eb_tfl_conv_scratch and
eb_tfl_linear_scratch there: this module computes the same numbers from the layer's shape,
so the code generator can size one buffer, 4-byte aligned, for the largest layer; the
portable kernels in eb_tfl.c need none). tests/test_tflite_kernels.py checks the two agree.

A convolution takes one of two paths (eb_tfl_opt.c):
- depthwise (in_c / groups == 1 and a channel multiplier up to DW_MAX_MULT): the padded
  int16 planes of a batch of input channels (dw_batch: many for small maps), a small
  (offset, weight pair) table and a record per output channel of the batch;
- im2col GEMM (every other convolution): a requantization table (4 int32 per output
  channel), an int32 offset per tap, the 4-pixel columns, a band of input rows (those of
  1, 2 or 4 output rows: a multiple of 4 pixels) and the group's weights expanded to int16
  records ([bias, weights, m, c, e] per output channel) when the weights fit WEXP_MAX
  elements, else (1x1 convolutions of 4 output pixels or more) those of a tile of an even
  number (at least TILE_MIN) of output channels that fit, when there is one.
The layout depends on the shape only, not on the padding, the zero points or the
quantization. A linear layer needs its input as int16, zero point applied.
"""

from __future__ import annotations

WEXP_MAX = 4096  # EB_TFL_WEXP_MAX: expanded int16 weights of one group, at most
DW_MAX_MULT = 4  # EB_TFL_DW_MAX_MULT: the depthwise path's largest channel multiplier
TILE_MIN = 8  # EB_TFL_TILE_MIN: the smallest tile of output channels with int16 records
DW_BATCH = 1536  # EB_TFL_DW_BATCH: int16 elements for a batch of depthwise planes, records
DW_BATCH_MAX = 8  # EB_TFL_DW_BATCH_MAX: depthwise input channels per batch, at most
DW_REC = 12  # EB_TFL_DW_REC: words of a depthwise channel's record (the assembly's)


def _round4(n: int) -> int:
    return (n + 3) & ~3


def _even(n: int) -> int:
    return (n + 1) & ~1


def is_depthwise(in_c: int, out_c: int, groups: int) -> bool:
    """Whether the depthwise path runs the layer (else the im2col GEMM)."""
    return in_c == groups and out_c // groups <= DW_MAX_MULT


def dw_batch(plane: int, in_c: int, mult: int) -> int:
    """Input channels whose padded planes (`plane` int16 each) and records are made at a
    time (eb_tfl_dw_batch): as many as DW_BATCH elements hold, at least one, at most
    DW_BATCH_MAX."""
    return max(1, min(in_c, DW_BATCH_MAX, DW_BATCH // (plane + DW_REC * 2 * mult)))


def conv_scratch(in_c: int, in_h: int, in_w: int, out_c: int, out_h: int, out_w: int,
                 k_h: int, k_w: int, stride_h: int, stride_w: int, dil_h: int, dil_w: int,
                 groups: int) -> int:
    """int16 scratch elements eb_tfl_conv2d_opt needs for this layer (eb_tfl_conv_scratch)."""
    del in_h, in_w  # the layout does not depend on them: only the rows and columns read do
    r4 = _round4(out_w)
    if is_depthwise(in_c, out_c, groups):
        plane_h = (_round4(out_h) - 1) * stride_h + (k_h - 1) * dil_h + 1
        plane_w = _even((r4 - 1) * stride_w + (k_w - 1) * dil_w + 2)
        taps = k_h * ((k_w + 1) // 2 if dil_w == 1 else k_w)
        mult = out_c // in_c
        batch = dw_batch(plane_h * plane_w, in_c, mult)
        return batch * plane_h * plane_w + 4 * taps + DW_REC * 2 * batch * mult
    ipg, opg = in_c // groups, out_c // groups
    kp = _round4(ipg * k_h * k_w)
    band_r = 1 if out_w % 4 == 0 else (2 if out_w % 2 == 0 else 4)  # output rows per band
    band_h = (band_r - 1) * stride_h + (k_h - 1) * dil_h + 1
    band_w = _round4((out_w - 1) * stride_w + (k_w - 1) * dil_w + 2)
    band = _even((ipg * band_h * band_w + 1) // 2)
    wexp = opg * (kp + 8) if opg * kp <= WEXP_MAX else 0  # [init] weights [m, c, e] per channel
    if wexp == 0 and (WEXP_MAX // kp) & ~1 >= TILE_MIN and (k_h, k_w, stride_h, stride_w) == (
            1, 1, 1, 1) and out_h * out_w >= 4:  # a 1x1 conv of a pixel block: channel tiles
        wexp = ((WEXP_MAX // kp) & ~1) * (kp + 8)
    return 8 * out_c + 2 * kp + 4 * kp + band + wexp


def linear_scratch(in_f: int) -> int:
    """int16 scratch elements eb_tfl_linear_opt needs (eb_tfl_linear_scratch): the input,
    zero point applied, rounded up to a multiple of 4."""
    return _round4(in_f)


# eb_tfl_opt.c's EB_TFL_ADD_TABLE_MIN: an add of fewer values runs the portable loop.
ADD_TABLE_MIN = 256


def add_scratch(n: int) -> int:
    """int16 scratch elements eb_tfl_add_opt needs (eb_tfl_add_scratch): its two tables of
    256 int32 terms when the add has ADD_TABLE_MIN values or more, else none."""
    return 1024 if n >= ADD_TABLE_MIN else 0
