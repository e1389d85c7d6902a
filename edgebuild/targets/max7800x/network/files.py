"""The files an import writes: all or none, never overwriting other content; the weights as
a deterministic .npz.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError

if TYPE_CHECKING:
    from numpy.typing import NDArray


def npz_bytes(weights: dict[str, NDArray[Any]]) -> bytes:
    """The deterministic .npz of `edgebuild.core.arrays.save`; if that writer turns the 0-d
    `bits`/`scale_exp` entries into shape (1,) (np.ascontiguousarray returns ndim >= 1), the
    same format written here with the shapes kept."""
    import zipfile

    import numpy as np

    from edgebuild.core import arrays

    buffer = io.BytesIO()
    # core.arrays.save is annotated with a Path, but zipfile writes to any binary file
    arrays.save(buffer, **weights)  # type: ignore[arg-type]
    written = arrays.load(io.BytesIO(buffer.getvalue()))
    if all(written[name].shape == np.shape(weights[name]) for name in weights):
        return buffer.getvalue()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(weights):
            entry = io.BytesIO()
            array = np.asarray(weights[name])
            np.lib.format.write_array(entry, array if array.flags.c_contiguous
                                      else np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=arrays.FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, entry.getvalue())
    return buffer.getvalue()


def write_all(outputs: dict[Path, bytes]) -> None:
    """Write every file, or none: an existing file with other content is never overwritten
    (delete it, or import under another name or directory)."""
    clashes = [path for path, data in outputs.items()
               if path.exists() and (not path.is_file() or path.read_bytes() != data)]
    if clashes:
        raise UserError([Diagnostic(str(path), "exists with other content; not overwritten "
                                               "(delete it, or choose another --name or -o)")
                         for path in clashes])
    for path, data in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            temp = path.with_name(f".{path.name}.tmp")
            temp.write_bytes(data)
            temp.replace(path)
