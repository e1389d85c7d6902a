"""linear: fully connected layer over a flat feature vector."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.core.geometry import Plane, Shape, ShapeError, Window
from edgebuild.ops import conv
from edgebuild.ops.c import CCode, CStep, bias_symbol, packed_bits, requantize, tile_decl
from edgebuild.ops.onnxcode import Form, OnnxCode, OnnxStep
from edgebuild.ops.operator import (
    Activation,
    C,
    Count,
    Example,
    LayerBase,
    Mode,
    Onnx,
    Operator,
    Role,
    Torch,
    Weights,
)

if TYPE_CHECKING:
    import torch

    from edgebuild.core.numerics import QuantParams
    from edgebuild.ops.operator import Ints


class Linear(LayerBase):
    op: Literal["linear"]
    out: Count = Field(description="output features")
    flatten: bool = Field(default=False, description="flatten a (C, ...) input first")
    bias: bool = True
    act: Activation = Activation.none
    wide: bool = Field(default=False, description="int32 output; only on the last layer")


def _features(layer: Linear, shape: Shape) -> int:
    if len(shape) != 1 and not layer.flatten:
        raise ShapeError(f"linear needs a flat input but gets {list(shape)}; "
                         "add `flatten: true` to this layer")
    return math.prod(shape)


def out_shape(layer: Linear, shapes: Sequence[Shape]) -> Shape:
    _features(layer, shapes[0])
    conv.validate_wide(layer)
    return (layer.out,)


def param_count(layer: Linear, shapes: Sequence[Shape]) -> int:
    return layer.out * _features(layer, shapes[0]) + (layer.out if layer.bias else 0)


def macs(layer: Linear, shapes: Sequence[Shape], out: Shape) -> int:
    return layer.out * _features(layer, shapes[0])


def torch_module(layer: Linear, shapes: Sequence[Shape]) -> torch.nn.Linear:
    import torch.nn as nn

    return nn.Linear(math.prod(shapes[0]), layer.out, bias=layer.bias)


def forward(layer: Linear, module: torch.nn.Linear, inputs: Sequence[torch.Tensor],
            mode: Mode) -> torch.Tensor:
    import torch.nn.functional as F

    x = inputs[0].flatten(1)
    return conv.torch_compute(layer, module, x, mode, F.linear)


def reference(layer: Linear, quant: QuantParams, inputs: Sequence[Ints], rounding: str) -> Ints:
    import numpy as np

    x = inputs[0].reshape(len(inputs[0]), -1).astype(np.int64)
    acc = x @ quant.weight.astype(np.int64).T
    return conv.reference_compute(layer, quant, acc, rounding)


def plane(layer: Linear, in_shape: Shape) -> Plane:
    """A linear layer is a dense 1 x 1 convolution over one position."""
    return Plane(math.prod(in_shape), 1, 1, layer.out, 1, 1)


# The optimized tiled linear (eb_linear_tiled_cols, the split L1 layout): the input's
# column built once, each tile's weight rows (int8 in L1, packed ones unpacked as staged)
# against it; -DEB_REFERENCE_KERNELS: the same driver and layout, the "column" the input
# copied into the scratch and the reference kernel on it.
_COLS_PRELUDE = (4, """#ifdef EB_REFERENCE_KERNELS
#define EB_LINEAR_EXPAND eb_ref_linear_expand
#define EB_LINEAR_DOT eb_ref_linear_dot
#else
#define EB_LINEAR_EXPAND eb_linear_expand
#define EB_LINEAR_DOT eb_linear_dot
#endif

""")


def tiled_cols(step: CStep[Linear], features: int, bits: int) -> CCode:
    """eb_linear_tiled_cols with the layer's EB_LINEAR_DOT wrapper and eb_linear_cols."""
    layer = step.layer
    assert step.tile is not None
    dot, kc = f"eb_kd_{layer.name}", f"eb_kc_{layer.name}"
    quant = "0, 0, 0, 1" if layer.wide else f"{requantize(step)}, 0"
    cols = (f"static void {dot}(int n, int m, const int16_t *c, const int8_t *w, "
            f"const int32_t *b, void *out) {{ EB_LINEAR_DOT(n, m, c, w, b, {quant}, out); }}\n"
            f"static const eb_linear_cols {kc} = {{EB_LINEAR_EXPAND, {dot}, eb_scratch.values}};")
    return CCode((tile_decl(step.symbol("T_TILE"), step.tile, step.double_buffer), cols), (
        f"eb_linear_tiled_cols({features}, {layer.out}, {bits}, &{step.symbol('T_TILE')}, "
        f"&{kc}, {1 if layer.wide else 0}, {step.inputs[0]}, {step.weights()}, "
        f"{bias_symbol(step)}, {step.output}, eb_l1.bytes);",), (_COLS_PRELUDE,))


