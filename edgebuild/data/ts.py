"""ts: the UCR/UEA time-series text format (as shipped in the aeon wheel).

Header lines start with `@` (case-insensitive keys); after `@data`, one series per line:
dimensions separated by `:`, values by `,`, the class label last. Only equal-length
series are supported (a model input has one fixed length). Samples are (dimensions, length).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

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


class TsSpec(CommonFields):
    format: Literal["ts"]
    train: FileRef
    test: FileRef | None = Field(default=None, description="omit to split off a test set")


def files(spec: TsSpec, base: Path) -> list[Path]:
    refs = {"train": spec.train, **({"test": spec.test} if spec.test is not None else {})}
    return [existing(resolve(ref, base), ref_field(name, ref)) for name, ref in refs.items()]


def _read_text(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="strict").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFileError(path, f"cannot read .ts file ({exc})") from None


def _header(path: Path, lines: list[str]) -> tuple[tuple[str, ...], int]:
    """Class labels from `@classLabel true ...` and the index of the first data line."""
    labels: tuple[str, ...] = ()
    for number, line in enumerate(lines):
        words = line.strip().split()
        if not words or words[0].startswith("#"):
            continue
        key = words[0].lower()
        if key == "@classlabel":
            if len(words) < 3 or words[1].lower() != "true":
                raise DataFileError(path, "this .ts file has no class labels (@classLabel false)")
            labels = tuple(words[2:])
        elif key == "@data":
            if not labels:
                raise DataFileError(path, "missing @classLabel header before @data")
            return labels, number + 1
    raise DataFileError(path, "no @data section")


def _series(path: Path, number: int, line: str) -> tuple[list[list[float]], str]:
    *dims, label = line.split(":")
    if not dims:
        raise DataFileError(path, f"line {number + 1}: expected values:...:label, found no ':'")
    try:
        values = [[float(v) for v in dim.split(",")] for dim in dims]
    except ValueError:
        raise DataFileError(path, f"line {number + 1}: non-numeric or missing ('?') value; "
                                  "missing values are not supported") from None
    return values, label.strip()


def read(path: Path) -> tuple[NDArray[np.float64], NDArray[np.int64], tuple[str, ...]]:
    import numpy as np

    lines = _read_text(path)
    labels, start = _header(path, lines)
    xs: list[NDArray[np.float64]] = []
    ys: list[int] = []
    for number in range(start, len(lines)):
        if not lines[number].strip():
            continue
        values, label = _series(path, number, lines[number])
        if label not in labels:
            raise DataFileError(path, f"line {number + 1}: label {label!r} is not one of {list(labels)}")
        if {len(v) for v in values} != {len(values[0])} or (xs and (
                len(values), len(values[0])) != xs[0].shape):
            raise DataFileError(path, f"line {number + 1}: series lengths/dimensions differ; only "
                                      "equal-length series are supported (use an _eq variant)")
        xs.append(np.array(values, dtype=np.float64))
        ys.append(labels.index(label))
    if not xs:
        raise DataFileError(path, "no series after @data")
    return np.stack(xs), np.array(ys, dtype=np.int64), labels


def load(spec: TsSpec, base: Path) -> Raw:
    paths = files(spec, base)
    x_train, y_train, labels = read(paths[0])
    if len(paths) == 1:
        return Raw(x_train, y_train, None, None, labels)
    x_test, y_test, test_labels = read(paths[1])
    if test_labels != labels or x_test.shape[1:] != x_train.shape[1:]:
        raise DataFileError(paths[1], "test file's labels or series shape differ from the train file")
    return Raw(x_train, y_train, x_test, y_test, labels)


def probe(spec: TsSpec, base: Path) -> Probe:
    raw_x, _, labels = read(files(spec, base)[0])
    return Probe(tuple(int(d) for d in raw_x.shape[1:]), len(labels))


Spec = TsSpec  # the registry's name for a format's manifest section
