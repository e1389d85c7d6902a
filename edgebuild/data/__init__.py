"""Datasets, by file format: each format module gives its manifest section (`Spec`), the
files it reads (`files`, keying the cache), a cheap `probe` for `check` (sample shape,
classes) and `load`; `FORMATS` is the registry (`format:` name -> module).

May import: core.
"""

from __future__ import annotations

from types import ModuleType
from typing import Annotated, Union

from pydantic import Field

from edgebuild.data import digits, idx, npz, ts

FORMATS: dict[str, ModuleType] = {
    "sklearn-digits": digits,
    "npz": npz,
    "idx": idx,
    "ts": ts,
}

DatasetSpec = Annotated[
    Union[tuple(module.Spec for module in FORMATS.values())],  # noqa: UP007 - from the registry
    Field(discriminator="format"),
]
