"""The depthwise 3x3 inner loop specialised at generation time (eb_dw_opt.h, EB_DW3_SPEC):
for an untiled int8 depthwise 3x3 stride-1 layer whose padded channel copy holds the whole
plane, the generated C instantiates the padded path's loop with the layer's row pitch, output
width and requantization shift as immediates, and the layer's call hands it to the kernel."""

from __future__ import annotations

from typing import Any

from edgebuild.core.geometry import Plane
from edgebuild.ops.c import CCode, CStep
from edgebuild.ops.operator import Activation

DW_PAD_BYTES = 2048  # eb_kernels_opt.h, EB_DW_PAD_BYTES: the untiled padded copy's cap
DW_PAD_SLACK = 4  # EB_DW_PAD_SLACK: bytes past the padded rows its word stores may write

# The calls of a layer with a spec; the reference build runs the reference loops.
PRELUDE = (4, """/* Depthwise 3x3 layers with a generation-time loop (EB_DW3_SPEC, eb_dw_opt.h). */
#ifdef EB_REFERENCE_KERNELS
#define EB_DW_CONV2D_SPEC(p, k, in, w, b, out) \\
    ((void)(k), (void)eb_scratch, eb_conv2d(p, in, w, b, out))
#define EB_DW_POOL_CONV2D_SPEC(q, p, k, in, pooled, w, b, out) \\
    ((void)(k), eb_pool2d(q, in, pooled), eb_conv2d(p, pooled, w, b, out))
#else
#define EB_DW_CONV2D_SPEC(p, k, in, w, b, out) \\
    eb_dw_conv_spec_opt(p, k, in, w, b, out, eb_scratch.values)
#define EB_DW_POOL_CONV2D_SPEC(q, p, k, in, pooled, w, b, out) \\
    eb_dw_pool_conv_spec_opt(q, p, k, in, pooled, w, b, out, eb_scratch.values)
#endif

""")


def spec_args(step: CStep[Any], conv: Plane) -> tuple[int, int, int, str] | None:
    """(pitch, out_w, s, act) of the layer's EB_DW3_SPEC, or None when the padded path's
    generation-time loop does not fit it: an untiled int8 depthwise 3x3 stride-1 layer with
    rows of at least 4 bytes, at most 3 of padding, an even out_w (pixel pairs along the
    rows), the whole padded plane in the copy, act none or relu and a right shift."""
    layer, quant = step.layer, step.quant
    act = getattr(layer, "act", None)
    if not step.optimized or step.tile is not None or quant is None or \
            getattr(layer, "wide", False) or act not in (Activation.none, Activation.relu):
        return None
    pitch = conv.in_w + conv.pad_w
    if conv.groups != conv.in_c or (conv.k_h, conv.k_w, conv.stride_h, conv.stride_w,
                                    conv.dil_h, conv.dil_w) != (3, 3, 1, 1, 1, 1) or \
            conv.in_w < 4 or conv.pad_w > 3 or conv.out_h < 2 or conv.out_w < 2 or \
            conv.out_w % 2 or (conv.out_h + 2) * pitch + conv.pad_w > DW_PAD_BYTES or \
            not -31 <= quant.shift <= -1:
        return None
    return pitch, conv.out_w, -quant.shift, act.value.upper()


def spec_decl(step: CStep[Any], conv: Plane) -> CCode | None:
    """The layer's EB_DW3_SPEC (named K_<layer>) and the calls' prelude, or None."""
    args = spec_args(step, conv)
    if args is None:
        return None
    pitch, out_w, s, act = args
    return CCode((f"EB_DW3_SPEC({step.symbol('K')}, {pitch}, {out_w}, {s}, {act})",),
                 preludes=(PRELUDE,))


def padded_bytes(conv: Plane) -> int:
    """Bytes of the untiled padded path's channel copy (in the kernels' scratch) for a layer
    that path takes (conv.banded), by EB_DW_OPT_SCRATCH's rule (eb_kernels_opt.h): the whole
    padded plane (out_h + 2 rows, L = in_w + pad_w bytes apart, and pad_w) when it fits in
    DW_PAD_BYTES, else a band of the most rows an even count of output rows needs; and the
    slack. 0 when not even a band of 2 output rows fits."""
    pitch = conv.in_w + conv.pad_w
    fit = (DW_PAD_BYTES - conv.pad_w) // pitch - 2
    rows = conv.out_h if conv.out_h <= fit else fit & ~1
    return 0 if rows < 2 else (rows + 2) * pitch + conv.pad_w + DW_PAD_SLACK


def padded_scratch(conv: Plane) -> str:
    """`padded_bytes` as the C's int16 elements of scratch: what the layer's call claims."""
    return f"(EB_DW_OPT_SCRATCH({conv.in_w}, {conv.pad_w}, {conv.out_h}) + 1) / 2"
