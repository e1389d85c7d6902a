"""Fields and arithmetic common to conv1d and conv2d (each op keeps its own module)."""

from __future__ import annotations

from pydantic import Field

from edgebuild.ops.operator import Activation, Count, FusedPool, LayerBase, ShapeError


class ConvFields(LayerBase):
    out: Count = Field(description="output channels")
    groups: Count = Field(default=1, description="1 = dense, in_channels = depthwise")
    bias: bool = True
    act: Activation = Activation.none
    pool: FusedPool | None = Field(default=None, description="pooling applied to the input first")
    wide: bool = Field(default=False, description="int32 output; only on the last layer")


def check_groups(layer: ConvFields, in_channels: int) -> None:
    if in_channels % layer.groups or layer.out % layer.groups:
        raise ShapeError(f"groups={layer.groups} must divide both the input channels "
                         f"({in_channels}) and out ({layer.out})")


def conv_params(layer: ConvFields, in_channels: int, kernel_elems: int) -> int:
    weights = layer.out * (in_channels // layer.groups) * kernel_elems
    return weights + (layer.out if layer.bias else 0)


def conv_macs(layer: ConvFields, in_channels: int, kernel_elems: int, out_positions: int) -> int:
    """Each output value (out channels x positions) sums (in/groups) x kernel products."""
    return layer.out * out_positions * (in_channels // layer.groups) * kernel_elems


def validate_wide(layer) -> None:
    if layer.wide and layer.act.value != "none":
        raise ShapeError("a `wide` (int32) output has no activation; set `act: none`")


def torch_compute(layer, module, x, mode, apply):
    """Forward of conv1d/conv2d/linear: float, or fake-quant following numerics exactly.

    `apply(x, weight, bias)` is the op's functional (F.conv1d, F.conv2d, F.linear)."""
    from edgebuild.core import numerics

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


def reference_compute(layer, quant, acc, rounding: str):
    """Bias, shift, rounding, activation, saturation on an int64 accumulator."""
    from edgebuild.core import numerics

    if quant.bias is not None:
        acc = acc + quant.bias.reshape((1, -1) + (1,) * (acc.ndim - 2))
    if layer.wide:
        return acc
    shift = numerics.output_shift(quant.scale_exp, quant.bits)
    return numerics.np_requantize(acc, shift, rounding, layer.act.value)


def reference_conv(x, weight, groups: int, kernel, stride, pad, dilation):
    """Integer convolution (N, C, *S) x (O, C/groups, *K) -> (N, O, *S') in int64."""
    import numpy as np

    from edgebuild.ops.pooling import windows

    view = windows(x.astype(np.int64), kernel, stride, dilation, pad)
    n, c = view.shape[:2]
    spatial = view.shape[2:2 + len(kernel)]
    view = view.reshape(n, groups, c // groups, *view.shape[2:])
    w = weight.astype(np.int64).reshape(groups, weight.shape[0] // groups, *weight.shape[1:])
    letters = "hw"[:len(kernel)] if len(kernel) == 2 else "l"
    taps = "ij"[:len(kernel)]
    out = np.einsum(f"ngc{letters}{taps},goc{taps}->ngo{letters}", view, w)
    return out.reshape(n, weight.shape[0], *spatial)
