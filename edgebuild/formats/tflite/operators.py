"""TFLite's int8 number format as a plugin (formats.numbers): per op, its integer reference
(tflite.reference) and its C (templates/kernels/eb_tfl.h), in one table.

The C emitters declare each layer's parameters as a static const struct and call the
portable kernel, or on a Cortex-M4 the dual-MAC one (`EB_TFL_*` macros of eb_tfl.h pick
it, so a project's host build runs the same algorithm the M4 does). Multipliers and shifts
are per output channel, in weights.c beside the weights (codegen.project). TFLite's
format has no L1-tiled kernels: its layers run whole between arena tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import pair
from edgebuild.formats.plugin import FormatOp
from edgebuild.formats.tflite import paths as kernel_paths
from edgebuild.formats.tflite import reference
from edgebuild.formats.tflite.quant import TflQuant
from edgebuild.ops import pool as pooling
from edgebuild.ops.c import CCode, CStep, initializer
from edgebuild.ops.extension import Extensions
from edgebuild.ops.operator import C

if TYPE_CHECKING:
    from edgebuild.core.geometry import Shape
    from edgebuild.ops.conv2d import Conv2d
    from edgebuild.ops.linear import Linear
    from edgebuild.ops.pool import Pool2d

WHERE = "TFLite's number format"


def _quant(step: CStep[Any]) -> TflQuant:
    assert isinstance(step.numbers, TflQuant)
    return step.numbers


def _clamp(q: TflQuant) -> list[tuple[str, object]]:
    return [("out_zp", q.out_zp), ("act_min", q.act_min), ("act_max", q.act_max)]


def conv_fields(layer: Conv2d, in_shape: Shape, out_shape: Shape, q: TflQuant
                ) -> list[tuple[str, object]]:
    from edgebuild.ops import conv2d

    kernel, stride, pad, dilation = conv2d.axes(layer)
    return [("in_c", in_shape[0]), ("in_h", in_shape[1]), ("in_w", in_shape[2]),
            ("out_c", out_shape[0]), ("out_h", out_shape[1]), ("out_w", out_shape[2]),
            ("k_h", kernel[0]), ("k_w", kernel[1]), ("stride_h", stride[0]),
            ("stride_w", stride[1]), ("pad_top", pad[0]), ("pad_left", pad[1]),
            ("dil_h", dilation[0]), ("dil_w", dilation[1]), ("groups", layer.groups),
            ("in_zp", q.in_zp[0]), *_clamp(q)]


def _arrays(step: CStep[Any]) -> str:
    q = _quant(step)
    bias = step.weights("b") if q.bias is not None else "NULL"
    return f"{step.weights('w')}, {bias}, {step.weights('m')}, {step.weights('s')}"


def conv_emit(step: CStep[Conv2d]) -> CCode:
    q = _quant(step)
    symbol = step.symbol("P")
    fields = conv_fields(step.layer, step.in_shapes[0], step.out_shape, q)
    decl = initializer("eb_tfl_conv_params", symbol, fields)
    ws = workspace_arg(step, conv_scratch(step.layer, step.in_shapes))
    return CCode((decl,), (f"EB_TFL_CONV2D(&{symbol}, {step.inputs[0]}, {_arrays(step)}, "
                           f"{step.output}, {ws});",), preludes=(prelude(step),),
                 paths=paths(step, lambda: kernel_paths.conv_paths(dict(fields), q)))


def paths(step: CStep[Any], taken: Callable[[], frozenset[str]] | None = None
          ) -> frozenset[str]:
    """The kernel files a compute step needs (ops.c.PATH_FILES) and, with the optimized
    kernels, the optional paths of eb_tfl_opt.c it runs (`taken`: tflite.paths)."""
    if not step.optimized:
        return frozenset({"tflite"})
    return frozenset({"tflite", "tflite_opt"}) | (taken() if taken is not None else frozenset())


def prelude(step: CStep[Any]) -> tuple[int, str]:
    """The kernel macros of the project: on a Cortex-M4 the dual-MAC kernels (the reference
    loops with -DEB_REFERENCE_KERNELS), elsewhere the reference loops."""
    reference = ("#define EB_TFL_CONV2D(p, in, w, b, m, s, out, ws) "
                 "eb_tfl_conv2d(p, in, w, b, m, s, out, NULL)\n"
                 "#define EB_TFL_LINEAR(p, in, w, b, m, s, out, ws) "
                 "eb_tfl_linear(p, in, w, b, m, s, out, NULL)\n"
                 "#define EB_TFL_POOL2D(p, in, out) eb_tfl_pool2d(p, in, out)\n"
                 "#define EB_TFL_ADD(p, a, b, out, ws) eb_tfl_add(p, a, b, out)\n")
    if not step.optimized:
        return (10, reference + "\n")
    return (10, "#ifdef EB_REFERENCE_KERNELS\n" + reference + "#else\n"
                "#define EB_TFL_CONV2D(p, in, w, b, m, s, out, ws) "
                "eb_tfl_conv2d_opt(p, in, w, b, m, s, out, ws)\n"
                "#define EB_TFL_LINEAR(p, in, w, b, m, s, out, ws) "
                "eb_tfl_linear_opt(p, in, w, b, m, s, out, ws)\n"
                "#define EB_TFL_POOL2D(p, in, out) eb_tfl_pool2d_opt(p, in, out)\n"
                "#define EB_TFL_ADD(p, a, b, out, ws) eb_tfl_add_opt(p, a, b, out, ws)\n"
                "#endif\n\n")


def workspace_arg(step: CStep[Any], claim: str | None) -> str:
    """The project's workspace where this layer's optimized kernel claims one (its claim is
    then among the project's: codegen.project declares eb_scratch), else NULL."""
    return "eb_scratch.values" if step.optimized and claim else "NULL"


def conv_scratch(layer: Conv2d, shapes: Any) -> str | None:
    """The optimized kernel's own claim: int16 elements (tflite.kernels), a constant."""
    from edgebuild.ops import conv2d

    out = conv2d.out_shape(layer, shapes)
    count = conv_workspace(layer, shapes, out, None)
    return str(count) if count else None


def conv_workspace(layer: Conv2d, shapes: Any, out: Shape, rows: int | None) -> int:
    from edgebuild.formats.tflite import kernels
    from edgebuild.ops import conv2d

    kernel, stride, _, dilation = conv2d.axes(layer)
    c, h, w = shapes[0]
    return kernels.conv_scratch(c, h, w, out[0], out[1], out[2], kernel[0], kernel[1],
                                stride[0], stride[1], dilation[0], dilation[1], layer.groups)


def linear_emit(step: CStep[Linear]) -> CCode:
    q = _quant(step)
    symbol = step.symbol("P")
    fields: list[tuple[str, object]] = [("in_f", math.prod(step.in_shapes[0])),
                                        ("out_f", step.layer.out), ("in_zp", q.in_zp[0]),
                                        *_clamp(q)]
    decl = initializer("eb_tfl_fc_params", symbol, fields)
    ws = workspace_arg(step, linear_scratch(step.layer, step.in_shapes))
    return CCode((decl,), (f"EB_TFL_LINEAR(&{symbol}, {step.inputs[0]}, {_arrays(step)}, "
                           f"{step.output}, {ws});",), preludes=(prelude(step),),
                 paths=paths(step, lambda: kernel_paths.linear_paths(dict(fields))))


def linear_scratch(layer: Linear, shapes: Any) -> str | None:
    from edgebuild.formats.tflite import kernels

    count = kernels.linear_scratch(math.prod(shapes[0]))
    return str(count) if count else None


def linear_workspace(layer: Linear, shapes: Any, out: Shape, rows: int | None) -> int:
    from edgebuild.formats.tflite import kernels

    return kernels.linear_scratch(math.prod(shapes[0]))


def pool_emit(step: CStep[Pool2d]) -> CCode:
    q = _quant(step)
    layer = step.layer
    size = pair(layer.size)
    stride = pair(layer.stride if layer.stride is not None else layer.size)
    c, h, w = step.in_shapes[0]
    fields: list[tuple[str, object]] = [
        ("c", c), ("in_h", h), ("in_w", w), ("out_h", step.out_shape[1]),
        ("out_w", step.out_shape[2]), ("k_h", size[0]), ("k_w", size[1]),
        ("stride_h", stride[0]), ("stride_w", stride[1]),
        ("mode", 0 if layer.mode.value == "max" else 1),
        ("act_min", q.act_min), ("act_max", q.act_max),
        ("pad_top", pooling.pads(layer)[0][0]), ("pad_left", pooling.pads(layer)[0][1])]
    symbol = step.symbol("P")
    return CCode((initializer("eb_tfl_pool_params", symbol, fields),),
                 (f"EB_TFL_POOL2D(&{symbol}, {step.inputs[0]}, {step.output});",),
                 preludes=(prelude(step),),
                 paths=paths(step, lambda: kernel_paths.pool_paths(dict(fields))))


def add_emit(step: CStep[Any]) -> CCode:
    q = _quant(step)
    assert q.multiplier is not None and q.shift is not None
    fields: list[tuple[str, object]] = [
        ("n", math.prod(step.out_shape)), ("in1_zp", q.in_zp[0]), ("in2_zp", q.in_zp[1]),
        *_clamp(q), ("left_shift", q.left_shift),
        ("mult1", int(q.multiplier[0])), ("shift1", int(q.shift[0])),
        ("mult2", int(q.multiplier[1])), ("shift2", int(q.shift[1])),
        ("mult_out", int(q.multiplier[2])), ("shift_out", int(q.shift[2]))]
    symbol = step.symbol("P")
    ws = workspace_arg(step, add_scratch(step.layer, step.in_shapes))
    return CCode((initializer("eb_tfl_add_params", symbol, fields),),
                 (f"EB_TFL_ADD(&{symbol}, {step.inputs[0]}, {step.inputs[1]}, {step.output}, "
                  f"{ws});",), preludes=(prelude(step),), paths=paths(step))


def add_scratch(layer: Any, shapes: Any) -> str | None:
    """The optimized add's claim: its tables (tflite.kernels.add_scratch), a constant."""
    from edgebuild.formats.tflite import kernels

    count = kernels.add_scratch(math.prod(shapes[0]))
    return str(count) if count else None


def add_workspace(layer: Any, shapes: Any, out: Shape, rows: int | None) -> int:
    from edgebuild.formats.tflite import kernels

    return kernels.add_scratch(math.prod(shapes[0]))


def softmax_emit(step: CStep[Any]) -> CCode:
    q = _quant(step)
    assert q.multiplier is not None
    shape = step.in_shapes[0]
    fields: list[tuple[str, object]] = [
        ("channels", shape[0]), ("positions", math.prod(shape[1:])),
        ("multiplier", int(q.multiplier[0])), ("left_shift", q.left_shift),
        ("diff_min", q.diff_min)]
    symbol = step.symbol("P")
    return CCode((initializer("eb_tfl_softmax_params", symbol, fields),),
                 (f"eb_tfl_softmax(&{symbol}, {step.inputs[0]}, {step.output});",),
                 paths=frozenset({"tflite"}))


def records(arrays: dict[str, Any], layers: Sequence[str]) -> dict[str, TflQuant]:
    """formats.numbers.records: each layer's TflQuant (the layers with zero points: not views)."""
    from edgebuild.formats.tflite import quant

    return {name: quant.layer_quant(arrays, name) for name in layers
            if f"{name}.zero_points" in arrays}


def _ref(function: Any) -> Any:
    """A reference of tflite.reference (layer, record, inputs) as formats.numbers calls it."""
    return lambda layer, quant, inputs, rounding: function(layer, quant, inputs)


FORMAT: Extensions[FormatOp] = Extensions(WHERE, {
    "conv2d": FormatOp(_ref(reference.conv2d), C(conv_emit, conv_scratch, conv_workspace)),
    "linear": FormatOp(_ref(reference.linear), C(linear_emit, linear_scratch, linear_workspace)),
    "pool2d": FormatOp(_ref(reference.pool2d), C(pool_emit)),
    "add": FormatOp(_ref(reference.add), C(add_emit, add_scratch, add_workspace)),
    "softmax": FormatOp(_ref(reference.softmax), C(softmax_emit)),
}, missing=f"{WHERE} has no implementation of it (it runs conv2d, linear, pool2d, add, "
           "softmax and the views; `edgebuild import-tflite` writes only those)")
