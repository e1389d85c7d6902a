"""Which convolutions the few-input kernel (eb_dw_opt.c, eb_dw_few) takes: a dot product of
at most FEW_IN terms an output at fixed offsets, each pixel's terms loaded and paired once
for all the outputs of its group -- the twin of eb_dw_few_takes and eb_dw_few_of, so that a
step links the path ("dw_few") its layer runs."""

from __future__ import annotations

from edgebuild.core.geometry import Plane
from edgebuild.core.numerics import Activation, QuantParams
from edgebuild.ops.dw_rows import DW3_LINE_MIN, three_tap
from edgebuild.ops.dw_rows import row_major as _row_major

FEW_IN = 4  # eb_dw_opt.c: EB_DW_FEW_IN, the most inputs a group of the few-input kernel


def few(conv: Plane, forms: bool = True) -> bool:
    """eb_dw_few_takes: a stride-1 conv of 2..FEW_IN terms an output (inputs a group times
    taps: 3 -> 1 1x1, a grouped 4 -> 192 1x1 of 2 inputs a group, a 2x1, 3x1 or 2x2
    depthwise of any multiplier; padded only along the rows of a conv one column wide; packed
    weights are left to the other paths) whose outputs a form of the few-input kernel
    requantizes (`forms`: few_requantizes; the kernel leaves the others to the next): a dot
    product of at most 4 terms at fixed offsets, which the few-input kernel runs with each
    pixel's terms loaded and paired once for all the outputs of its group (4 -> 192 1x1 in 2 groups 4.8 insn/MAC on the GEMM's padded
    rows, 2.3 here; a 2x2 depthwise 6.4 on the column kernels, 3.2 here) -- where the run of
    its blocks (few_inside) is at least 4 pixels (a 1x1's any), and not a depthwise conv the
    3-tap kernels take with a multiplier of 2 or more (their channel pairs: a 1-D k3 x3 on 97
    samples, tiled, 3.31 insn/MAC there, 3.42 here) or in rows of DW3_LINE_MIN outputs or
    more of one kernel row (their quads: a 1-D k3 on 1,000 samples 2.04 there, 2.82 here)."""
    terms = conv.in_c // conv.groups * conv.k_h * conv.k_w
    flat = conv.k_w == 1 and conv.pad_w == 0
    if not forms or (conv.stride_h, conv.stride_w) != (1, 1) or not 2 <= terms <= FEW_IN or \
            conv.pad_w != 0 or not (conv.pad_h == 0 or flat):
        return False
    (y0, y1), (x0, x1) = few_inside(conv)
    run = (y1 - y0) * conv.out_w if flat else x1 - x0
    g = _row_major(conv)
    return y1 > y0 and run > 0 and (run >= 4 or conv.k_h * conv.k_w == 1) and not (
        three_tap(conv) and conv.groups == conv.in_c and
        (conv.out_c >= 2 * conv.in_c or (g.k_h == 1 and g.out_w >= DW3_LINE_MIN)))


def few_inside(conv: Plane) -> tuple[tuple[int, int], tuple[int, int]]:
    """eb_dw_few_geom_of: the output rows [y0, y1) and columns [x0, x1) whose terms all lie
    inside the input at stride 1 (the few-input kernel's blocks; a conv one column wide
    without column padding runs those rows as one run, its other rows with the padding's
    terms weighed 0; the rest a pixel at a time)."""
    def span(pad: int, size: int, k: int, dil: int, out: int) -> tuple[int, int]:
        lo = min(pad, out)
        return lo, max(min(size + pad - (k - 1) * dil, out), lo)
    return (span(conv.pad_h, conv.in_h, conv.k_h, conv.dil_h, conv.out_h),
            span(conv.pad_w, conv.in_w, conv.k_w, conv.dil_w, conv.out_w))


def few_requantizes(quant: QuantParams | None, wide: bool, act: Activation) -> bool:
    """Whether a form of the few-input kernel (eb_dw_few_of) requantizes a layer's outputs:
    int8 out, relu or none, a right shift of 0..16 (shift_forms)."""
    return quant is not None and not wide and act in (Activation.none, Activation.relu) and \
        0 <= -quant.shift <= 16
