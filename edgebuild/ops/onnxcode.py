"""How an operator is written into an ONNX model: the record an op's `onnx` facet receives
(`OnnxStep`), what it returns (`OnnxCode`: nodes and initializers as plain records), and
the numerics contract (core.numerics) in standard ONNX operators, written once.

One model has three ONNX forms (interchange.export writes them beside the checkpoints):

- `float`: the trained network (train's float.npz), float32 in and out, batchnorm
  unfolded, activations clamped to the Q7 range when training clamped them;
- `qat`: the folded network with fake quantization (qat's folded.npz): each weight and bias
  a DequantizeLinear of its integers with a power-of-two scale, each requantized activation
  a QuantizeLinear/DequantizeLinear pair of scale 1/128. QuantizeLinear rounds half to
  even, so the manifest's rounding is applied before it (a Floor) and the pair only
  saturates: float in and out, equal to the fake-quant network;
- `int8`: the integer model (quantize's weights.npz): int8 in, int8 out (int32 for a
  `wide` last layer), integer weights as initializers, ConvInteger/MatMulInteger
  accumulating in int32, the requantization in int64 (add, Mod, Div, Clip, Cast): bit for
  bit the integer reference.

Records only: this module never imports onnx (interchange.export turns the records into
protobuf), so the op modules stay importable without it and their facets are data a test
can read. Every tensor a layer adds is named `<layer>/<part>`, deterministically; the
tensor a layer outputs is named after the layer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from edgebuild.core.geometry import Shape
from edgebuild.core.numerics import (
    ACT_SCALE,
    INT8_MAX,
    INT8_MIN,
    QuantParams,
    pool_rounding,
    requantize_rounding,
)
from edgebuild.ops.c import Named

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

L = TypeVar("L", bound=Named, covariant=True)  # the layer record of a step's op

Attribute = int | float | str | tuple[int, ...]

# onnx.TensorProto's element types (fixed by the ONNX standard; onnx is not imported here)
FLOAT, INT8, INT32, INT64 = 1, 3, 6, 7


class Form(StrEnum):
    """The three ONNX forms of a model (see the module docstring)."""

    float = "float"
    qat = "qat"
    int8 = "int8"


@dataclass(frozen=True)
class OnnxNode:
    """One ONNX node: its operator type, input and output tensor names and attributes."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, Attribute], ...] = ()


@dataclass(frozen=True)
class OnnxCode:
    """A layer's nodes and initializers, built as a chain: `output` is the tensor holding
    the result so far, and every tensor added is named `<prefix>/<part>`."""

    prefix: str
    output: str
    nodes: tuple[OnnxNode, ...] = ()
    initializers: tuple[tuple[str, Any], ...] = ()  # (name, numpy array)

    def tensor(self, part: str) -> str:
        return f"{self.prefix}/{part}"

    def const(self, part: str, value: Any) -> OnnxCode:
        """An initializer named `<prefix>/<part>` (a numpy array)."""
        return dataclasses.replace(self, initializers=self.initializers
                                   + ((self.tensor(part), value),))

    def fresh(self, part: str) -> str:
        """`part` made unique within the chain (numbered by the nodes so far)."""
        return f"{part}{len(self.nodes)}"

    def side(self, part: str, op: str, *inputs: str | Any, **attributes: Attribute) -> OnnxCode:
        """A node writing `<prefix>/<part>` that leaves `output` as it is (a dequantized
        weight, say). `inputs` are tensor names or numpy values (then initializers)."""
        code, names = self._operands(part, inputs)
        node = OnnxNode(op, names, (self.tensor(part),), tuple(sorted(attributes.items())))
        return dataclasses.replace(code, nodes=code.nodes + (node,))

    def then(self, op: str, *others: str | Any, **attributes: Attribute) -> OnnxCode:
        """`op(output, *others)` as the next link; `others` as `side`'s inputs."""
        part = self.fresh(op.lower())
        code = self.side(part, op, self.output, *others, **attributes)
        return dataclasses.replace(code, output=self.tensor(part))

    def _operands(self, part: str, inputs: tuple[str | Any, ...]) -> tuple[OnnxCode, tuple[str, ...]]:
        code, names = self, []
        for position, value in enumerate(inputs):
            if isinstance(value, str):
                names.append(value)
            else:
                code = code.const(f"{part}_{position}", value)
                names.append(self.tensor(f"{part}_{position}"))
        return code, tuple(names)

    def named(self, name: str) -> OnnxCode:
        """The chain's result renamed `name` (the layer's output tensor): its last node
        writes it, or an Identity when the chain added none."""
        if self.output == name:
            return self
        last = self.nodes[-1] if self.nodes else None
        if last is None or last.outputs != (self.output,):
            return self.then("Identity").named(name)
        renamed = dataclasses.replace(last, outputs=(name,))
        return dataclasses.replace(self, output=name, nodes=self.nodes[:-1] + (renamed,))


