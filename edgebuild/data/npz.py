"""npz: the user's own arrays in a NumPy .npz file.

Keys `x` and `y` (one pool, split by edgebuild), or `x_train`, `y_train`, `x_test`,
`y_test` (the user's split). x is (N, *sample_shape) numeric; y holds integer class labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from edgebuild.data.dataset import (
    CommonFields,
    DataFileError,
    FileRef,
    Probe,
    Raw,
    existing,
    ref_field,
    resolve,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    # x_train, y_train, x_test, y_test: the last two None when the file has one pool
    Arrays = tuple[NDArray[Any], NDArray[Any], NDArray[Any] | None, NDArray[Any] | None]


class NpzSpec(CommonFields):
    format: Literal["npz"]
    path: FileRef = Field(description="the .npz file, relative to the manifest")


def files(spec: NpzSpec, base: Path) -> list[Path]:
    return [existing(resolve(spec.path, base), ref_field("path", spec.path))]


def _arrays(path: Path) -> dict[str, NDArray[Any]]:
    from edgebuild.core import arrays

    try:
        data = arrays.read(path)
    except arrays.PickledData as exc:  # pickled data: never numpy's advice to allow it
        raise DataFileError(path, exc.reason) from None
    except (OSError, ValueError) as exc:  # arrays.read: an empty file, a broken archive too
        raise DataFileError(path, f"not a readable .npz file ({exc})") from None
    if not isinstance(data, dict):  # a single .npy array, not an archive
        raise DataFileError(path, "not a .npz archive (a single .npy array? save named "
                                  "arrays with numpy.savez)")
    return data


def _pick(path: Path, arrays: dict[str, NDArray[Any]]) -> Arrays:
    if {"x_train", "y_train", "x_test", "y_test"} <= arrays.keys():
        return arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"]
    if {"x", "y"} <= arrays.keys():
        return arrays["x"], arrays["y"], None, None
    raise DataFileError(path, f"needs arrays x, y (or x_train, y_train, x_test, y_test); "
                              f"found {sorted(arrays)}")


def _labels(path: Path, name: str, x: NDArray[Any], y: NDArray[Any]) -> None:
    import numpy as np

    if x.ndim < 2 or not np.issubdtype(x.dtype, np.number):
        raise DataFileError(path, f"{name}: x must be numeric with shape (N, ...), got "
                                  f"{x.dtype} {list(x.shape)}")
    if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
        raise DataFileError(path, f"{name}: y must be integer labels of shape ({len(x)},), "
                                  f"got {y.dtype} {list(y.shape)}")
    if not np.isfinite(x).all():
        raise DataFileError(path, f"{name}: x contains NaN or infinite values")


def load(spec: NpzSpec, base: Path) -> Raw:
    import numpy as np

    path = files(spec, base)[0]
    x_train, y_train, x_test, y_test = _pick(path, _arrays(path))
    _labels(path, "train", x_train, y_train)
    if x_test is not None and y_test is not None:
        _labels(path, "test", x_test, y_test)
        if x_test.shape[1:] != x_train.shape[1:]:
            raise DataFileError(path, f"x_test samples {list(x_test.shape[1:])} differ from "
                                      f"x_train samples {list(x_train.shape[1:])}")
    classes = np.unique(y_train)
    index = {int(c): i for i, c in enumerate(classes)}
    def remap(y: NDArray[Any]) -> NDArray[np.int64]:
        unknown = sorted(set(np.unique(y).tolist()) - index.keys())
        if unknown:
            raise DataFileError(path, f"test labels {unknown[:5]} never occur in training data")
        return np.array([index[int(v)] for v in y], dtype=np.int64)
    return Raw(x_train.astype(np.float64), remap(y_train),
               None if x_test is None else x_test.astype(np.float64),
               None if y_test is None else remap(y_test),
               tuple(str(int(c)) for c in classes))


def probe(spec: NpzSpec, base: Path) -> Probe:
    raw = load(spec, base)
    return Probe(tuple(int(d) for d in raw.x_train.shape[1:]), len(raw.class_names))


Spec = NpzSpec  # the registry's name for a format's manifest section
