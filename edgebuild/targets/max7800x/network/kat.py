"""The known answer an import may bring: a sample input and the toolchain's expected output
(`.npy`), checked against the model (shape, int8 values) and against edgebuild's integer
reference of the imported weights.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Manifest
    from edgebuild.model.quantized import QuantizedModel


def load_npy(path: Path, what: str) -> NDArray[Any]:
    """The array in `path` (no pickles); a missing or unreadable file is a user error."""
    from edgebuild.core import arrays

    try:
        array = arrays.read(path)
    except FileNotFoundError:
        raise UserError(Diagnostic(str(path), f"{what} file not found")) from None
    except arrays.PickledData as exc:  # pickled data: never numpy's advice to allow it
        raise UserError(Diagnostic(str(path), f"{what} {exc.reason}")) from None
    except (ValueError, OSError) as exc:
        raise UserError(Diagnostic(str(path), f"{what} is not a .npy array: {exc}")) from None
    if isinstance(array, dict):
        raise UserError(Diagnostic(str(path), f"{what} is a .npz archive, not a .npy array "
                                              "(numpy.save)"))
    return array


def check_sample(path: Path, array: NDArray[Any], shape: tuple[int, ...]) -> None:
    """One sample of the model input (or a batch of them), int8 values."""
    import numpy as np

    problems = []
    if tuple(array.shape) != shape and tuple(array.shape[1:]) != shape:
        problems.append(f"has shape {list(array.shape)}; the model input is {list(shape)} (one "
                        "sample, or a batch of them)")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
            and np.array_equal(array, np.round(array))):
        problems.append(f"holds {array.dtype} values; expected integers")
    elif array.size and (array.min() < -128 or array.max() > 127):
        problems.append(f"spans [{array.min()}, {array.max()}]; inputs are int8 values "
                        "[-128, 127]")
    if problems:
        raise UserError([Diagnostic(str(path), f"sample {p}") for p in problems])


def check_expected(path: Path | None, array: NDArray[Any], out_shape: tuple[int, ...]) -> None:
    """The expected output holds whole outputs of the model (one per sample)."""
    if array.size % math.prod(out_shape):
        raise UserError(Diagnostic(str(path), (
            f"expected output has shape {list(array.shape)} but the last layer "
            f"outputs {list(out_shape)}")))


def reference_output(manifest: Manifest, weights: dict[str, NDArray[Any]],
                     sample: NDArray[Any]) -> NDArray[Any]:
    """Edgebuild's integer reference, run on `sample` (one sample, or a batch of them) with
    the imported weights (`<layer>.weight`, `.bias`, `.scale_exp`, `.bits`, as the quantize
    stage stores them) and the device's rounding: the known answer an imported model owes,
    and what the accelerator program's expected output words hold. Returns one output per
    sample, batched as `sample` is."""
    import numpy as np

    from edgebuild.model import folding
    from edgebuild.model.graph import frames
    from edgebuild.model.quantized import QuantizedModel, run_reference
    from edgebuild.ops.operator import QuantParams

    layers, _ = folding.fold_layers(manifest.model.layers)
    params = {}
    for layer in layers:
        if f"{layer.name}.weight" in weights:
            bias = weights.get(f"{layer.name}.bias")
            params[layer.name] = QuantParams(
                weights[f"{layer.name}.weight"].astype(np.int64),
                None if bias is None else bias.astype(np.int64),
                int(weights[f"{layer.name}.scale_exp"]), int(weights[f"{layer.name}.bits"]))
    try:  # the device's rule (MAX7800x: half up, average pooling truncates)
        from edgebuild.targets.numbers import rounding_mode

        rounding = rounding_mode(manifest)
    except (ImportError, AttributeError):
        rounding = "half_up"
    model = QuantizedModel(tuple(manifest.model.input), layers, params, rounding)
    if frames(layers) > 1 and sample.ndim == len(manifest.model.input):
        return first_frame_output(model, sample.astype(np.int64))
    batched = sample.ndim > len(manifest.model.input)
    out = run_reference(model, (sample if batched else sample[None]).astype(np.int64))
    return out if batched else out[0]


def first_frame_output(model: QuantizedModel, frame: NDArray[Any]) -> NDArray[Any]:
    """The output of a model with a buffer for one frame pushed into an empty window
    (model.quantized.run_first_frames: the vendor's tool's known answer for such a model)."""
    from edgebuild.model.quantized import run_first_frames

    return run_first_frames(model, frame[None])[0]


def kat_matches(manifest: Manifest, weights: dict[str, NDArray[Any]], sample: NDArray[Any],
                expected: NDArray[Any]) -> bool:
    """Whether edgebuild's integer reference, run on `sample` with the imported weights and
    the device's rounding, gives `expected`."""
    import numpy as np

    out = reference_output(manifest, weights, sample)
    return bool(np.array_equal(out.reshape(-1), np.asarray(expected).reshape(-1)))
