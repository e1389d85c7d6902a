"""NumPy files in and out: every .npy/.npz edgebuild reads goes through `read`.

Deterministic .npz files: the same arrays always give the same bytes. `numpy.savez` stamps
the current time into every zip entry, so two identical builds would produce different
artifact digests (and downstream stages would rebuild for nothing). Entries here have a
fixed timestamp, sorted names and no compression randomness.

Reading never unpickles: a file holding Python objects is a `PickledData` error that names
the file (and array) and says how to save plain arrays. numpy's own text for it invites
the user to "load it unsafely using allow_pickle=", which edgebuild never passes on.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy loads on first use: importing edgebuild stays cheap
    from numpy.typing import ArrayLike, NDArray

FIXED_TIME = (1980, 1, 1, 0, 0, 0)
NPY_MAGIC = b"\x93NUMPY"  # what a .npy file starts with
PICKLE_PROTOCOL_2 = b"\x80"  # the first byte of a pickle of protocol 2 or later
REFUSED = "which edgebuild never loads: unpickling can run arbitrary code"
PLAIN_NPZ = "np.savez(path, x=x.astype(np.float32), y=y.astype(np.int64))"
PLAIN_NPY = "np.save(path, a.astype(np.int64))"
MAX_ARRAY_BYTES = 4 * 1024**3  # one array: Fashion-MNIST's 60000 images are 47 MB as uint8


class PickledData(ValueError):
    """A .npy/.npz file that holds Python objects, which edgebuild never unpickles.
    `reason` names the array (when known) and says what to do; str() is `<file>: <reason>`."""

    def __init__(self, file: str, reason: str) -> None:
        self.file, self.reason = file, reason
        super().__init__(f"{file}: {reason}")


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


def read(source: Path | IO[bytes]) -> NDArray[Any] | dict[str, NDArray[Any]]:
    """The one `np.load` of edgebuild: a .npy file's array, or every array of a .npz
    archive by name (all read here, so that each is checked). Python objects are a
    PickledData error; an unreadable file a ValueError in edgebuild's words (an empty
    file and a broken archive included), an I/O failure an OSError."""
    import numpy as np

    name = None
    try:
        _check_npy(source)
        loaded = np.load(source, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            return loaded
        with loaded:
            arrays = {}
            archive = loaded.zip
            assert archive is not None  # an NpzFile open for reading holds its archive
            for name in loaded.files:
                _check_size(archive.getinfo(f"{name}.npy").file_size,
                            f"array {name!r} unpacks to")
                arrays[name] = loaded[name]
            return arrays
    except ValueError as exc:
        if "pickle" not in str(exc):  # numpy's object-array and not-a-NumPy-file errors
            raise
        raise _refused(source, name) from None
    except EOFError:
        raise ValueError("the file is empty") from None
    except zipfile.BadZipFile as exc:
        raise ValueError(f"a broken .npz (zip) archive: {exc}") from None


def _check_npy(source: Path | IO[bytes]) -> None:
    """A .npy header declares its array's shape, and numpy allocates that much before it
    reads the data: a 100-byte file declaring 10^11 floats asked for 373 GiB (MemoryError,
    an internal error). The declared size must fit MAX_ARRAY_BYTES and the file."""
    import numpy as np

    handle = open(source, "rb") if isinstance(source, str | os.PathLike) else source  # noqa: SIM115
    start = handle.tell()
    try:
        if handle.read(len(NPY_MAGIC)) != NPY_MAGIC:
            return  # an .npz, or no NumPy file: np.load says which
        handle.seek(start)
        version = np.lib.format.read_magic(handle)
        reader = {(1, 0): np.lib.format.read_array_header_1_0,
                  (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if reader is None:
            return  # version 3.0 (utf-8 field names): np.load reads and checks it
        shape, _, dtype = reader(handle)
        declared = math.prod(shape) * dtype.itemsize
        data_start = handle.tell()
        size = handle.seek(0, io.SEEK_END) - data_start
    finally:
        if handle is not source:
            handle.close()
        else:
            handle.seek(start)
    _check_size(declared, "its header declares an array of")
    if not dtype.hasobject and declared > size:
        raise ValueError(f"its header declares {declared} bytes of data ({shape}, "
                         f"{dtype}) but the file holds {size}")


def _check_size(size: int, what: str) -> None:
    """An .npz member is decompressed whole: one that unpacks to more than MAX_ARRAY_BYTES
    (a zip bomb: gigabytes of zeros in a few kilobytes) is refused before it is read."""
    if size > MAX_ARRAY_BYTES:
        raise ValueError(f"{what} {size} bytes; edgebuild reads arrays of "
                         f"up to {MAX_ARRAY_BYTES} bytes (tiny-ML datasets and weights are "
                         "far smaller: subsample or split the data)")


def _refused(source: Path | IO[bytes], name: str | None) -> ValueError:
    """What numpy would only unpickle: a .npy or .npz entry of Python objects, a whole
    pickle, or no NumPy file at all (numpy tries any other file as a pickle)."""
    file = _name(source)
    head = b""
    if isinstance(source, Path) and name is None:
        try:
            with source.open("rb") as handle:
                head = handle.read(len(NPY_MAGIC))
        except OSError:
            pass
    npy = name is None and (head.startswith(NPY_MAGIC) or file.endswith(".npy"))
    advice = f"Save plain numeric arrays instead, e.g. {PLAIN_NPY if npy else PLAIN_NPZ}"
    if name is not None:
        return PickledData(file, f"array {name!r} holds Python objects (pickled data), "
                                 f"{REFUSED}. {advice}")
    if head.startswith(PICKLE_PROTOCOL_2):
        return PickledData(file, f"is a Python pickle (not a NumPy .npy/.npz file), "
                                 f"{REFUSED}. {advice}")
    if head.startswith(NPY_MAGIC) or not head:
        return PickledData(file, f"holds Python objects (pickled data), {REFUSED}. {advice}")
    return ValueError("neither a .npy array nor a .npz archive (what numpy.save and "
                      "numpy.savez write)")


def load(source: Path | IO[bytes]) -> dict[str, NDArray[Any]]:
    """The arrays of a .npz archive by name (see `read`)."""
    arrays = read(source)
    if not isinstance(arrays, dict):
        raise ValueError("a single .npy array, not a .npz archive of named arrays "
                         "(numpy.savez)")
    return arrays


def _name(source: Path | IO[bytes]) -> str:
    return str(source) if isinstance(source, Path) else str(getattr(source, "name", "<bytes>"))
