"""The weight-only file (.wof): the trainable float32 weights of one model, versioned.

The device loads it at start and saves its updated weights back into it. Frozen weights
are compiled into the firmware and are not in it. Format version 1. Every field is
little-endian and is written byte by byte, so a big-endian host reads and writes the same
bytes:

    offset  size  field
    0       4     magic  "EBWF" (bytes 0x45 0x42 0x57 0x46)
    4       2     version (u16) = 1
    6       2     reserved (u16) = 0
    8       4     tensor count N (u32)
    12      4     total file size in bytes (u32)
    16      4     layout id (u32)
    20      4     crc32 (IEEE 802.3, same as zlib.crc32) of bytes [24, size)
    24      8*N   table: per tensor {u32 offset from file start, u32 element count};
                  offset 0xFFFFFFFF and count 0 = tensor absent
    ...           data: float32 LE, each tensor at a 4-byte aligned offset, in table
                  order, no gaps other than alignment

Why each field exists:
- magic: something that is not a .wof (another binary, an erased flash page of 0xFF) is
  refused at the first four bytes instead of being loaded as weights.
- version: a later change of the format bumps it; a reader refuses a version it does not
  know rather than misread it.
- reserved: room for a future flag. Readers reject a non-zero value, so an older reader
  never silently ignores a flag that changes what the file means.
- tensor count: the length of the table, cross-checked against the model's tensor list.
- total size: a file cut short (a save interrupted by a reset) or padded (a whole flash
  sector read back) is refused, and the crc is computed over the right range.
- layout id: the first 4 bytes of sha256 of the model's [name, shape] list
  (`layout_id`). A file written for another model (other names, shapes or order) is
  refused even when its sizes happen to match.
- crc32: flipped bits and half-written data. It covers the table and the data; each
  header field before it is checked on its own against a known value instead.
- table: one offset and element count per tensor, so a reader checks each tensor's place
  and size on its own. An absent tensor (offset 0xFFFFFFFF, count 0) keeps its current
  value when loaded: a partial save (only the layers that trained) is a valid file.
- data alignment: float32 at 4-byte aligned offsets, so a little-endian device may also
  use the data in place (memory-mapped flash). The header and table sizes and the data
  are all multiples of 4, so a writer never needs padding today; readers still check.

The C reader and writer (templates/train/eb_wof.c) implement the same format and make the
same checks in the same order (see `decode`). Their status codes match the Python
messages: short, magic, version, reserved, size, crc, layout, count, tensor.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

from edgebuild.core import boundedjson
from edgebuild.core.errors import Diagnostic, UserError

MAGIC = b"EBWF"
VERSION = 1
HEADER = struct.Struct("<4sHHIIII")  # magic, version, reserved, count, size, layout, crc
ENTRY = struct.Struct("<II")  # offset, element count
ABSENT = 0xFFFFFFFF  # table offset of an absent tensor (its count is 0)
ALIGN = 4
FLOAT = np.dtype("<f4")
U32_MAX = 0xFFFFFFFF

Layout = list[tuple[str, tuple[int, ...]]]


@dataclass(frozen=True)
class FileLayout:
    """A weight-only file's layout: its id and the tensors in table order (`layout.json` of
    the `ondevice` stage, schema schemas/artifacts/layout.v1.schema.json)."""

    layout_id: int
    tensors: tuple[tuple[str, tuple[int, ...]], ...]

    @classmethod
    def of(cls, tensors: Layout) -> FileLayout:
        return cls(layout_id(tensors), tuple((name, tuple(shape)) for name, shape in tensors))

    def layout(self) -> Layout:
        return list(self.tensors)

    def to_json(self) -> dict[str, Any]:
        return {"layout_id": self.layout_id,
                "tensors": [[name, list(shape)] for name, shape in self.tensors]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileLayout:
        return cls(data["layout_id"], tuple((name, tuple(shape)) for name, shape in
                                            data["tensors"]))

    @classmethod
    def load(cls, directory: Path) -> FileLayout:
        return cls.from_json(boundedjson.read(directory / "layout.json"))


class Header(NamedTuple):
    magic: bytes
    version: int
    reserved: int
    # the format's "tensor count" field; it hides tuple.count, which nothing here calls
    count: int  # type: ignore[assignment]
    size: int
    layout: int
    crc: int


def layout_id(tensors: Layout) -> int:
    """Identity of a model's trainable tensor list: the first 4 bytes (little-endian u32) of
    sha256 of the canonical JSON of [[name, shape], ...] (sorted keys, compact separators,
    ASCII escapes). Order matters: the table is in this order."""
    canonical = json.dumps([[name, [int(d) for d in shape]] for name, shape in tensors],
                           sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(canonical.encode("ascii")).digest()[:4], "little")


# ---- writing ----------------------------------------------------------------------------

def encode(tensors: Sequence[NDArray[np.floating[Any]] | None], layout: int) -> bytes:
    """The .wof bytes of `tensors` (None = absent), in order, tagged with `layout`."""
    if not 0 <= layout <= U32_MAX:
        raise ValueError(f"layout id {layout} is not a u32")
    arrays = [None if t is None else np.ascontiguousarray(t, dtype=FLOAT) for t in tensors]
    end = HEADER.size + ENTRY.size * len(arrays)
    table, data = [], []
    for array in arrays:
        if array is None:
            table.append(ENTRY.pack(ABSENT, 0))
            continue
        offset = _aligned(end)
        data += [bytes(offset - end), array.tobytes()]
        table.append(ENTRY.pack(offset, array.size))
        end = offset + array.nbytes
    if end > U32_MAX:
        raise ValueError(f"{end} bytes of weights do not fit a .wof (at most 4 GiB)")
    body = b"".join(table + data)
    header = HEADER.pack(MAGIC, VERSION, 0, len(arrays), end, layout, zlib.crc32(body))
    return header + body


def write(path: str | os.PathLike[str], tensors: Sequence[NDArray[np.floating[Any]] | None],
          layout: int) -> None:
    """Write atomically: a temp file in the same directory, synced, then renamed over
    `path`. Readers see the old file or the new one, never a half-written one (and a stray
    half-written temp file has another name, so it is never taken for the weights)."""
    data = encode(tensors, layout)
    path = Path(path)
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


# ---- reading ----------------------------------------------------------------------------

def read(path: str | os.PathLike[str], expected: Layout) -> list[NDArray[np.float32] | None]:
    """`decode` of the file at `path`; errors name the file as given."""
    source = str(path)
    most = HEADER.size + ENTRY.size * len(expected) + sum(
        FLOAT.itemsize * math.prod(shape) + ALIGN for _, shape in expected)
    try:
        with open(path, "rb") as handle:  # no more than the layout can hold, and one byte
            data = handle.read(most + 1)
        if len(data) > most:
            _fail(source, f"larger than the {most} bytes this model's trainable tensors need "
                  "(not its weight file)")
    except FileNotFoundError:
        _fail(source, "weight file not found")
    except OSError as exc:
        _fail(source, f"cannot be read: {exc.strerror or exc}")
    return decode(data, expected, source)


def decode(data: bytes, expected: Layout, source: str) -> list[NDArray[np.float32] | None]:
    """The tensors of a .wof written for the model whose trainable tensors are `expected`
    ([(name, shape), ...]): float32 arrays in the expected shapes, None where absent.

    Checks, in this order, and the first failure raises a UserError naming `source`:
    file shorter than the header; magic; version; reserved; size field against the actual
    length; crc; layout id; tensor count; table inside the file; then per table entry:
    absent marker with count 0, offset inside the data area, offset aligned, element count
    equal to the expected size, data inside the file, no overlap with the previous tensor
    (data is in table order)."""
    data = bytes(data)
    header = _header(data, source)
    _check_header(header, data, expected, source)
    _check_table_fits(header.count, len(data), source)
    entries = [ENTRY.unpack_from(data, HEADER.size + ENTRY.size * i)
               for i in range(header.count)]
    _check_entries(entries, expected, len(data), source)
    return [None if offset == ABSENT else
            np.frombuffer(data, FLOAT, count, offset).astype(np.float32).reshape(shape)
            for (offset, count), (_, shape) in zip(entries, expected, strict=True)]


def _fail(source: str, message: str) -> NoReturn:
    raise UserError(Diagnostic(source, message))


def _header(data: bytes, source: str) -> Header:
    if len(data) < HEADER.size:
        _fail(source, f"file is {len(data)} bytes, shorter than the {HEADER.size}-byte header")
    return Header(*HEADER.unpack_from(data))


def _check_header(header: Header, data: bytes, expected: Layout, source: str) -> None:
    if header.magic != MAGIC:
        _fail(source, f"magic is {header.magic.hex(' ')} ({_printable(header.magic)}), "
                      f"expected {MAGIC.hex(' ')} (EBWF): not an edgebuild weight file")
    if header.version != VERSION:
        _fail(source, f"version is {header.version}, this edgebuild reads version {VERSION}")
    if header.reserved != 0:
        _fail(source, f"reserved field is {header.reserved}, expected 0 (a flag this "
                      "edgebuild does not know)")
    if header.size != len(data):
        _fail(source, f"size field is {header.size} bytes, the file is {len(data)} bytes "
                      "(truncated or padded)")
    actual = zlib.crc32(data[HEADER.size:])
    if header.crc != actual:
        _fail(source, f"crc32 is 0x{header.crc:08x}, the content gives 0x{actual:08x} "
                      "(corrupted or half-written)")
    wanted = layout_id(expected)
    if header.layout != wanted:
        _fail(source, f"layout id is 0x{header.layout:08x}, expected 0x{wanted:08x}: the "
                      "file is for another model's tensor list (names, shapes or order)")
    if header.count != len(expected):
        _fail(source, f"tensor count is {header.count}, expected {len(expected)}")


def _check_table_fits(count: int, length: int, source: str) -> None:
    need = HEADER.size + ENTRY.size * count
    if length < need:
        _fail(source, f"file is {length} bytes, shorter than its header and table of "
                      f"{count} tensors ({need} bytes)")


def _check_entries(entries: list[tuple[int, int]], expected: Layout, size: int,
                   source: str) -> None:
    data_start = HEADER.size + ENTRY.size * len(entries)
    previous_end = data_start
    for index, ((offset, count), (name, shape)) in enumerate(zip(entries, expected,
                                                                  strict=True)):
        problem = _entry_problem(offset, count, int(np.prod(shape, dtype=np.int64)),
                                 data_start, size, previous_end)
        if problem:
            _fail(source, f"tensor {index} ({name}): {problem}")
        if offset != ABSENT:
            previous_end = offset + 4 * count


def _entry_problem(offset: int, count: int, wanted: int, data_start: int, size: int,
                   previous_end: int) -> str | None:
    """What is wrong with one table entry, or None; the C reader checks in this order."""
    if offset == ABSENT:
        return None if count == 0 else (f"offset 0xffffffff marks the tensor absent, but its "
                                        f"element count is {count}, expected 0")
    if not data_start <= offset <= size:
        return f"offset is {offset}, outside the data area [{data_start}, {size}]"
    if offset % ALIGN:
        return f"offset is {offset}, not {ALIGN}-byte aligned"
    if count != wanted:
        return (f"element count is {count}, expected {wanted} (or 0 with offset 0xffffffff "
                "for an absent tensor)")
    if offset + 4 * count > size:
        return f"data [{offset}, {offset + 4 * count}) runs past the end of the file ({size} bytes)"
    if offset < previous_end:
        return (f"offset is {offset}, overlapping the previous tensor's data, which ends at "
                f"{previous_end} (data is in table order)")
    return None


def _printable(raw: bytes) -> str:
    return repr(raw.decode("latin-1"))


# ---- inspection -------------------------------------------------------------------------

def describe(data: bytes, source: str = "<wof data>") -> dict[str, Any]:
    """The raw header fields and table of a .wof, without validating them (a dump for
    humans, useful on a damaged file too). Only table entries inside the data are listed.
    Raises a UserError only when there is no full header to show."""
    data = bytes(data)
    header = _header(data, source)
    fits = max(0, min(header.count, (len(data) - HEADER.size) // ENTRY.size))
    entries = [ENTRY.unpack_from(data, HEADER.size + ENTRY.size * i) for i in range(fits)]
    return {
        "magic": header.magic.decode("latin-1"),
        "version": header.version,
        "reserved": header.reserved,
        "tensor_count": header.count,
        "size": header.size,
        "actual_size": len(data),
        "layout_id": header.layout,
        "crc32": header.crc,
        "actual_crc32": zlib.crc32(data[HEADER.size:]),
        "tensors": [{"index": i, "absent": offset == ABSENT, "offset": offset, "count": count}
                    for i, (offset, count) in enumerate(entries)],
    }
