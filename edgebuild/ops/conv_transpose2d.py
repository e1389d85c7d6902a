"""conv_transpose2d: 2-D transposed convolution ("fractionally strided", upsampling) over
(channels, height, width), optional fused input pooling.

The defaults (3x3 kernel, stride 2, pad 1, output_pad 1) double height and width — the one
transposed convolution the MAX7800x accelerators run. Output size per axis, as PyTorch:
`(n - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_pad + 1`.

Weights keep PyTorch's ConvTranspose2d layout `(in, out / groups, kh, kw)` (so does a
MAX7800x checkpoint); `to_out_major` gives the `(out, in / groups, kh, kw)` view that
per-output-channel code (batchnorm folding, per-channel clipping) expects.

Integer rule: every input value x[c, i, j] adds w[c, o, ky, kx] * x to the full-size output
at (i * stride + ky * dilation, j * stride + kx * dilation); the output is that sum cropped by
`pad` on each side (and extended by `output_pad` rows/columns at the bottom/right, which only
taps landing there reach), then bias, shift, rounding, activation and saturation exactly as
for conv2d (numerics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from edgebuild.core.geometry import Shape, ShapeError, expect_rank, pair, plane, pooled
from edgebuild.ops import conv
from edgebuild.ops.c import CCode, CStep, bias_symbol, conv_params, tile_decl
from edgebuild.ops.onnxcode import Form, OnnxCode, OnnxStep
from edgebuild.ops.operator import (
    C,
    Example,
    G,
    Mode,
    Onnx,
    Operator,
    PadPair,
    Pair,
    Role,
    Torch,
    Weights,
)
from edgebuild.ops.pool import onnx_pool, reference_pool, torch_pool

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray

    from edgebuild.core.numerics import QuantParams
    from edgebuild.ops.operator import Ints


class ConvTranspose2d(conv.ConvFields):
    op: Literal["conv_transpose2d"]
    kernel: Pair = 3
    stride: Pair = Field(default=2, description="the upsampling factor")
    pad: PadPair = Field(default=1, description="cropped from each side of the full output")
    output_pad: PadPair = Field(
        default=1, description="rows/columns added at the bottom/right (less than stride or "
                               "dilation), as PyTorch's output_padding")
    dilation: Pair = 1


def axes(layer: ConvTranspose2d) -> tuple[tuple[int, ...], ...]:
    """(kernel, stride, pad, dilation), each (h, w), of the transposed convolution's own
    definition (stride upsamples, pad crops)."""
    return tuple(pair(v) for v in (layer.kernel, layer.stride, layer.pad, layer.dilation))


def _axes(layer: ConvTranspose2d) -> tuple[tuple[int, int, int, int, int], ...]:
    """Per axis (h, w): (kernel, stride, pad, output_pad, dilation)."""
    return tuple(zip(pair(layer.kernel), pair(layer.stride), pair(layer.pad),
                     pair(layer.output_pad), pair(layer.dilation), strict=True))


def axis_out(size: int, kernel: int, stride: int, pad: int, output_pad: int,
             dilation: int) -> int:
    """Output length along one axis (PyTorch's rule), or a ShapeError."""
    if output_pad >= max(stride, dilation):
        raise ShapeError(f"output_pad {output_pad} must be smaller than the stride ({stride}) "
                         f"or the dilation ({dilation})")
    out = (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_pad + 1
    if out < 1:
        raise ShapeError(f"pad {pad} crops the whole {out + 2 * pad}-long transposed output "
                         f"of an input of length {size}")
    return out


def axis_taps(size: int, out: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """(output position, kernel tap) pairs along one axis that read an input value."""
    count = 0
    for o in range(out):
        for k in range(kernel):
            t = o + pad - k * dilation
            count += t >= 0 and t % stride == 0 and t // stride < size
    return count


def out_shape(layer: ConvTranspose2d, shapes: Sequence[Shape]) -> Shape:
    expect_rank(shapes[0], 3, "conv_transpose2d")
    channels, height, width = pooled(shapes[0], layer.pool, 2)
    conv.check_groups(layer, channels)
    conv.validate_wide(layer)
    return (layer.out, *(axis_out(n, *a) for n, a in zip((height, width), _axes(layer),
                                                          strict=True)))


def param_count(layer: ConvTranspose2d, shapes: Sequence[Shape]) -> int:
    kh, kw = pair(layer.kernel)
    return conv.conv_params_count(layer, shapes[0][0], kh * kw)


def macs(layer: ConvTranspose2d, shapes: Sequence[Shape], out: Shape) -> int:
    """Products that reach an output (taps cropped away by `pad` are not counted): per
    output channel, (in / groups) x the tap pairs of both axes."""
    channels, height, width = pooled(shapes[0], layer.pool, 2)
    taps = [axis_taps(n, o, k, s, p, d) for n, o, (k, s, p, _, d) in
            zip((height, width), out[1:], _axes(layer), strict=True)]
    return layer.out * (channels // layer.groups) * taps[0] * taps[1]


def torch_module(layer: ConvTranspose2d, shapes: Sequence[Shape]) -> torch.nn.ConvTranspose2d:
    import torch.nn as nn

    return nn.ConvTranspose2d(shapes[0][0], layer.out, pair(layer.kernel), groups=layer.groups,
                              bias=layer.bias)


def forward(layer: ConvTranspose2d, module: torch.nn.ConvTranspose2d,
            inputs: Sequence[torch.Tensor], mode: Mode) -> torch.Tensor:
    import torch.nn.functional as F

    x = torch_pool(inputs[0], layer.pool, 2, mode)
    return conv.torch_compute(layer, module, x, mode, lambda x, w, b: F.conv_transpose2d(
        x, w, b, pair(layer.stride), pair(layer.pad), pair(layer.output_pad), layer.groups,
        pair(layer.dilation)))


def reference_conv_transpose(x: NDArray[np.integer[Any]], weight: NDArray[np.integer[Any]],
                             groups: int, stride: tuple[int, int], pad: tuple[int, int],
                             output_pad: tuple[int, int], dilation: tuple[int, int]) -> Ints:
    """Integer transposed convolution (N, C, H, W) x (C, O/groups, KH, KW) -> (N, O, H', W')
    in int64: scatter every kernel tap, then crop (see the module docstring)."""
    import numpy as np

    n, c, h, w = x.shape
    kh, kw = weight.shape[2:]
    per_group = weight.shape[1]
    full = [(size - 1) * s + d * (k - 1) + 1 + op for size, k, s, d, op in
            zip((h, w), (kh, kw), stride, dilation, output_pad, strict=True)]
    acc = np.zeros((n, groups, per_group, *full), dtype=np.int64)
    xg = x.astype(np.int64).reshape(n, groups, c // groups, h, w)
    wg = weight.astype(np.int64).reshape(groups, c // groups, per_group, kh, kw)
    for i in range(kh):
        for j in range(kw):
            top, left = i * dilation[0], j * dilation[1]
            rows = slice(top, top + (h - 1) * stride[0] + 1, stride[0])
            cols = slice(left, left + (w - 1) * stride[1] + 1, stride[1])
            acc[:, :, :, rows, cols] += np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
    out_h, out_w = (f - 2 * p for f, p in zip(full, pad, strict=True))
    cropped = acc[..., pad[0]:pad[0] + out_h, pad[1]:pad[1] + out_w]
    return cropped.reshape(n, groups * per_group, out_h, out_w)


def reference(layer: ConvTranspose2d, quant: QuantParams, inputs: Sequence[Ints],
              rounding: str) -> Ints:
    x = reference_pool(inputs[0], layer.pool, 2, rounding)
    acc = reference_conv_transpose(x, quant.weight, layer.groups, pair(layer.stride),
                                   pair(layer.pad), pair(layer.output_pad), pair(layer.dilation))
    return conv.reference_compute(layer, quant, acc, rounding)


def weight_shape(layer: ConvTranspose2d, in_shape: Shape) -> Shape:
    """PyTorch's ConvTranspose2d layout: (in, out / groups, kh, kw)."""
    return (in_shape[0], layer.out // layer.groups, *pair(layer.kernel))


def to_out_major(weight: NDArray[G], layer: ConvTranspose2d) -> NDArray[G]:
    """(in, out/groups, kh, kw) -> (out, in/groups, kh, kw): output channels first."""
    groups = layer.groups
    c, per_group = weight.shape[:2]
    grouped = weight.reshape(groups, c // groups, per_group, *weight.shape[2:])
    return grouped.swapaxes(1, 2).reshape(groups * per_group, c // groups, *weight.shape[2:])


def from_out_major(weight: NDArray[G], layer: ConvTranspose2d) -> NDArray[G]:
    """The inverse of `to_out_major`."""
    groups = layer.groups
    out, per_group_in = weight.shape[:2]
    grouped = weight.reshape(groups, out // groups, per_group_in, *weight.shape[2:])
    return grouped.swapaxes(1, 2).reshape(groups * per_group_in, out // groups,
                                          *weight.shape[2:])


def emit(step: CStep[ConvTranspose2d]) -> CCode:
    """The reference eb_conv_transpose2d(_wide) on every target (no optimized variant), whole
    or through eb_conv_transpose2d_tiled with a per-layer kernel wrapper. Fused pooling runs
    first, as for conv2d."""
    layer = step.layer
    code, source, shape = conv.fused_pool(step)
    params = step.symbol("P")
    kernel_axes, stride, pad, dilation = axes(layer)
    code += CCode((conv_params(params, plane(shape, step.out_shape, kernel_axes, stride, pad,
                                             dilation, layer.groups), step),))
    weights, bias = step.weights(), bias_symbol(step)
    kernel, ctype = ("eb_conv_transpose2d_wide", "int32_t") if layer.wide else \
        ("eb_conv_transpose2d", "int8_t")
    if step.tile is not None:
        wrapper = f"eb_kt_{layer.name}"
        return code + CCode((
            f"static void {wrapper}(const eb_conv_params *p, const int8_t *in, "
            f"const int8_t *w, const int32_t *b, void *out) {{ {kernel}(p, in, w, b, "
            f"({ctype} *)out); }}",
            tile_decl(step.symbol("T_TILE"), step.tile, step.double_buffer)), (
            f"eb_conv_transpose2d_tiled(&{params}, &{step.symbol('T_TILE')}, {wrapper}, "
            f"{1 if layer.wide else 0}, {source}, {weights}, {bias}, {step.output}, "
            "eb_l1.bytes);",))
    out = f"(int32_t *){step.output}" if layer.wide else step.output
    return code + CCode(calls=(f"{kernel}(&{params}, {source}, {weights}, {bias}, {out});",))


def onnx_emit(step: OnnxStep[ConvTranspose2d]) -> OnnxCode:
    """The fused input pooling, then ConvTranspose (float, fake-quant) or, on int8, the
    same sum as an exact ConvInteger (onnx_integer), then the form's output rule."""
    layer = step.layer
    code = onnx_pool(step.start(), layer.pool, 2, step.form, step.rounding,
                     step.in_shapes[0][0])
    if step.form is Form.int8:
        code = onnx_integer(code, layer, step.requant().weight,
                            pooled(step.in_shapes[0], layer.pool, 2))
    else:
        code, weights = conv.onnx_weights(code, step)
        kernel, stride, pad, dilation = axes(layer)
        code = code.then("ConvTranspose", *weights, kernel_shape=kernel, strides=stride,
                         pads=pad * 2, output_padding=pair(layer.output_pad),
                         dilations=dilation, group=layer.groups)
    return conv.onnx_output(code, step).named(step.output)


def onnx_integer(code: OnnxCode, layer: ConvTranspose2d, weight: NDArray[np.integer[Any]],
                 shape: Shape) -> OnnxCode:
    """The transposed convolution as a convolution, integer-exact (ONNX has no integer
    ConvTranspose): put stride - 1 zeros between input values, pad each side with
    dilation x (kernel - 1) (and `output_pad` more at the end), convolve with the kernel
    flipped and output channels first (ConvInteger, int32), then crop `pad` from each side
    (the module docstring's full output, cropped)."""
    import numpy as np

    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = axes(layer)
    (oh, ow), (h, w) = pair(layer.output_pad), shape[1:]
    if (sh, sw) != (1, 1):
        code = code.then("Unsqueeze", np.array([3, 5], np.int64))
        code = code.then("Pad", np.array([0] * 9 + [sh - 1, 0, sw - 1], np.int64))
        code = code.then("Reshape", np.array([0, shape[0], h * sh, w * sw], np.int64))
        code = code.then("Slice", np.array([0, 0], np.int64),
                         np.array([(h - 1) * sh + 1, (w - 1) * sw + 1], np.int64),
                         np.array([2, 3], np.int64))
    kernel = to_out_major(weight.astype(np.int8), layer)[:, :, ::-1, ::-1]
    code = code.then("ConvInteger", np.ascontiguousarray(kernel),
                     pads=(dh * (kh - 1), dw * (kw - 1), dh * (kh - 1) + oh, dw * (kw - 1) + ow),
                     dilations=(dh, dw), group=layer.groups)
    if (ph, pw) == (0, 0):
        return code
    full = ((h - 1) * sh + dh * (kh - 1) + 1 + oh, (w - 1) * sw + dw * (kw - 1) + 1 + ow)
    return code.then("Slice", np.array([ph, pw], np.int64),
                     np.array([full[0] - ph, full[1] - pw], np.int64), np.array([2, 3], np.int64))


# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((2, 4, 4), (
    {"name": "up", "op": "conv_transpose2d", "out": 3, "kernel": 3, "stride": 2, "pad": 1,
         "output_pad": 1},
))


OPERATOR = Operator(
    "conv_transpose2d", ConvTranspose2d, "one", Role.compute, out_shape, param_count, macs,
    example=EXAMPLE,
    torch=Torch(forward, torch_module), reference=reference, c=C(emit), onnx=Onnx(onnx_emit),
    weights=Weights(weight_shape, to_out_major, from_out_major),
    windows=lambda layer, shapes, out: conv.conv_windows(layer, tuple(shapes), out, axes,
                                                         transposed=True))
