"""The operator record: every fact about one op, in one place
(docs/internals/architecture.md).

An op module (`ops/<op>.py`) defines its manifest fields (a pydantic record) and one
`Operator` whose facets the rest of edgebuild looks up instead of keeping per-op tables:

- shape: output shape, parameter count, MACs (validation, graph.json);
- `role`: what the op is in the deployed model (a compute layer with weights, a data layer,
  a view, or something folded/dropped before deployment);
- `torch`: the module and forward of float training and fake-quant QAT;
- `reference`: the numpy integer reference (bit-exact with the C);
- `weights`: how its weight tensor is laid out (output channels first or not);
- `c`: the C calls, declarations and scratch of the generated project;
- `windows`: the windows the L1 tiler cuts (memory.tiling);
- `onnx`: how it is written into an ONNX model, in the float, fake-quant and integer forms
  (ops.onnxcode; interchange.export);
- `stream`: state kept across inferences (a model with such an op runs on frames);
- `l2_traffic`: it runs between L2 tensors without an L1 tile;
- `example`: a tiny model that uses the op (the tests that walk the registry build it:
  shapes, every ONNX form, `check` on every device).

What only one target or number format knows about an op is not a facet: the target keeps
it in its own table, op name -> its record (ops.extension.Extensions; the MAX7800x
accelerator's is targets/max7800x/operators.py).

A facet an op does not have is `Unsupported(reason)`: the reason is what `edgebuild check`
tells a user who uses the op where that facet is needed (tests/test_operators.py walks the
registry and fails on a facet that is neither implemented nor declared unsupported).

Shapes are per sample, channels first (core.geometry); torch and the integer reference
compute batch-first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeVar

from pydantic import Field

from edgebuild.core.fields import Identifier, Strict
from edgebuild.core.geometry import Shape, Window
from edgebuild.core.numerics import Activation, QuantParams
from edgebuild.ops.c import CCode, CStep
from edgebuild.ops.onnxcode import OnnxCode, OnnxStep

if TYPE_CHECKING:  # numpy and torch load on first use (numerics): importing ops stays cheap
    import numpy as np
    import torch
    from numpy.typing import NDArray

    # The integer reference's tensors: int64 arrays, batch first (int8-range values but
    # for a wide layer's output).
    Ints = NDArray[np.int64]

G = TypeVar("G", bound="np.generic")  # an array's element type, kept by a relayout

Count = Annotated[int, Field(strict=True, ge=1, le=65536)]
Small = Annotated[int, Field(strict=True, ge=1, le=64)]
Pad = Annotated[int, Field(strict=True, ge=0, le=64)]
Pair = Small | tuple[Small, Small]
PadPair = Pad | tuple[Pad, Pad]

__all__ = ["Activation", "QuantParams"]  # re-exported for op modules and callers


class PoolMode(StrEnum):
    max = "max"
    avg = "avg"


class FusedPool(Strict):
    """Pooling of a layer's *input*, before its convolution — as the MAX78000 hardware does."""

    mode: PoolMode
    size: Pair
    stride: Pair | None = Field(default=None, description="defaults to size")


class LayerBase(Strict):
    name: Identifier
    inputs: tuple[Identifier, ...] | None = Field(
        default=None, description="names of earlier layers (or 'input'); default: the previous layer")
    doc: str = Field(default="", description="free text; never affects a build")


class ComputeLayer(Protocol):
    """The fields every compute op's layer record has (`Role.compute`; tests/test_typing.py
    checks the registry agrees). Code that found a layer to compute through its operator
    record reads it as this."""

    @property
    def name(self) -> str: ...

    @property
    def out(self) -> int: ...

    @property
    def bias(self) -> bool: ...

    @property
    def act(self) -> Activation: ...

    @property
    def wide(self) -> bool: ...


@dataclass(frozen=True)
class LayerPolicy:
    """The resolved quantization policy of one compute layer."""

    weight_bits: int
    bias_bits: int
    shift_quantile: float
    bias_scale_log2: int = 0  # bias = (bias_bits integer) x 2^this accumulator units
    shift_limits: tuple[int, int] = (-15, 15)  # allowed weight scale exponents (numerics)


@dataclass(frozen=True)
class Mode:
    """How the torch network computes. `float`: plain training (outputs clamped to the Q7
    range when `clamp`); `qat`: fake quantization that follows the integer math exactly.
    `scale_exps` pins each layer's weight scale (evaluation of quantized weights); without
    it the scale follows the weights (training)."""

    kind: Literal["float", "qat"]
    rounding: str = "half_up"
    clamp: bool = True
    policy: dict[str, LayerPolicy] = field(default_factory=dict)
    scale_exps: dict[str, int] | None = None


@dataclass(frozen=True)
class Unsupported:
    """A facet the op does not have; `reason` is the whole sentence a user reads."""

    reason: str


class Role(StrEnum):
    """What an op is in the deployed model."""

    compute = "compute"  # weights, bias, output shift: a quantization policy of its own
    data = "data"  # computes without weights (pooling, element-wise, concatenation, state)
    view = "view"  # its output is its input's bytes under another shape: no code, no buffer
    folded = "folded"  # merged into the layer before it by folding (batchnorm)
    dropped = "dropped"  # the identity once trained (dropout)


@dataclass(frozen=True)
class Torch:
    """`module(layer, in_shapes)` builds the op's parameters (None: it has none);
    `forward(layer, module, inputs, mode)` computes a batch (float or fake-quant).

    Each op's functions take its own layer record and the module its `module` built (None
    without one): the record's fields accept every op's, hence `Any` for those two."""

    forward: Callable[[Any, Any, Sequence[torch.Tensor], Mode], torch.Tensor]
    module: Callable[[Any, Sequence[Shape]], torch.nn.Module | None] = lambda layer, shapes: None