def tiled(step: CStep[Linear], features: int, bits: int) -> CCode:
    """The tiled pass: eb_linear_tiled_cols on an optimized target, else eb_linear_tiled
    (eb_linear_tiled_packed for packed weights) on a per-layer kernel wrapper."""
    layer = step.layer
    assert step.tile is not None
    if step.optimized:
        return tiled_cols(step, features, bits)
    wrapper = f"eb_k_{layer.name}"
    body = ("eb_linear_wide(n, m, in, w, b, (int32_t *)out);" if layer.wide else
            f"eb_linear(n, m, in, w, b, {requantize(step)}, (int8_t *)out);")
    decls = (f"static void {wrapper}(int n, int m, const int8_t *in, const int8_t *w, "
             f"const int32_t *b, void *out) {{ {body} }}",
             tile_decl(step.symbol("T_TILE"), step.tile, step.double_buffer))
    args = (f"&{step.symbol('T_TILE')}, {wrapper}, {1 if layer.wide else 0}, {step.inputs[0]}, "
            f"{step.weights()}, {bias_symbol(step)}, {step.output}, eb_l1.bytes")
    if bits:  # unpacked into L1 for the int8 kernel
        return CCode(decls, (f"eb_linear_tiled_packed({features}, {layer.out}, {bits}, {args});",))
    return CCode(decls, (f"eb_linear_tiled({features}, {layer.out}, {args});",))


SHORT_MAX = 12  # eb_gemm_asm.h: EB_LINEAR_SHORT_MAX, the most inputs of a form of its own


def short_form(features: int, bias: bool) -> frozenset[str]:
    """The form of eb_linear_asm's rows for a layer of 4..SHORT_MAX inputs with a bias,
    "linear_k<features>" (eb_linear_k<K>_relu / _none: the column in registers, the rows'
    words at immediate offsets); none for other layers, whose rows eb_linear4 runs."""
    return frozenset({f"linear_k{features}"} if bias and 4 <= features <= SHORT_MAX else ())


def emit(step: CStep[Linear]) -> CCode:
    """eb_linear(_wide), the optimized EB_LINEAR(_WIDE) on Cortex-M4, or the tiled pass
    (`tiled`) when the plan tiles it. Packed (1-, 2-, 4-bit) weights take
    eb_linear_packed(_wide) / EB_LINEAR_PACKED(_WIDE) with their width; tiled, they are
    unpacked into L1 for the int8 kernels."""
    layer = step.layer
    features = math.prod(step.in_shapes[0])
    bits = packed_bits(step)
    if step.tile is not None:
        return tiled(step, features, bits)
    name = "EB_LINEAR" if step.optimized else "eb_linear"
    wide = f"{name}{'_WIDE' if step.optimized else '_wide'}"
    weights, bias, source, out = step.weights(), bias_symbol(step), step.inputs[0], step.output
    shape = f"{features}, {layer.out}, "
    if bits:
        name = "EB_LINEAR_PACKED" if step.optimized else "eb_linear_packed"
        wide = f"{name}{'_WIDE' if step.optimized else '_wide'}"
        shape += f"{bits}, "
    paths = frozenset({"packed"} if bits and step.optimized else ())
    if step.optimized and not bits and not layer.wide:  # eb_linear_fast's rows of its form
        paths |= {"linear_q", f"q_{layer.act.value}"} | short_form(features, bias != "NULL")
    if layer.wide:
        return CCode(calls=(f"{wide}({shape}{source}, {weights}, {bias}, (int32_t *){out});",),
                     paths=paths)
    return CCode(calls=(f"{name}({shape}{source}, {weights}, {bias}, {requantize(step)}, "
                        f"{out});",), paths=paths)


def onnx_emit(step: OnnxStep[Linear]) -> OnnxCode:
    """Flatten, then Gemm (float, fake-quant: weight (out, features), transB) or
    MatMulInteger on int8 against the transposed integers (exact int32 accumulator), then
    the form's output rule (conv.onnx_output)."""
    import numpy as np

    code = step.start().then("Flatten", axis=1)
    if step.form is Form.int8:
        code = code.then("MatMulInteger", np.ascontiguousarray(
            step.requant().weight.astype(np.int8).T))
    else:
        code, weights = conv.onnx_weights(code, step)
        code = code.then("Gemm", *weights, transB=1)
    return conv.onnx_output(code, step).named(step.output)


def scratch(layer: Linear, shapes: Sequence[Shape]) -> str:
    return f"EB_LINEAR_OPT_SCRATCH({math.prod(shapes[0])})"


def workspace(layer: Linear, shapes: Sequence[Shape], out: Shape, rows: int | None) -> int:
    """int16 elements of `scratch` (the input's column; tiled or not): the reference build's
    tiled pass copies the input there too, in fewer elements."""
    return (math.prod(shapes[0]) + 3) & ~3


def tile_windows(layer: Linear, shapes: Sequence[Shape], out: Shape) -> tuple[tuple[str, Window], ...]:
    """The whole input is staged once per slot; tiles are spans of output features."""
    return (("tile", Window(**vars(plane(layer, shapes[0])), wide=bool(layer.wide),
                            bias=bool(layer.bias), linear=True, split=True)),)



# The registry's tests build this model (ops/operator.py: Example).
EXAMPLE = Example((16,), ({"name": "fc", "op": "linear", "out": 12},))


OPERATOR = Operator(
    "linear", Linear, "one", Role.compute, out_shape, param_count, macs,
    example=EXAMPLE,
    torch=Torch(forward, torch_module), reference=reference, c=C(emit, scratch, workspace),
    onnx=Onnx(onnx_emit),
    weights=Weights(lambda layer, shape: (layer.out, math.prod(shape))),
    windows=tile_windows)
