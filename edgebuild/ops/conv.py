"""What conv1d, conv2d and conv_transpose2d share: their fields, parameter and MAC counts,
the compute rule (float, fake-quant, integer), the C of a convolution with its fused input
pooling, and their windows for the L1 tiler and the training kernels. Each op keeps its own
module for what differs (its geometry, its torch functional, its reference loop)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pydantic import Field

from edgebuild.core import numerics
from edgebuild.core.geometry import Plane, Shape, ShapeError, Window, plane, pool_plane, pooled
from edgebuild.ops import column_rows, dw_spec, im2col_band, reach
from edgebuild.ops import pool as pooling
from edgebuild.ops.c import (
    CCode,
    CStep,
    bias_symbol,
    conv_params,
    packed_bits,
    pool_call,
    pool_params,
    tile_decl,
)
from edgebuild.ops.conv_path import (
    DW_TILE_ELEMENTS,
    DW_TILE_SCRATCH,
    as_linear,
    copy_claim,
    dw_tile,
    gathers,
    gemm_short,
    kernel_paths,
    line_requantizes,
    pointwise,
    pointwise_column,
    shift_forms,
    split,
    two_pixel_block,
)
from edgebuild.ops.dw_few import few_requantizes
from edgebuild.ops.onnxcode import (
    Attribute,
    Form,
    OnnxCode,
    OnnxStep,
    fake_requantize,
    fake_weights,
    float_output,
    requantize,
)
from edgebuild.ops.operator import (
    Activation,
    C,
    ComputeLayer,
    Count,
    FusedPool,
    LayerBase,
    Mode,
    Onnx,
    PoolMode,
    Weights,
)

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray

    from edgebuild.core.numerics import QuantParams
    from edgebuild.ops.operator import Ints

    # The torch modules of the ops computed here (their `module` facets build them).
    WeightModule: TypeAlias = (torch.nn.Conv1d | torch.nn.Conv2d | torch.nn.ConvTranspose2d
                               | torch.nn.Linear)


class ConvFields(LayerBase):
    out: Count = Field(description="output channels")
    groups: Count = Field(default=1, description="1 = dense, in_channels = depthwise")
    bias: bool = True
    act: Activation = Activation.none
    pool: FusedPool | None = Field(default=None, description="pooling applied to the input first")
    wide: bool = Field(default=False, description="int32 output; only on the last layer")


Conv = TypeVar("Conv", bound=ConvFields)  # one convolution op's layer record
# layer -> (kernel, stride, pad, dilation), each per spatial axis
Axes: TypeAlias = Callable[[Conv], tuple[tuple[int, ...], ...]]


def check_groups(layer: ConvFields, in_channels: int) -> None:
    if in_channels % layer.groups or layer.out % layer.groups:
        raise ShapeError(f"groups={layer.groups} must divide both the input channels "
                         f"({in_channels}) and out ({layer.out})")


def conv_params_count(layer: ConvFields, in_channels: int, kernel_elems: int) -> int:
    weights = layer.out * (in_channels // layer.groups) * kernel_elems
    return weights + (layer.out if layer.bias else 0)


def conv_macs(layer: ConvFields, in_channels: int, kernel_elems: int, out_positions: int) -> int:
    """Each output value (out channels x positions) sums (in/groups) x kernel products."""
    return layer.out * out_positions * (in_channels // layer.groups) * kernel_elems


def weight_shape(layer: Conv, in_shape: Shape, axes: Axes[Conv]) -> Shape:
    """(out, in / groups, *kernel)."""
    return (layer.out, in_shape[0] // layer.groups, *axes(layer)[0])


def validate_wide(layer: ComputeLayer) -> None:
    if layer.wide and layer.act.value != "none":
        raise ShapeError("a `wide` (int32) output has no activation; set `act: none`")


def torch_compute(layer: ComputeLayer, module: WeightModule, x: torch.Tensor, mode: Mode,
                  apply: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None],
                                  torch.Tensor]) -> torch.Tensor:
    """Forward of conv1d/conv2d/linear: float, or fake-quant following numerics exactly.

    `apply(x, weight, bias)` is the op's functional (F.conv1d, F.conv2d, F.linear)."""
    weight, bias = module.weight, module.bias
    if mode.kind == "float":
        pre = apply(x, weight, bias)
        if layer.wide:
            return pre
        return numerics.torch_clamp_float(pre, layer.act.value) if mode.clamp else \
            numerics.torch_activate(pre, layer.act.value)
    policy = mode.policy[layer.name]
    scale_exp = mode.scale_exps[layer.name] if mode.scale_exps is not None else \
        numerics.torch_scale_exponent(weight, policy.shift_quantile, policy.shift_limits)
    fake_w = numerics.torch_fake_weights(weight, scale_exp, policy.weight_bits)
    fake_b = None if bias is None else numerics.torch_fake_bias(
        bias, scale_exp, policy.weight_bits, policy.bias_bits, policy.bias_scale_log2)
    pre = apply(x, fake_w, fake_b)
    if layer.wide:
        return pre
    return numerics.torch_requantize(pre, mode.rounding, layer.act.value)


