"""idx: MNIST-format files (optionally gzip-compressed), e.g. Debian's dataset-fashion-mnist.

Header: two zero bytes, a type code, the number of dimensions, then each dimension as a
big-endian uint32. Images (N, H, W) become samples of shape (1, H, W).
"""

from __future__ import annotations

import gzip
import io
import struct
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

TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxSpec(CommonFields):
    format: Literal["idx"]
    train_images: FileRef
    train_labels: FileRef
    test_images: FileRef | None = Field(default=None, description="omit to split off a test set")
    test_labels: FileRef | None = None


def _refs(spec: IdxSpec) -> dict[str, FileRef]:
    """The files by field, in the order `load` reads them."""
    refs = {"train_images": spec.train_images, "train_labels": spec.train_labels}
    if (spec.test_images is None) != (spec.test_labels is None):
        raise DataFileError("dataset", "give both test_images and test_labels, or neither")
    if spec.test_images is not None and spec.test_labels is not None:
        refs |= {"test_images": spec.test_images, "test_labels": spec.test_labels}
    return refs


def files(spec: IdxSpec, base: Path) -> list[Path]:
    return [existing(resolve(ref, base), ref_field(name, ref))
            for name, ref in _refs(spec).items()]


def _open(path: Path) -> io.BufferedIOBase:
    with open(path, "rb") as handle:
        compressed = handle.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if compressed else open(path, "rb")


def _header(path: Path, handle: io.BufferedIOBase) -> tuple[str, tuple[int, ...]]:
    head = handle.read(4)
    if len(head) != 4 or head[:2] != b"\0\0" or head[2] not in TYPES or head[3] == 0:
        raise DataFileError(path, "not an idx file (bad magic number)")
    dims = handle.read(4 * head[3])
    if len(dims) != 4 * head[3]:
        raise DataFileError(path, "truncated idx header")
    return TYPES[head[2]], struct.unpack(f">{head[3]}I", dims)


def read(path: Path) -> NDArray[Any]:
    import numpy as np

    try:
        with _open(path) as handle:
            dtype, shape = _header(path, handle)
            body = handle.read()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise DataFileError(path, f"cannot read idx file ({exc})") from None
    count = int(np.prod(shape))
    if len(body) != count * np.dtype(dtype).itemsize:
        raise DataFileError(path, f"header says {list(shape)} ({count} values) but the body has "
                                  f"{len(body)} bytes")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def _sample_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1, *shape[1:]) if len(shape) == 3 else tuple(shape[1:])


def _pair(images: Path, labels: Path) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    import numpy as np

    x, y = read(images), read(labels)
    if y.ndim != 1 or len(y) != len(x):
        raise DataFileError(labels, f"expected {len(x)} labels (one per image in {images.name}), "
                                    f"got shape {list(y.shape)}")
    return x.reshape(len(x), *_sample_shape(x.shape)).astype(np.float64), y.astype(np.int64)


def load(spec: IdxSpec, base: Path) -> Raw:
    import numpy as np

    paths = files(spec, base)
    x_train, y_train = _pair(paths[0], paths[1])
    x_test, y_test = _pair(paths[2], paths[3]) if len(paths) == 4 else (None, None)
    classes = np.unique(y_train)
    if y_test is not None and not set(np.unique(y_test)) <= set(classes):
        raise DataFileError(paths[3], "test labels include classes never seen in training")
    remap = np.searchsorted(classes, y_train), None if y_test is None else np.searchsorted(
        classes, y_test)
    return Raw(x_train, remap[0], x_test, remap[1], tuple(str(int(c)) for c in classes))


def probe(spec: IdxSpec, base: Path) -> Probe:
    import numpy as np

    paths = files(spec, base)
    with _open(paths[0]) as handle:
        _, shape = _header(paths[0], handle)
    return Probe(_sample_shape(shape), len(np.unique(read(paths[1]))))


Spec = IdxSpec  # the registry's name for a format's manifest section
