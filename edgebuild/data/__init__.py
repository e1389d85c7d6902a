"""Datasets, by file format: each format module gives its manifest section (`Spec`), the
files it reads (`files`, keying the cache), a cheap `probe` for `check` (sample shape,
classes) and `load`; `FORMATS` is the registry (`format:` name -> module).

May import: core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from edgebuild.data import digits, emg, idx, npz, ts
from edgebuild.data.dataset import Format

FORMATS: dict[str, Format[Any]] = {
    "sklearn-digits": digits,
    "npz": npz,
    "idx": idx,
    "ts": ts,
    "synthetic-emg": emg,
}

if TYPE_CHECKING:
    # mypy cannot evaluate the union built from the registry below: the same formats, listed
    # (tests/test_typing.py checks that this list and FORMATS agree).
    DatasetSpec = Annotated[
        digits.DigitsSpec | npz.NpzSpec | idx.IdxSpec | ts.TsSpec | emg.EmgSpec,
        Field(discriminator="format"),
    ]
else:
    DatasetSpec = Annotated[
        Union[tuple(module.Spec for module in FORMATS.values())],  # noqa: UP007 - from the registry
        Field(discriminator="format"),
    ]
