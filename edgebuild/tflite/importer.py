"""`edgebuild import-tflite`: an int8 `.tflite` model becomes a manifest in TFLite's number
format (`model.format: tflite`), its integers (`model.weights`, tflite.quant's keys) and a
known answer, all in edgebuild's channels-first layout.

The known answer: `--sample` holds inputs as the interpreter takes them (NHWC, the model's
input dtype: int8, or float32 for a model that QUANTIZEs its input), `--expected` the
interpreter's outputs for them. Without `--expected`, LiteRT's reference kernels
(ai-edge-litert, when installed) compute them; without it, edgebuild's own integer reference
of TFLite's format does, and the import says which. Without `--sample`, N seeded samples
cover the input range (the first a ramp over every value). Every operator that cannot be
imported is listed at once, as one user error; nothing is written then, and an existing
file with other content is never overwritten.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.interchange import limits
from edgebuild.interchange.importer import npz, write_all
from edgebuild.tflite import flatbuffer, translation

if TYPE_CHECKING:
    from numpy.typing import NDArray

SAMPLES = 8  # seeded known-answer samples when no --sample is given
SEED = 31


@dataclass(frozen=True)
class Imported:
    manifest: Path
    files: tuple[Path, ...]
    notes: tuple[str, ...]  # what the user should know (where the known answer came from)


def import_tflite(path: Path, out_dir: Path, name: str, device: str,
                  sample: Path | None = None, expected: Path | None = None) -> Imported:
    graph = flatbuffer.read(path)
    translator = translation.Translator(graph)
    try:
        result = translator.translate()
    except translation.Unsupported as exc:
        raise limits.refuse(path, str(exc)) from None
    if translator.problems:
        raise UserError([Diagnostic(str(path), f"operator {op.index} ({op.kind}): {why}")
                         for op, why in translator.problems])
    notes: list[str] = []
    inputs = _samples(path, result, sample)
    outputs, source = _expected(path, result, inputs, expected)
    notes.append(source)
    folder = out_dir / name
    x = translation.to_chw(_quantized_inputs(result, inputs))
    y = translation.to_chw(outputs).reshape(len(outputs), -1)
    manifest = out_dir / f"{name}.yaml"
    files = {manifest: manifest_text(path, name, device, result, source).encode(),
             folder / "weights.npz": npz(result.arrays),
             folder / "input.npy": _npy(x.astype(np.int8)),
             folder / "expected.npy": _npy(y.astype(np.int8))}
    _check(files[manifest])
    write_all(files)
    return Imported(manifest, tuple(files), tuple(notes))


def _samples(path: Path, result: translation.Translated, sample: Path | None) -> NDArray[Any]:
    """The known-answer inputs as the interpreter takes them (batch first, NHWC)."""
    shape = result.input_nhwc
    dtype = np.float32 if result.input_float else np.int8
    if sample is None:
        rng = np.random.default_rng(SEED)
        count = int(np.prod(shape))
        ramp = np.resize(np.arange(-128, 128, dtype=np.int64), count).reshape(shape)
        values = np.concatenate([ramp[None], rng.integers(-128, 128, (SAMPLES - 1, *shape))])
        if result.input_float:  # the int8 grid, as the floats the model quantizes
            return ((values - result.input_zp) * np.float32(result.input_scale)).astype(dtype)
        return values.astype(dtype)
    values = _load(sample)
    if tuple(values.shape) == tuple(shape):
        values = values[None]
    if tuple(values.shape[1:]) != tuple(shape):
        raise UserError(Diagnostic(str(sample), f"shape {list(values.shape)}; the model takes "
                                                f"[N, {', '.join(map(str, shape))}] (NHWC)"))
    if values.dtype != dtype:
        raise UserError(Diagnostic(str(sample), f"{values.dtype} values; the model takes "
                                                f"{np.dtype(dtype).name}"))
    return values


def _quantized_inputs(result: translation.Translated, inputs: NDArray[Any]) -> NDArray[np.int64]:
    """int8 inputs: as given, or the floats QUANTIZEd as TFLite does (round(x / scale),
    halves away from zero, in float32, + zero point, clamped)."""
    if not result.input_float:
        return inputs.astype(np.int64)
    ratio = (inputs.astype(np.float32) / np.float32(result.input_scale)).astype(np.float64)
    rounded = np.sign(ratio) * np.floor(np.abs(ratio) + 0.5)
    return np.clip(rounded + result.input_zp, -128, 127).astype(np.int64)


def _expected(path: Path, result: translation.Translated, inputs: NDArray[Any],
              expected: Path | None) -> tuple[NDArray[np.int64], str]:
    """(int8 outputs NHWC, where they came from)."""
    if expected is not None:
        values = _load(expected)
        want = (len(inputs), *result.output_nhwc)
        if int(np.prod(values.shape)) != int(np.prod(want)):
            raise UserError(Diagnostic(str(expected), f"shape {list(values.shape)}; the "
                                                      f"model's outputs for {len(inputs)} "
                                                      f"samples are {list(want)}"))
        return _int8_outputs(result, values.reshape(want)), f"known answer: {expected.name}"
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        outputs = run_reference(result, _quantized_inputs(result, inputs))
        return translation.to_nhwc(outputs), (
            "known answer: edgebuild's integer reference of TFLite's format (LiteRT is not "
            "installed: `pip install ai-edge-litert` to take TensorFlow's own)")
    interpreter = Interpreter(model_path=str(path),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    source, target = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    found = []
    for x in inputs:
        interpreter.set_tensor(source["index"], x[None])
        interpreter.invoke()
        found.append(interpreter.get_tensor(target["index"])[0].copy())
    return _int8_outputs(result, np.stack(found)), \
        "known answer: LiteRT's reference kernels (ai-edge-litert, BUILTIN_REF)"


def _int8_outputs(result: translation.Translated, values: NDArray[Any]) -> NDArray[np.int64]:
    """The output's int8 integers: as given, or a DEQUANTIZEd output's floats back on its
    grid ((q - zp) * scale is exact, so the rounding recovers q)."""
    if not result.output_float:
        return values.astype(np.int64)
    q = np.round(values.astype(np.float64) / np.float64(np.float32(result.output_scale)))
    return np.clip(q + result.output_zp, -128, 127).astype(np.int64)


def run_reference(result: translation.Translated, x: NDArray[np.int64]) -> NDArray[np.int64]:
    """The translated model through model.quantized's integer reference in TFLite's format,
    on int8 inputs NHWC; its outputs channels first."""
    from edgebuild.formats import numbers
    from edgebuild.manifest import Model
    from edgebuild.model import quantized

    model = Model.model_validate({"input": list(result.input_shape), "layers": result.layers,
                                  "format": "tflite"})
    names = [layer.name for layer in model.layers]
    integer = quantized.QuantizedModel(tuple(model.input), model.layers, {}, "half_up",
                                       "tflite", numbers.records("tflite", result.arrays, names))
    return quantized.run_reference(integer, translation.to_chw(x))


def _load(path: Path) -> NDArray[Any]:
    from edgebuild.core import arrays

    try:
        values = arrays.read(path)
    except (OSError, ValueError) as exc:
        raise UserError(Diagnostic(str(path), f"cannot read a .npy array ({exc})")) from None
    if isinstance(values, dict):
        raise UserError(Diagnostic(str(path), "a .npz archive; give one .npy array"))
    return values


def manifest_text(path: Path, name: str, device: str, result: translation.Translated,
                  source: str) -> str:
    """The manifest, commented: where each layer comes from in the .tflite file."""
    import json

    lines = [f"# Imported by `edgebuild import-tflite` from {limits.printable(path.name)}",
             "# number format: TFLite's int8 (zero points, per-channel multipliers) in "
             f"{name}/weights.npz",
             f"# {source}",
             f"# input: {list(result.input_nhwc)} NHWC "
             f"({'float32, quantized first' if result.input_float else 'int8'}), here "
             "channels first",
             f"name: {name}", "model:", f"  input: {list(result.input_shape)}",
             "  format: tflite", f"  weights: {name}/weights.npz", "  layers:"]
    for layer in result.layers:
        fields = ", ".join(f"{key}: {json.dumps(value)}" for key, value in layer.items())
        lines.append(f"    - {{{fields}}}  # {result.notes[layer['name']]}")
    lines += ["target:", f"  device: {device}",
              f"kat: {{input: {name}/input.npy, expected: {name}/expected.npy}}", ""]
    return "\n".join(lines)


def _check(text: bytes) -> None:
    """The importer's own manifest validates (a bug if not)."""
    import yaml

    from edgebuild.manifest import Manifest

    Manifest.model_validate(yaml.safe_load(text))


def _npy(values: NDArray[Any]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, values, allow_pickle=False)
    return buffer.getvalue()
