"""Deterministic .npz files: the same arrays always give the same bytes.

`numpy.savez` stamps the current time into every zip entry, so two identical builds would
produce different artifact digests (and downstream stages would rebuild for nothing).
Entries here have a fixed timestamp, sorted names and no compression randomness.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads on first use: importing edgebuild stays cheap
    from numpy.typing import ArrayLike, NDArray

FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def save(path: Path, **arrays: ArrayLike) -> None:
    import numpy as np

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(arrays[name], order="C"),
                                      allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, buffer.getvalue())


def load(path: Path) -> dict[str, NDArray[Any]]:
    import numpy as np

    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}
