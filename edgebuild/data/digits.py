"""sklearn-digits: the 1797 8x8 handwritten digits that ship inside scikit-learn.

Read straight from the package's `digits.csv.gz` (64 pixel values 0..16, then the label),
so neither `check` nor a build pays for importing scikit-learn.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Literal

from edgebuild.data.dataset import (
    CommonFields,
    DataFileError,
    PackageFile,
    Probe,
    Raw,
    existing,
    resolve,
)

FILE = PackageFile(package="sklearn", path="datasets/data/digits.csv.gz")


class DigitsSpec(CommonFields):
    format: Literal["sklearn-digits"]


def files(spec: DigitsSpec, base: Path) -> list[Path]:
    return [existing(resolve(FILE, base))]


def probe(spec: DigitsSpec, base: Path) -> Probe:
    files(spec, base)
    return Probe((1, 8, 8), 10)


def load(spec: DigitsSpec, base: Path) -> Raw:
    import numpy as np

    path = files(spec, base)[0]
    try:
        with gzip.open(path, "rt") as handle:
            table = np.loadtxt(handle, delimiter=",", dtype=np.float64)
    except (OSError, ValueError) as exc:
        raise DataFileError(path, f"cannot read digits table: {exc}") from None
    if table.ndim != 2 or table.shape[1] != 65:
        raise DataFileError(path, f"expected 65 columns, found shape {table.shape}")
    x = table[:, :64].reshape(-1, 1, 8, 8)
    y = table[:, 64].astype(np.int64)
    return Raw(x, y, None, None, tuple(str(i) for i in range(10)))


Spec = DigitsSpec  # the registry's name for a format's manifest section