@dataclass(frozen=True)
class OnnxStep(Generic[L]):
    """One layer as its op's `onnx` facet sees it. `inputs` are the tensor names it reads,
    `output` the name it must write (the layer's name). `tensors`: the float form's
    weights by their torch names (`weight`, `bias`, a batchnorm's statistics); `quant`: a
    compute layer's integers and scale in the qat and int8 forms; `rounding`: the
    numerics rounding mode of those forms; `clamp`: whether float training clamped
    activations to Q7."""

    layer: L
    form: Form
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    inputs: tuple[str, ...]
    output: str
    tensors: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    quant: QuantParams | None = None
    rounding: str = "half_up"
    clamp: bool = True

    def start(self, index: int = 0) -> OnnxCode:
        """An empty chain on input `index`."""
        return OnnxCode(self.layer.name, self.inputs[index])

    def requant(self) -> QuantParams:
        """The compute layer's integers (qat and int8 forms give them)."""
        assert self.quant is not None, f"layer {self.layer.name}: no integers in the {self.form} form"
        return self.quant


def view(step: OnnxStep[Named]) -> OnnxCode:
    """A layer whose output is its input (passthrough, dropout at inference)."""
    return step.start().named(step.output)


# --- the numerics contract in ONNX (core.numerics says what each rule is) -------------------

def _f32(value: float) -> NDArray[np.float32]:
    import numpy as np

    return np.array(value, dtype=np.float32)


def _i64(value: int) -> NDArray[np.int64]:
    import numpy as np

    return np.array(value, dtype=np.int64)


def activate(code: OnnxCode, act: str) -> OnnxCode:
    """numerics.torch_activate on floats: relu or abs."""
    return code.then("Relu") if act == "relu" else code.then("Abs") if act == "abs" else code


def float_output(code: OnnxCode, act: str, clamp: bool) -> OnnxCode:
    """Float training's output rule: the activation, then (numerics.torch_clamp_float)
    the clamp to the Q7 range [-1, 127/128] when training clamped."""
    code = activate(code, act)
    if not clamp:
        return code
    return code.then("Clip", _f32(INT8_MIN / ACT_SCALE), _f32(INT8_MAX / ACT_SCALE))


def round_float(code: OnnxCode, rule: str) -> OnnxCode:
    """numerics' rounding on float values: half_up floor(v + 0.5), floor, or trunc (toward
    zero: sign(v) * floor(|v|); ONNX has no Trunc)."""
    if rule == "half_up":
        return code.then("Add", _f32(0.5)).then("Floor")
    if rule == "floor":
        return code.then("Floor")
    sign = code.fresh("sign")
    code = code.side(sign, "Sign", code.output)
    return code.then("Abs").then("Floor").then("Mul", code.tensor(sign))


