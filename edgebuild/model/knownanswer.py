"""A known answer supplied with the model (manifest `kat`): inputs and expected outputs.

Typically another toolchain's sample input and the output its own generator computed (the
MAX7800x synthesis tool's `sample.npy` and known answer). One sample may be given without
a batch axis; values must already be int8 Q7 inputs ([-128, 127]), since the other
toolchain normalized them. The expected outputs are the last layer's raw integers.

For a model with a buffer a sample is a clip of its window's frames — or one frame of
`model.input`, meaning the first inference after a reset: the window holds zeros and this
frame's features (quantized.run_first_frames). That is the MAX7800x tool's sample for such
a model. Such a known answer is checked as it is (the C's KAT vector is that one frame, the
accelerator program's sample data too); the evaluation and the host batch run, which take
whole clips, run the clip of that frame repeated (`evaluation_inputs`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from edgebuild.core.geometry import Shape
from edgebuild.model import graph as graphs

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.manifest import Kat, Manifest

    Known = tuple[NDArray[np.int64], NDArray[np.int64] | None]  # (inputs, expected or None)


class Checked(Protocol):
    """What this module reads of a checked manifest (pipeline.validation.Checked, which
    `model` cannot import)."""

    @property
    def manifest(self) -> Manifest: ...

    @property
    def graph(self) -> graphs.Graph: ...

    @property
    def base(self) -> Path: ...


class KatFileError(ValueError):
    """A kat file is unreadable or does not fit the model; the message says why."""


def _read(path: Path) -> NDArray[np.int64]:
    import numpy as np

    from edgebuild.core import arrays

    try:
        values = arrays.read(path)
    except arrays.PickledData as exc:  # pickled data: never numpy's advice to allow it
        raise KatFileError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise KatFileError(f"{path}: cannot read a .npy array ({exc})") from None
    if isinstance(values, dict):
        raise KatFileError(f"{path}: a .npz archive; a known answer is one .npy array "
                           "(numpy.save)")
    if values.dtype.kind not in "iu" and not (values.dtype.kind == "f" and
                                               np.array_equal(values, np.round(values))):
        raise KatFileError(f"{path}: expected integers, got {values.dtype}")
    return values.astype(np.int64)


def read(base: Path, kat: Kat, input_shape: Shape, output_shape: Shape,
         frame: Shape | None = None) -> Known:
    """(inputs (N, *input_shape), expected (N, prod(output_shape)) or None), checked; for a
    model with a buffer (`frame`: its model.input) also one frame: inputs (1, *frame)."""
    x = _read(base / kat.input)
    shape = tuple(input_shape)
    if x.shape == shape or (frame is not None and x.shape == tuple(frame)):
        x = x[None]
    if x.shape[1:] != shape and not (frame is not None and x.shape[1:] == tuple(frame)
                                     and len(x) == 1):
        also = "" if frame is None else f" nor one frame {list(frame)} (the first inference " \
                                         "after a reset)"
        raise KatFileError(f"{kat.input}: shape {list(x.shape)} is neither one sample "
                           f"{list(shape)} nor a batch [N, {', '.join(map(str, shape))}]{also}")
    if x.min() < -128 or x.max() > 127:
        raise KatFileError(f"{kat.input}: values {int(x.min())}..{int(x.max())} are outside "
                           "the int8 input range [-128, 127]")
    if kat.expected is None:
        return x, None
    y = _read(base / kat.expected)
    size = math.prod(output_shape)
    if y.size != len(x) * size:
        raise KatFileError(f"{kat.expected}: {y.size} values, but {len(x)} sample(s) of the "
                           f"model's output {list(output_shape)} need {len(x) * size}")
    return x, y.reshape(len(x), size)


def load(checked: Checked) -> Known | None:
    """The manifest's known answer (inputs, expected or None); None when it has none."""
    kat = checked.manifest.kat
    if kat is None:
        return None
    return read(checked.base, kat, *shapes(checked.manifest, checked.graph))


def shapes(manifest: Manifest, graph: graphs.Graph) -> tuple[Shape, Shape, Shape | None]:
    """`read`'s shapes: a sample's, the output's, and a frame's for a model with a buffer."""
    layers = manifest.model.layers
    frame = tuple(manifest.model.input) if graphs.frames(layers) > 1 else None
    return (graphs.sample_shape(manifest.model.input, layers), tuple(graph.output.out_shape),
            frame)


def clips(checked: Checked, x: NDArray[np.integer[Any]]) -> NDArray[np.integer[Any]]:
    """Known-answer inputs as whole samples: one frame of a model with a buffer becomes the
    clip of that frame repeated (a stream the C and the reference window alike)."""
    import numpy as np

    frames = graphs.frames(checked.manifest.model.layers)
    if frames == 1 or x.ndim != len(checked.manifest.model.input) + 1:
        return x
    return np.repeat(x[:, None], frames, axis=1)


def vectors(checked: Checked, inputs: dict[str, Path],
            count: int) -> tuple[NDArray[np.integer[Any]], NDArray[np.integer[Any]]]:
    """The vectors the generated C checks itself with: the supplied known answer when the
    manifest has one (expected = the other toolchain's outputs, or the reference's), else
    the first `count` test samples with the integer reference's outputs."""
    from edgebuild.core import arrays

    outputs = arrays.load(inputs["evaluate"] / "reference_outputs.npz")
    known = load(checked)
    if known is not None:
        x, expected = known
        return x, outputs["kat_outputs"] if expected is None else expected
    x_test = arrays.load(inputs["data"] / "data.npz")["x_test"]
    reference = outputs["outputs"]
    count = min(count, len(reference))
    return x_test[:count], reference[:count]


def evaluation_inputs(checked: Checked, inputs: dict[str, Path]) -> NDArray[np.integer[Any]]:
    """The inputs the evaluate stage ran the reference on (its `outputs`)."""
    from edgebuild.core import arrays

    if "data" in inputs:
        return arrays.load(inputs["data"] / "data.npz")["x_test"]
    known = load(checked)
    assert known is not None  # validation requires a known answer of a model without a dataset
    return clips(checked, known[0])


def files(checked: Checked) -> list[Path]:
    kat = checked.manifest.kat
    if kat is None:
        return []
    return [checked.base / kat.input] + ([] if kat.expected is None else
                                          [checked.base / kat.expected])