def reference_compute(layer: ComputeLayer, quant: QuantParams, acc: Ints,
                      rounding: str) -> Ints:
    """Bias, shift, rounding, activation, saturation on an int64 accumulator."""
    if quant.bias is not None:
        acc = acc + quant.bias.reshape((1, -1) + (1,) * (acc.ndim - 2))
    if layer.wide:
        return acc
    return numerics.np_requantize(acc, quant.shift, rounding, layer.act.value)


def reference_conv(x: NDArray[np.integer[Any]], weight: NDArray[np.integer[Any]], groups: int,
                   kernel: tuple[int, ...], stride: tuple[int, ...], pad: tuple[int, ...],
                   dilation: tuple[int, ...]) -> Ints:
    """Integer convolution (N, C, *S) x (O, C/groups, *K) -> (N, O, *S') in int64."""
    import numpy as np

    view = pooling.windows(x.astype(np.int64), kernel, stride, dilation, pad)
    n, c = view.shape[:2]
    spatial = view.shape[2:2 + len(kernel)]
    view = view.reshape(n, groups, c // groups, *view.shape[2:])
    w = weight.astype(np.int64).reshape(groups, weight.shape[0] // groups, *weight.shape[1:])
    letters = "hw"[:len(kernel)] if len(kernel) == 2 else "l"
    taps = "ij"[:len(kernel)]
    out = np.einsum(f"ngc{letters}{taps},goc{taps}->ngo{letters}", view, w)
    return out.reshape(n, weight.shape[0], *spatial)


# --- geometry ------------------------------------------------------------------------------


def conv_plane(layer: Conv, in_shape: Shape, out_shape: Shape, axes: Axes[Conv],
               vertical: bool = False) -> Plane:
    """The convolution's plane, over its (already pooled) input `in_shape`."""
    kernel, stride, pad, dilation = axes(layer)
    return plane(in_shape, out_shape, kernel, stride, pad, dilation, layer.groups, vertical)


def conv_windows(layer: Conv, in_shapes: tuple[Shape, ...], out_shape: Shape, axes: Axes[Conv],
                 transposed: bool = False) -> tuple[tuple[str, Window], ...]:
    """A fused input pool (its own tiled pass, `pool_tile`), then the convolution (`tile`).
    1-D layers are tiled along time: they run as one column (L x 1)."""
    found: list[tuple[str, Window]] = []
    window = None if layer.pool is None else pool_plane(layer.pool, in_shapes[0], vertical=True)
    shape = reach.pooled_input(layer, in_shapes)
    conv = (conv_plane if transposed else reach.c_plane)(layer, shape, out_shape, axes,
                                                         not transposed)
    band = not transposed and banded(layer, conv)
    fuse = band and window is not None and fusable_pool(layer, window)
    if window is not None:
        found.append(("pool_tile", Window(**vars(window), weights=False, banded=fuse)))
    found.append(("tile", Window(**vars(conv), wide=bool(layer.wide), bias=bool(layer.bias),
                                 transposed=transposed, split=not transposed and split(conv),
                                 banded=band, pooled=fuse)))
    return tuple(found)


def fusable_pool(layer: ConvFields, window: Plane) -> bool:
    """A fused input pool the depthwise kernel pools into its padded copy: 2x2 stride-2 max."""
    return layer.pool is not None and layer.pool.mode is PoolMode.max and \
        (window.k_h, window.k_w, window.stride_h, window.stride_w) == (2, 2, 2, 2)


def banded(layer: ConvFields, conv: Plane) -> bool:
    """Whether the optimized kernels run the tiled conv banded (eb_dw_conv_banded_opt: the
    depthwise kernel's padded channel copy is the L1 staging; memory.tiling's banded layout):
    a depthwise 3x3 stride-1 conv (one input channel too) the padded path takes — rows of at
    least 4 bytes (and short enough for a band of 2 rows in its untiled 1 KiB copy), at most 3
    of padding, at least 2 x 2 outputs, int8 out, act none or relu."""
    return conv.groups == conv.in_c and (conv.k_h, conv.k_w, conv.stride_h, conv.stride_w,
                                         conv.dil_h, conv.dil_w) == (3, 3, 1, 1, 1, 1) and \
        conv.in_w >= 4 and conv.pad_w <= 3 and min(conv.out_h, conv.out_w) >= 2 and \
        4 * (conv.in_w + conv.pad_w) + conv.pad_w <= dw_spec.DW_PAD_BYTES and \
        not layer.wide and layer.act in (Activation.none, Activation.relu)


# --- C -------------------------------------------------------------------------------------

def fused_pool(step: CStep[ConvFields]) -> tuple[CCode, str, Shape]:
    """(code, source, shape) of the layer's fused input pooling into its scratch tensor,
    whole or tiled; no code and the unchanged input otherwise."""
    layer, source, shape = step.layer, step.inputs[0], step.in_shapes[0]
    if layer.pool is None:
        return CCode(), source, shape
    assert step.scratch is not None
    window = pool_plane(layer.pool, shape, vertical=step.pool_tile is not None)
    decl = pool_params(step.symbol("Q"), window, layer.pool.mode, step.rounding)
    code = CCode((decl,)) + pool_call(step.symbol("Q"), step.symbol("TP"), step.pool_tile,
                                     step.double_buffer, source, step.scratch, step.optimized,
                                     layer.pool.mode.value)
    return code, step.scratch, pooled(shape, layer.pool, len(shape) - 1)


# The kernel wrappers eb_conv2d_tiled calls (eb_tiling.h): one per output width, defined
# once per project. Without the optimized kernels EB_CONV2D(_WIDE) name the reference ones.
_REFERENCE_MACROS = (0, """#define EB_CONV2D(p, in, w, b, out) eb_conv2d(p, in, w, b, out)
#define EB_CONV2D_WIDE(p, in, w, b, out) eb_conv2d_wide(p, in, w, b, out)

""")
_NARROW_WRAPPER = (1, """static void eb_k_conv(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                      const int32_t *b, void *out)
{
    EB_CONV2D(p, in, w, b, (int8_t *)out);
}

""")
_WIDE_WRAPPER = (2, """static void eb_k_conv_wide(const eb_conv_params *p, const int8_t *in, const int8_t *w,
                           const int32_t *b, void *out)
{
    EB_CONV2D_WIDE(p, in, w, b, (int32_t *)out);
}

""")


# A dense conv's optimized tiled pass (eb_conv2d_tiled_cols, the split L1 layout): a row tile's
# im2col columns built once in the scratch, every channel tile's weights run against them (the
# dot prepared once a row tile: eb_conv_cols_prepare / _run); with -DEB_REFERENCE_KERNELS the
# same driver and layout, the "columns" the tile's input and the reference kernel on them.
_COLS_PRELUDE = (3, """#ifdef EB_REFERENCE_KERNELS
static const eb_cols_kernel eb_k_cols = {eb_ref_cols_build, eb_ref_cols_dot, eb_scratch.values, NULL, NULL};
#else
static const eb_cols_kernel eb_k_cols = {eb_conv_cols_build, eb_conv_cols_dot, eb_scratch.values,
                                         eb_conv_cols_prepare, eb_conv_cols_run};
#endif
#define EB_CONV2D_TILED_COLS(p, t, k, wide, in, w, b, out) \\
    eb_conv2d_tiled_cols(p, t, k, &eb_k_cols, wide, in, w, b, out, eb_l1.bytes)

""")


# A pointwise layer's tiled pass: the same driver on the pointwise kernels' column blocks.
_PW_COLS_PRELUDE = (5, """#ifdef EB_REFERENCE_KERNELS
static const eb_cols_kernel eb_k_cols_pw = {eb_ref_cols_build, eb_ref_cols_dot, eb_scratch.values, NULL, NULL};
#else
static const eb_cols_kernel eb_k_cols_pw = {eb_pw_cols_build, eb_pw_cols_dot, eb_scratch.values, NULL, NULL};
#endif
#define EB_CONV2D_TILED_PW(p, t, k, wide, in, w, b, out) \\
    eb_conv2d_tiled_cols(p, t, k, &eb_k_cols_pw, wide, in, w, b, out, eb_l1.bytes)

""")


def cols_scratch(conv: Plane, rows: int) -> tuple[str, ...]:
    """The scratch of a split pass's row tile of `rows`: its columns (the optimized kernels)
    or its padded input (the reference ones); `cols_workspace` computes the same."""
    rows = min(rows, conv.out_h)
    return (f"EB_CONV_COLS_SCRATCH({rows * conv.out_w}, {conv.in_c}, {conv.k_h}, {conv.k_w})",
            f"EB_REF_COLS_SCRATCH({conv.in_c * _tile_in_rows(conv, rows) * conv.in_w})")


def _tile_in_rows(conv: Plane, rows: int) -> int:
    return min((rows - 1) * conv.stride_h + conv.dil_h * (conv.k_h - 1) + 1, conv.in_h)


def _round4(n: int) -> int:
    return (n + 3) & ~3  # EB_OPT_ROUND4


def cols_workspace(conv: Plane, rows: int) -> int:
    """int16 elements of `cols_scratch`: EB_CONV_COLS_SCRATCH, EB_REF_COLS_SCRATCH."""
    rows = min(rows, conv.out_h)
    return max(_round4(rows * conv.out_w) * _round4(conv.in_c * conv.k_h * conv.k_w),
               (conv.in_c * _tile_in_rows(conv, rows) * conv.in_w + 1) // 2)


def tiled_call(step: CStep[Conv], conv: Plane, source: str) -> CCode:
    """eb_conv2d_tiled on the layer's kernel wrapper, or for a split conv on an optimized
    target EB_CONV2D_TILED_COLS (its scratch: the tile's columns), for a pointwise one
    EB_CONV2D_TILED_PW (the pointwise kernels' columns, as many)."""
    layer, tile = step.layer, step.tile
    assert tile is not None
    preludes = (() if step.optimized else (_REFERENCE_MACROS,)) + (
        _WIDE_WRAPPER if layer.wide else _NARROW_WRAPPER,)
    kernel = "eb_k_conv_wide" if layer.wide else "eb_k_conv"
    cols = step.optimized and split(conv)
    fast = cols and pointwise(conv)
    name = "EB_CONV2D_TILED_PW" if fast else "EB_CONV2D_TILED_COLS" if cols else \
        "eb_conv2d_tiled"
    preludes += (_PW_COLS_PRELUDE,) if fast else (_COLS_PRELUDE,) if cols else ()
    return CCode((tile_decl(step.symbol("T_TILE"), tile, step.double_buffer),), (
        f"{name}(&{step.symbol('P')}, &{step.symbol('T_TILE')}, {kernel}, "
        f"{1 if layer.wide else 0}, {source}, {step.weights()}, {bias_symbol(step)}, "
        f"{step.output}{'' if cols else ', eb_l1.bytes'});",),
        preludes, paths=frozenset({"pointwise"} if fast else ()),
        scratch=cols_scratch(conv, tile.rows) if cols else ())


# The optimized pointwise kernels (eb_pw_opt.h) by the names the layer calls use, or with
# -DEB_REFERENCE_KERNELS the reference ones.
_POINTWISE_MACROS = (4, """/* Pointwise (1x1) convolutions: eb_conv2d_pw(_wide)_opt, a matrix product over the
 * activations as they lie (eb_pw_opt.h); -DEB_REFERENCE_KERNELS: the reference loops. */
#ifdef EB_REFERENCE_KERNELS
#define EB_CONV2D_PW(p, in, w, b, out) ((void)eb_scratch, eb_conv2d(p, in, w, b, out))
#define EB_CONV2D_PW_WIDE(p, in, w, b, out) ((void)eb_scratch, eb_conv2d_wide(p, in, w, b, out))
#else
#define EB_CONV2D_PW(p, in, w, b, out) eb_conv2d_pw_opt(p, in, w, b, out, eb_scratch.values)
#define EB_CONV2D_PW_WIDE(p, in, w, b, out) \\
    eb_conv2d_pw_wide_opt(p, in, w, b, out, eb_scratch.values)
#endif

""")


def untiled_call(step: CStep[Conv], conv: Plane, source: str) -> CCode:
    """eb_conv2d(_wide), or on Cortex-M4 the optimized EB_CONV2D(_WIDE), EB_CONV2D_PW(_WIDE)
    for a pointwise layer."""
    layer = step.layer
    out = f"(int32_t *){step.output}" if layer.wide else step.output
    fast = step.optimized and pointwise(conv) and not pointwise_column(
        conv, few_requantizes(step.quant, layer.wide, layer.act))
    kernel = ("EB_CONV2D_PW" if fast else "EB_CONV2D" if step.optimized else "eb_conv2d") + (
        ("_WIDE" if step.optimized else "_wide") if layer.wide else "")
    return CCode(calls=(f"{kernel}(&{step.symbol('P')}, {source}, {step.weights()}, "
                        f"{bias_symbol(step)}, {out});",),
                 preludes=(_POINTWISE_MACROS,) if fast else (),
                 paths=frozenset({"pointwise"} if fast else ()))


# A depthwise conv after a 2x2 stride-2 max pool in one call (fused_depthwise_pool); the
# reference build pools, then convolves.
_DW_POOL_PRELUDE = (4, """#ifdef EB_REFERENCE_KERNELS
#define EB_DW_POOL_CONV2D(q, p, in, pooled, w, b, out) \\
    (eb_pool2d(q, in, pooled), eb_conv2d(p, pooled, w, b, out))
#else
#define EB_DW_POOL_CONV2D(q, p, in, pooled, w, b, out) \\
    eb_dw_pool_conv_opt(q, p, in, pooled, w, b, out, eb_scratch.values)
#endif

""")


def fused_depthwise_pool(step: CStep[Conv], conv: Plane) -> bool:
    """An untiled int8 depthwise 3x3 stride-1 conv whose fused input pooling is a 2x2
    stride-2 max pool, on the optimized kernels: eb_dw_pool_conv_opt pools each channel
    straight into the depthwise path's padded copy of it (no pass over the pooled tensor)."""
    layer = step.layer
    if not step.optimized or layer.pool is None or layer.wide or step.tile is not None \
            or step.pool_tile is not None or layer.pool.mode is not PoolMode.max:
        return False
    window = pool_plane(layer.pool, step.in_shapes[0])
    return (window.k_h, window.k_w, window.stride_h, window.stride_w) == (2, 2, 2, 2) and \
        conv.groups == conv.in_c and (conv.k_h, conv.k_w, conv.stride_h, conv.stride_w,
                                      conv.dil_h, conv.dil_w) == (3, 3, 1, 1, 1, 1)


# A banded depthwise pass (memory.tiling's banded layout): the depthwise kernel's padded
# channel copy in L1; the reference build runs the reference loop on the tensors in place.
_BANDED_PRELUDE = (6, """#ifdef EB_REFERENCE_KERNELS
#define EB_DW_CONV2D_BANDED(p, t, in, w, b, out) ((void)(t), eb_conv2d(p, in, w, b, out))
#define EB_DW_POOL_CONV2D_BANDED(q, p, t, in, pooled, w, b, out) \\
    ((void)(t), eb_pool2d(q, in, pooled), eb_conv2d(p, pooled, w, b, out))
#else
#define EB_DW_CONV2D_BANDED(p, t, in, w, b, out) \\
    eb_dw_conv_banded_opt(p, (t)->rows, in, w, b, out, eb_l1.bytes)
#define EB_DW_POOL_CONV2D_BANDED(q, p, t, in, pooled, w, b, out) \\
    eb_dw_pool_conv_banded_opt(q, p, (t)->rows, in, pooled, w, b, out, eb_l1.bytes)
#endif

""")


def banded_call(step: CStep[Conv], source: str, unpooled: str | None) -> CCode:
    """EB_DW_CONV2D_BANDED: the plan's band (its tile's rows) of a banded depthwise pass;
    EB_DW_POOL_CONV2D_BANDED with its fused pool (Q) from `unpooled` (`source`: the pooled
    tensor, written only for a channel the padded path does not take)."""
    assert step.tile is not None
    tail = f"{step.weights()}, {bias_symbol(step)}, {step.output});"
    p, t = f"&{step.symbol('P')}", f"&{step.symbol('T_TILE')}"
    call = f"EB_DW_CONV2D_BANDED({p}, {t}, {source}, {tail}" if unpooled is None else \
        f"EB_DW_POOL_CONV2D_BANDED(&{step.symbol('Q')}, {p}, {t}, {unpooled}, {source}, {tail}"
    return CCode((tile_decl(step.symbol("T_TILE"), step.tile, step.double_buffer),), (call,),
                 (_BANDED_PRELUDE,))


def optimized_paths(step: CStep[Conv], conv: Plane, band: bool, packed: bool) -> frozenset[str]:
    """The optional kernel paths (ops.c OPTIONAL_PATHS) the step's calls run on the optimized
    kernels: the pointwise or split-tiled ones, or those of conv_path.kernel_paths, with the
    output form the layer requantizes to ("q_relu", "q_none", "q_abs", "q_wide"). A tiled pass
    runs eb_conv2d_opt on its tiles, whose shapes may take the next path too (the GEMM's with
    gemm_short); a banded one, the 3-tap kernels; the tile kernel's shift forms (shift_forms)."""
    if not step.optimized:
        return frozenset()
    layer, stride2 = step.layer, frozenset({"im2col_s2"} if gathers(conv) else ())
    form = frozenset({"q_wide" if layer.wide else f"q_{layer.act.value}"})
    few_ok = few_requantizes(step.quant, layer.wide, layer.act)  # the few-input kernel's
    if pointwise(conv) and not (step.tile is None and pointwise_column(conv, few_ok)):
        return form
    tile_gemm = frozenset({"gemm_2px"} if step.tile is not None and  # a tile's GEMM rows
                          two_pixel_block(conv, step.tile.rows) else ()) | gemm_short(conv)
    if step.tile is not None and not band and split(conv):  # eb_conv_cols_build's gather
        return form | stride2 | tile_gemm
    if as_linear(conv):
        return frozenset()
    paths = kernel_paths(conv, packed, lines=line_requantizes(
        conv, step.quant, layer.wide, layer.act, step.rounding), forms=few_ok)
    if step.tile is not None and not band:  # a tile's frame may differ from the layer's
        paths |= {"im2col"} | tile_gemm | ({"dw_tile", "dw_tile_one", "dw_table"}
                                           if "dw_column" not in paths and "depthwise" in paths
                                           else set())
    forms = shift_forms(paths, -step.quant.shift) if step.quant is not None else frozenset()
    return paths | forms | form | (stride2 if "im2col" in paths else frozenset())


def emit_conv(step: CStep[Conv], axes: Axes[Conv]) -> CCode:
    """conv1d / conv2d: eb_conv2d(_wide), the optimized EB_CONV2D(_WIDE) on Cortex-M4 (a
    pointwise layer: EB_CONV2D_PW(_WIDE)), or eb_conv2d_tiled when the plan tiles it (1-D
    layers then run as a column)."""
    layer = step.layer
    code, source, shape = fused_pool(step)
    conv = reach.c_plane(layer, shape, step.out_shape, axes, vertical=step.tile is not None)
    band = step.optimized and step.tile is not None and banded(layer, conv)
    fused = fused_depthwise_pool(step, conv) or band and layer.pool is not None and \
        fusable_pool(layer, pool_plane(layer.pool, step.in_shapes[0]))
    # packed weights: read packed by the optimized kernels (banded too), unpacked into L1
    # when tiled
    packed = step.optimized and (step.tile is None or band) and packed_bits(step) != 0
    if step.optimized:  # the tile kernel's patch, the im2col path's padded band: scratch
        code += CCode(scratch=tuple(claim for claim in (
            DW_TILE_SCRATCH if dw_tile(conv) else None, im2col_band.scratch(conv),
            column_rows.scratch(conv), copy_claim(conv, step.tile is not None)[0])
            if claim))
    code = (CCode(code.decls, scratch=code.scratch) if fused else code) + CCode(
        (conv_params(step.symbol("P"), conv, step),),
        paths=optimized_paths(step, conv, band, packed) | ({"packed"} if packed else set()))
    if band:
        return code + banded_call(step, source, step.inputs[0] if fused else None)
    if step.tile is not None:
        return code + tiled_call(step, conv, source)
    if step.optimized and banded(layer, conv):  # the padded path's copy in the scratch
        code += CCode(scratch=(dw_spec.padded_scratch(conv),))
    spec = dw_spec.spec_decl(step, conv)
    if spec is not None:  # the padded path's loop made for this layer
        head = f"EB_DW_POOL_CONV2D_SPEC(&{step.symbol('Q')}, &{step.symbol('P')}, " \
            f"&{step.symbol('K')}, {step.inputs[0]}, " if fused else \
            f"EB_DW_CONV2D_SPEC(&{step.symbol('P')}, &{step.symbol('K')}, "
        return code + spec + CCode(calls=(
            f"{head}{source}, {step.weights()}, {bias_symbol(step)}, {step.output});",))
    if fused:
        return code + CCode(calls=(
            f"EB_DW_POOL_CONV2D(&{step.symbol('Q')}, &{step.symbol('P')}, {step.inputs[0]}, "
            f"{source}, {step.weights()}, {bias_symbol(step)}, {step.output});",),
            preludes=(_DW_POOL_PRELUDE,))
    return code + untiled_call(step, conv, source)


# --- ONNX ----------------------------------------------------------------------------------

def onnx_weights(code: OnnxCode, step: OnnxStep[ComputeLayer]) -> tuple[OnnxCode, tuple[str, ...]]:
    """The weight (and bias) inputs of a float Conv/Gemm: the float tensors, or in the
    fake-quant form the DequantizeLinear of the integers (ops.onnxcode.fake_weights)."""
    import numpy as np

    parts: tuple[str, ...]
    if step.form is Form.qat:
        quant = step.requant()
        code = fake_weights(code, quant)
        parts = ("weight", "bias") if quant.bias is not None else ("weight",)
    else:
        parts = tuple(part for part in ("weight", "bias") if part in step.tensors)
        for part in parts:
            code = code.const(part, np.asarray(step.tensors[part], dtype=np.float32))
    return code, tuple(code.tensor(part) for part in parts)


def onnx_output(code: OnnxCode, step: OnnxStep[ComputeLayer]) -> OnnxCode:
    """After a compute op's products: the form's output rule (a `wide` layer outputs the
    accumulator itself). The integer form adds the int32 bias to the int32 accumulator
    (numerics: bias in accumulator units) before requantizing."""
    layer = step.layer
    if step.form is Form.int8:
        import numpy as np

        quant = step.requant()
        if quant.bias is not None:
            spatial = (1,) * (len(step.out_shape) - 1)
            code = code.then("Add", quant.bias.astype(np.int32).reshape((-1, *spatial)))
        return code if layer.wide else requantize(code, quant.shift, step.rounding,
                                                  layer.act.value)
    if layer.wide:
        return code
    if step.form is Form.qat:
        return fake_requantize(code, step.rounding, layer.act.value)
    return float_output(code, layer.act.value, step.clamp)


def onnx_conv(step: OnnxStep[Conv], axes: Axes[Conv]) -> OnnxCode:
    """conv1d / conv2d: the fused input pooling, then Conv (float, fake-quant) or
    ConvInteger on int8 (exact int32 accumulator), then the form's output rule."""
    import numpy as np

    layer = step.layer
    kernel, stride, pad, dilation = axes(layer)
    dims = len(kernel)
    code = pooling.onnx_pool(step.start(), layer.pool, dims, step.form, step.rounding,
                             step.in_shapes[0][0])
    window: dict[str, Attribute] = {
        "kernel_shape": tuple(kernel), "strides": tuple(stride), "pads": tuple(pad) * 2,
        "dilations": tuple(dilation), "group": layer.groups}
    if step.form is Form.int8:
        code = code.then("ConvInteger", step.requant().weight.astype(np.int8), **window)
    else:
        code, weights = onnx_weights(code, step)
        code = code.then("Conv", *weights, **window)
    return onnx_output(code, step).named(step.output)


def conv_scratch(layer: Conv, in_shapes: tuple[Shape, ...], axes: Axes[Conv]) -> str:
    """int16 scratch elements of the optimized convolution (eb_kernels_opt.h)."""
    kernel = reach.c_kernel(layer, in_shapes, axes)
    k_h, k_w = kernel if len(kernel) == 2 else (1, kernel[0])
    return f"EB_CONV_OPT_SCRATCH({in_shapes[0][0] // layer.groups}, {k_h}, {k_w})"


def conv_workspace(layer: Conv, in_shapes: tuple[Shape, ...], out_shape: Shape,
                   rows: int | None, axes: Axes[Conv]) -> int:
    """int16 elements the optimized kernels need: EB_CONV_OPT_SCRATCH (`conv_scratch`), in a
    tiled split pass of `rows` its columns (`cols_scratch`), untiled, a depthwise layer's padded
    copy (`dw_spec.padded_scratch`), the other paths' (the column copy's in emit_conv's frame)."""
    kernel = reach.c_kernel(layer, in_shapes, axes)
    need = 4 * _round4(in_shapes[0][0] // layer.groups * math.prod(kernel))
    conv = conv_windows(layer, in_shapes, out_shape, axes)[-1][1]
    if rows is not None and conv.split:
        need = max(need, cols_workspace(conv, rows))
    if rows is None and conv.banded:
        need = max(need, (dw_spec.padded_bytes(conv) + 1) // 2)
    return max(need, DW_TILE_ELEMENTS if dw_tile(conv) else 0,
               im2col_band.elements(conv, row=rows is None and len(in_shapes[0]) == 2),
               column_rows.elements(conv), copy_claim(reach.c_plane(layer, reach.pooled_input(
                   layer, in_shapes), out_shape, axes, rows is not None), rows is not None)[1])


# The facets conv1d and conv2d share, each its own function (its own keyword of `Operator(...)`):
# a stage's cache key leaves out the facets it never reads, their code too (build.definitions).

def c_facet(axes: Axes[Conv]) -> C:
    """The C calls, the optimized kernel's scratch claim and the plan's workspace count."""
    return C(lambda step: emit_conv(step, axes),
             lambda layer, shapes: conv_scratch(layer, tuple(shapes), axes),
             lambda layer, shapes, out, rows: conv_workspace(layer, tuple(shapes), out, rows,
                                                             axes),
             lambda layer, shapes, weight: reach.stored_weight(layer, shapes, weight, axes))


def onnx_facet(axes: Axes[Conv]) -> Onnx:
    return Onnx(lambda step: onnx_conv(step, axes))


def weights_facet(axes: Axes[Conv]) -> Weights:
    return Weights(lambda layer, in_shape: weight_shape(layer, in_shape, axes))


def windows_facet(axes: Axes[Conv]) -> Callable[..., tuple[tuple[str, Window], ...]]:
    return lambda layer, shapes, out: conv_windows(layer, tuple(shapes), out, axes)
