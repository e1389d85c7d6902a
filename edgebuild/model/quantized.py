"""The quantized model: folded layers + integer weights, and the numpy integer reference.

Artifact format (stage `quantize`): `weights.npz` with `<layer>.weight` (int8/int16 holding
b-bit integers) and `<layer>.bias` (int32, accumulator units), and `quant.json` with the
rounding mode and, per compute layer, bits and weight scale exponent (see numerics and
model.quantization).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from edgebuild.formats import numbers
from edgebuild.formats.numbers import OWN
from edgebuild.model import folding
from edgebuild.model import graph as graphs
from edgebuild.model.quantization import Quantization
from edgebuild.ops import OPS
from edgebuild.ops.operator import QuantParams, Unsupported

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer, Manifest
    from edgebuild.ops.operator import Ints


@dataclass(frozen=True)
class QuantizedModel:
    """`numbers`: the number format (formats.numbers); in another format than edgebuild's own,
    `records` holds each layer's record of that format (TFLite's: tflite.quant.TflQuant)."""

    input_shape: tuple[int, ...]
    layers: tuple[Layer, ...]  # folded: explicit inputs, no batchnorm/dropout
    params: dict[str, QuantParams]
    rounding: str
    numbers: str = "edgebuild"
    records: dict[str, Any] = field(default_factory=dict)

    def quant(self, layer: str) -> Any:
        """What the layer's integer reference takes: its format's record (None: none)."""
        if self.numbers == OWN:
            return self.params.get(layer)
        return self.records.get(layer)

    @property
    def output(self) -> Layer:
        return self.layers[-1]

    def output_shift(self) -> int | None:
        quant = self.params.get(self.output.name)
        return None if quant is None else quant.shift


FORMAT_FILE = "tflite.npz"  # a TFLite model's integers beyond weights.npz (tflite.quant)


def load(directory: Path, manifest: Manifest) -> QuantizedModel:
    """The model the `quantize` stage wrote to `directory`."""
    from edgebuild.core import arrays

    name = FORMAT_FILE if manifest.model.format.value != OWN else "weights.npz"
    return assemble(manifest, Quantization.load(directory), arrays.load(directory / name))


def assemble(manifest: Manifest, quantization: Quantization,
             weights: dict[str, NDArray[Any]]) -> QuantizedModel:
    """The model from its quantization table and integer weights (`<layer>.weight`,
    `<layer>.bias` arrays)."""
    layers, _ = folding.fold_layers(manifest.model.layers)
    if manifest.model.format.value != OWN:
        return _assemble_format(manifest, quantization, weights, layers)
    params: dict[str, QuantParams] = {}
    for row in quantization.layers:
        bias = weights.get(f"{row.name}.bias")
        params[row.name] = QuantParams(weights[f"{row.name}.weight"].astype("int64"),
                                       None if bias is None else bias.astype("int64"),
                                       row.scale_exp, row.bits)
    return QuantizedModel(tuple(manifest.model.input), layers, params, quantization.rounding)


def _assemble_format(manifest: Manifest, quantization: Quantization,
                     weights: dict[str, NDArray[Any]], layers: tuple[Layer, ...]) -> QuantizedModel:
    """A model in TFLite's format: every computing layer's record from the weights file,
    QuantParams of its compute layers for what reads weights by format-blind code (weights.c,
    the flash budget)."""
    records = numbers.records(manifest.model.format.value, weights,
                              [layer.name for layer in layers])
    params = {row.name: QuantParams(weights[f"{row.name}.weight"].astype("int64"),
                                    records[row.name].bias, row.scale_exp, row.bits)
              for row in quantization.layers}
    return QuantizedModel(tuple(manifest.model.input), layers, params, quantization.rounding,
                          manifest.model.format.value, records)


@overload
def run_reference(model: QuantizedModel, x: NDArray[np.integer[Any]], *,
                  keep_all: Literal[False] = False) -> Ints: ...


@overload
def run_reference(model: QuantizedModel, x: NDArray[np.integer[Any]], *,
                  keep_all: Literal[True]) -> dict[str, Ints]: ...


def run_reference(model: QuantizedModel, x: NDArray[np.integer[Any]], *,
                  keep_all: bool = False) -> Ints | dict[str, Ints]:
    """Integer inference on a batch of int8 samples (N, *input_shape) — clips (N, frames,
    *input_shape) for a model with a buffer — -> int64 outputs."""
    import numpy as np

    values = {graphs.INPUT: graphs.per_frame(x.astype(np.int64), model.layers)}
    for layer in model.layers:
        assert layer.inputs is not None  # folded layers name their inputs (folding)
        inputs = [values[name] for name in layer.inputs]
        reference = numbers.reference(layer.op, model.numbers)
        if isinstance(reference, Unsupported):  # the folded layers have none of these
            raise ValueError(f"layer {layer.name!r}: {reference.reason}")
        values[layer.name] = reference(layer, model.quant(layer.name), inputs, model.rounding)
    return values if keep_all else values[model.output.name]


def run_batched(model: QuantizedModel, x: NDArray[np.integer[Any]], batch: int = 256) -> Ints:
    import numpy as np

    return np.concatenate([run_reference(model, x[i:i + batch]) for i in range(0, len(x), batch)])


def run_first_frames(model: QuantizedModel, x: NDArray[np.integer[Any]]) -> Ints:
    """A model with a buffer (a window of frames, ops/buffer.py), on a batch of single
    frames (N, *input_shape), each pushed into an empty window: every earlier frame's
    features zero — not the features of zero frames, which a bias makes nonzero. That is
    the first inference after `cnn_reset()` (the C's window starts all zero) or after the
    accelerator's data memory was cleared, and the known answer the MAX7800x vendor's tool
    gives for such a model: its sample is one frame, simulated with the data buffer
    starting at zeros."""
    import numpy as np

    values = {graphs.INPUT: x.astype(np.int64)}
    for layer in model.layers:
        assert layer.inputs is not None  # folded layers name their inputs
        inputs = [values[name] for name in layer.inputs]
        stream = OPS[layer.op].stream
        if stream is not None:  # (N, C, ...) features -> windows (N, length, C, ...)
            window = np.zeros((len(x), stream.frames(layer), *inputs[0].shape[1:]),
                              dtype=np.int64)
            window[:, -1] = inputs[0]
            inputs = [window.reshape(-1, *inputs[0].shape[1:])]
        reference = numbers.reference(layer.op, model.numbers)
        if isinstance(reference, Unsupported):
            raise ValueError(f"layer {layer.name!r}: {reference.reason}")
        values[layer.name] = reference(layer, model.quant(layer.name), inputs, model.rounding)
    return values[model.output.name]


def run_known(model: QuantizedModel, x: NDArray[np.integer[Any]]) -> Ints:
    """The reference on known-answer inputs: clips or samples (run_batched), or for a model
    with a buffer single frames into an empty window (`run_first_frames`)."""
    if graphs.frames(model.layers) > 1 and x.ndim == len(model.input_shape) + 1:
        return run_first_frames(model, x)
    return run_batched(model, x)
