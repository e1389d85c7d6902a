"""The edgebuild record of a network layer's main operation when it has weights (conv1d,
conv2d, conv_transpose2d, linear): which keys it carries and which combinations the
description may not ask for. Keys appear in a fixed order: the manifest text lists them
as built.
"""

from __future__ import annotations

import math
from typing import Any

from edgebuild.targets.max7800x.network.hardware import LayerDocument
from edgebuild.targets.max7800x.network.spec import Reporter, Spec


def conv_keys(report: Reporter, spec: Spec, layer: LayerDocument, pool: dict[str, Any] | None,
              no_bias: bool, in_shape: tuple[int, ...]) -> bool:
    """Complete a conv1d/conv2d record (name, op, inputs, out, kernel given); False after
    reporting what it cannot express."""
    if spec.stride != 1:
        if pool is not None:
            report.layer_error(spec, "stride", "`stride` other than 1 cannot be "
                               "combined with pooling")
            return False
        layer["stride"] = spec.stride
    optional = (("pad", spec.pad, bool(spec.pad)), ("dilation", spec.dilation, spec.dilation != 1),
                ("groups", spec.groups, spec.groups != 1), ("bias", False, no_bias),
                ("act", spec.act, spec.act != "none"), ("pool", pool, pool is not None),
                ("wide", True, spec.wide))
    layer.update({key: value for key, value, given in optional if given})
    if spec.op == "conv1d" and len(in_shape) != 2:
        report.layer_error(spec, "op", "Conv1d needs a 1-D input (channels x length); "
                           "this input is 2-D (add `in_dim: L` with L = height x "
                           "width to read it as 1-D)")
        return False
    return True


def conv_transpose_keys(report: Reporter, spec: Spec, layer: LayerDocument,
                        pool: dict[str, Any] | None, no_bias: bool) -> bool:
    """ConvTranspose2d: stride 2 and output padding 1 are the hardware's (the op's
    defaults), `pad` 1 is the default of both; dilation and groups are not documented
    for it, so they stay edgebuild's 1 unless given (limits.py reports them)."""
    if spec.stride not in (1, 2):
        report.layer_error(spec, "stride", (
            f"`stride: {spec.stride}` on a ConvTranspose2d layer: the hardware always "
            "upsamples by 2 (omit the key, or write 1)"))
        return False
    for key, value, default in (("pad", spec.pad, 1), ("dilation", spec.dilation, 1),
                                ("groups", spec.groups, 1), ("act", spec.act, "none")):
        if value != default:
            layer[key] = value
    optional = (("bias", False, no_bias), ("pool", pool, pool is not None),
                ("wide", True, spec.wide))
    layer.update({key: value for key, value, given in optional if given})
    return True


def linear_reads(report: Reporter, spec: Spec, shape: tuple[int, ...]) -> bool:
    """A linear layer reads flat data: anything else needs `flatten: true`."""
    if len(shape) > 1 and not spec.flatten and math.prod(shape[1:]) != 1:
        report.layer_error(spec, "flatten", (
            f"a linear layer on a {list(shape)} input needs `flatten: true`"))
        return False
    return True


def linear_layer(spec: Spec, name: str, linked: dict[str, Any], shape: tuple[int, ...],
                 out: int, no_bias: bool) -> LayerDocument:
    """The linear record (it flattens its own input when that is not flat)."""
    layer: LayerDocument = {"name": name, "op": "linear", **linked, "out": out}
    optional = (("flatten", True, len(shape) > 1), ("bias", False, no_bias),
                ("act", spec.act, spec.act != "none"), ("wide", True, spec.wide))
    layer.update({key: value for key, value, given in optional if given})
    return layer