def fake_requantize(code: OnnxCode, rounding: str, act: str) -> OnnxCode:
    """numerics.torch_requantize: round(v * 128) with the mode's rounding, the activation,
    then a QuantizeLinear/DequantizeLinear pair of scale 1/128 that saturates to int8 (its
    own rounding never acts: the value is already on the 1/128 grid)."""
    import numpy as np

    code = round_float(code.then("Mul", _f32(ACT_SCALE)), requantize_rounding(rounding))
    code = activate(code, act).then("Mul", _f32(1 / ACT_SCALE))
    scale, zero = code.fresh("act_scale"), code.fresh("act_zero")
    code = code.const(scale, _f32(1 / ACT_SCALE)).const(zero, np.array(0, np.int8))
    scale, zero = code.tensor(scale), code.tensor(zero)
    return code.then("QuantizeLinear", scale, zero).then("DequantizeLinear", scale, zero)


def fake_weights(code: OnnxCode, quant: QuantParams) -> OnnxCode:
    """`<prefix>/weight` and `<prefix>/bias` as DequantizeLinear of the integers: weight
    w_q x 2^shift (numerics.torch_fake_weights), bias b_q x 2^(shift - 7) in accumulator
    units (numerics.torch_fake_bias): exactly the fake-quant network's tensors."""
    import numpy as np

    code = code.const("weight_q", quant.weight.astype(np.int8))
    code = code.const("weight_scale", _f32(2.0 ** quant.shift))
    code = code.side("weight", "DequantizeLinear", code.tensor("weight_q"),
                     code.tensor("weight_scale"))
    if quant.bias is None:
        return code
    code = code.const("bias_q", quant.bias.astype(np.int32))
    code = code.const("bias_scale", _f32(2.0 ** (quant.shift - 7)))
    return code.side("bias", "DequantizeLinear", code.tensor("bias_q"), code.tensor("bias_scale"))


def floor_divide(code: OnnxCode, divisor: int) -> OnnxCode:
    """floor(v / divisor) on int64, exactly: v - Mod(v, divisor) (Mod with fmod=0 takes
    the divisor's sign, here positive) is a multiple of the divisor, so the Div is exact
    whatever rounding the runtime's integer division has."""
    remainder = code.fresh("remainder")
    code = code.side(remainder, "Mod", code.output, _i64(divisor), fmod=0)
    return code.then("Sub", code.tensor(remainder)).then("Div", _i64(divisor))


def round_shift(code: OnnxCode, shift: int, rounding: str) -> OnnxCode:
    """numerics.np_round_shift on int64: acc x 2^shift, a left shift exact, a right shift
    rounded half up (floor((acc + 2^(r-1)) / 2^r)) or down (floor(acc / 2^r))."""
    if shift >= 0:
        return code.then("Mul", _i64(1 << shift)) if shift else code
    right = -shift
    if requantize_rounding(rounding) == "half_up":
        code = code.then("Add", _i64(1 << (right - 1)))
    return floor_divide(code, 1 << right)


def saturate(code: OnnxCode, act: str) -> OnnxCode:
    """numerics.np_saturate(np_activate(v)) on int64, then int8: relu and saturation are
    one Clip to [0, 127] (onnxruntime has no integer Relu), abs an Abs before the Clip."""
    low = 0 if act == "relu" else INT8_MIN
    code = code.then("Abs") if act == "abs" else code
    return code.then("Clip", _i64(low), _i64(INT8_MAX)).then("Cast", to=INT8)


def requantize(code: OnnxCode, shift: int, rounding: str, act: str) -> OnnxCode:
    """numerics.np_requantize of an int32 accumulator: to int64 (a left shift may leave
    int32 before saturating), shift with rounding, activation, saturation, int8."""
    return saturate(round_shift(code.then("Cast", to=INT64), shift, rounding), act)


def divide_round(code: OnnxCode, count: int, rounding: str) -> OnnxCode:
    """numerics.np_divide_round of an int64 sum by `count` (average pooling): half_up
    floor((2 v + count) / 2 count), floor, or trunc sign(v) x floor(|v| / count)."""
    rule = pool_rounding(rounding)
    if rule == "half_up":
        return floor_divide(code.then("Mul", _i64(2)).then("Add", _i64(count)), 2 * count)
    if rule == "floor":
        return floor_divide(code, count)
    sign = code.fresh("sign")
    code = code.side(sign, "Sign", code.output)
    return floor_divide(code.then("Abs"), count).then("Mul", code.tensor(sign))