class Relayout(Protocol):
    """A weight layout conversion of one op (`layer`: its own record): keeps the element
    type (float weights in folding, integers in quantization)."""

    def __call__(self, weight: NDArray[G], layer: Any, /) -> NDArray[G]: ...


def same_layout(weight: NDArray[G], layer: LayerBase) -> NDArray[G]:
    return weight


@dataclass(frozen=True)
class Weights:
    """A compute op's weight tensor: `shape(layer, in_shape)` as stored (quantize's
    weights.npz, imported weights); `to_out_major` / `from_out_major` convert that layout
    to and from output-channels-first (what per-output-channel code — batchnorm folding,
    per-channel clipping — expects); identity for most ops."""

    shape: Callable[[Any, Shape], Shape]
    to_out_major: Relayout = same_layout
    from_out_major: Relayout = same_layout


@dataclass(frozen=True)
class C:
    """The generated C project: `emit(step)` gives the declarations and calls of one
    deployed step; `scratch(layer, in_shapes)` the C expression of the int16 scratch
    elements its optimized (Cortex-M4) kernel needs, or None: the kernels' own claim, which
    the project checks at compile time against `workspace(layer, in_shapes, out_shape,
    rows)`, the int16 elements the plan counts (memory.plan: rows, the row tile of a tiled
    pass, else None) and the project's workspace array holds; `stored(layer, in_shapes,
    weight)` the weights as weights.c stores them for that C (a convolution's cut to the
    taps its outputs reach: ops.reach). Each op's emitter takes the step of its own layer
    record (`CStep[Conv2d]`, ...)."""

    emit: Callable[[CStep[Any]], CCode]
    scratch: Callable[[Any, Sequence[Shape]], str | None] = lambda layer, shapes: None
    workspace: Callable[[Any, Sequence[Shape], Shape, int | None], int] = \
        lambda layer, shapes, out, rows: 0
    stored: Callable[[Any, Sequence[Shape], Any], Any] = lambda layer, shapes, weight: weight


def no_windows(layer: LayerBase, in_shapes: Sequence[Shape],
               out_shape: Shape) -> tuple[tuple[str, Window], ...]:
    return ()


@dataclass(frozen=True)
class Onnx:
    """How the op is written into an ONNX model (interchange.export): `emit(step)` gives
    one layer's nodes and initializers in the step's form (ops.onnxcode.Form), its last
    node writing `step.output`. A folded or dropped op (batchnorm, dropout) is reached
    only in the float form: the fake-quant and integer forms are of the folded layers."""

    emit: Callable[[OnnxStep[Any]], OnnxCode]


@dataclass(frozen=True)
class Stream:
    """An op that keeps state across inferences (a model with one runs on a stream of
    frames): `frames(layer)` per training sample (clips), `state_bytes(layer, out_shape)`
    kept outside the arena."""

    frames: Callable[[Any], int]
    state_bytes: Callable[[Any, Shape], int]


@dataclass(frozen=True)
class Example:
    """A tiny model that uses the op, as a manifest's `model:` section (`input` and the
    layers' fields as YAML gives them): the op's layer and whatever it needs around it (a
    batchnorm follows a convolution). The tests that walk the registry build it — its
    shapes, every ONNX form, `check` on every target device — so a new op is tested by
    them without a list to add it to."""

    input: tuple[int, ...]
    layers: tuple[dict[str, Any], ...]

    def model(self) -> dict[str, Any]:
        """The `model:` section (fresh lists and dicts: a caller may change them)."""
        return {"input": list(self.input), "layers": [dict(layer) for layer in self.layers]}


@dataclass(frozen=True)
class Operator:
    """Everything edgebuild knows about one op, looked up by `op:` name (see the module
    docstring for the facets). The facets' functions take the op's own layer record, so
    the fields that hold them take `Any` for the layer (and `reference` for its
    `QuantParams`: a compute op's, None for the others)."""

    name: str
    params: type[LayerBase]
    arity: Literal["one", "many"]
    role: Role
    out_shape: Callable[[Any, Sequence[Shape]], Shape]
    param_count: Callable[[Any, Sequence[Shape]], int]
    macs: Callable[[Any, Sequence[Shape], Shape], int]
    torch: Torch
    reference: Callable[[Any, Any, Sequence[Ints], str], Ints] | Unsupported
    c: C | Unsupported
    onnx: Onnx | Unsupported
    example: Example
    weights: Weights | Unsupported = Unsupported(
        "it has no weights; only compute layers (convolutions, linear) have weights")
    windows: Callable[[Any, Sequence[Shape], Shape], tuple[tuple[str, Window], ...]] = no_windows
    stream: Stream | None = None
    # Runs between L2 tensors without an L1 tile (add, concat): the plan counts each of its
    # input and output bytes once in the traffic figures.
    l2_traffic: bool = False

    @property
    def computes(self) -> bool:
        """A compute layer: weights, bias, output shift, a quantization policy."""
        return self.role is Role.compute

    @property
    def deployed(self) -> bool:
        """Still a layer after folding (batchnorm and dropout are not)."""
        return self.role not in (Role.folded, Role.dropped)


def one(layer: LayerBase, shapes: Sequence[Shape]) -> Shape:
    return tuple(shapes[0])


def no_params(layer: LayerBase, shapes: Sequence[Shape]) -> int:
    return 0


def no_macs(layer: LayerBase, shapes: Sequence[Shape], out: Shape) -> int:
    return 0


FOLDED = ("it is folded into the layer before it before deployment, so it never runs on "
          "its own")
