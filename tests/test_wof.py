"""The weight-only file (.wof): edgebuild/wof.py and templates/train/eb_wof.c.

Both readers and both writers against each other (Python and C write the same bytes), a
golden file written by hand from the format table (so the format cannot drift silently),
and every corruption case in both readers: the Python message names the field, the C
reader returns the matching status and leaves the destination weights untouched. The C
code is compiled once with gcc into a shared library under tmp and called through ctypes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgebuild.core.errors import UserError
from edgebuild.ondevice import wof

TRAIN = Path(__file__).resolve().parent.parent / "templates" / "train"
GCC = shutil.which("gcc")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
WARNINGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
            "-DEB_STANDALONE"]  # the bare library: plain names (eb_wof.h)
ARM_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]

STATUSES = ["OK", "SHORT", "MAGIC", "VERSION", "RESERVED", "SIZE", "CRC", "LAYOUT", "COUNT",
            "TENSOR", "CAPACITY"]  # eb_wof_status, in enum order
SENTINEL = np.float32(-1234.5)  # prefilled destinations: a failed read must not touch them
GUARD = 4  # sentinel floats after every destination: a read must not write past it

MODEL = [("conv.weight", (2, 1, 3)), ("conv.bias", (2,)), ("fc.weight", (3, 2)),
         ("fc.bias", (3,))]
OTHER = [("conv.weight", (2, 1, 3)), ("conv.bias", (2,)), ("fc.weight", (2, 3)),
         ("fc.bias", (3,))]  # same sizes, another shape: another model
SOURCE = "weights.wof"

U32 = ctypes.c_uint32
P_FLOAT = ctypes.POINTER(ctypes.c_float)
P_BYTE = ctypes.POINTER(ctypes.c_uint8)


def values(layout, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _, shape in layout]


BASE = wof.encode(values(MODEL), wof.layout_id(MODEL))  # offsets 56, 80, 88, 112; 124 bytes


# ---- the C library ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if GCC is None:
        pytest.skip("gcc is not on PATH: the C tests compile eb_wof.c")
    shared = tmp_path_factory.mktemp("eb_wof") / "libeb_wof.so"
    result = subprocess.run([GCC, *WARNINGS, "-shared", "-fPIC", str(TRAIN / "eb_wof.c"),
                             "-o", str(shared)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    so.eb_wof_read.argtypes = [P_BYTE, U32, U32, U32, ctypes.POINTER(U32),
                               ctypes.POINTER(P_FLOAT)]
    so.eb_wof_write.argtypes = [P_BYTE, U32, U32, U32, ctypes.POINTER(U32),
                                ctypes.POINTER(P_FLOAT), ctypes.POINTER(U32)]
    so.eb_wof_crc32.argtypes = [P_BYTE, U32]
    so.eb_wof_size.argtypes = [U32, ctypes.POINTER(U32)]
    so.eb_wof_message.argtypes = [ctypes.c_int]
    so.eb_wof_read.restype = so.eb_wof_write.restype = ctypes.c_int
    so.eb_wof_crc32.restype = so.eb_wof_size.restype = U32
    so.eb_wof_message.restype = ctypes.c_char_p
    return so


def sizes(layout) -> ctypes.Array:
    return (U32 * len(layout))(*(int(np.prod(shape)) for _, shape in layout))


def c_bytes(data: bytes) -> ctypes.Array:
    return (ctypes.c_uint8 * max(1, len(data))).from_buffer_copy(data or b"\0")


def c_read(lib, data: bytes, layout, previous=None, layout_id=None):
    """(status name, arrays) after eb_wof_read into destinations holding `previous` (or the
    sentinel), each followed by GUARD sentinels that must stay untouched."""
    previous = previous or [None] * len(layout)
    buffers = []
    for (_, shape), prev in zip(layout, previous, strict=True):
        buf = np.full(int(np.prod(shape)) + GUARD, SENTINEL, dtype=np.float32)
        if prev is not None:
            buf[:prev.size] = prev.ravel()
        buffers.append(buf)
    pointers = (P_FLOAT * len(layout))(*(b.ctypes.data_as(P_FLOAT) for b in buffers))
    layout_id = wof.layout_id(layout) if layout_id is None else layout_id
    status = lib.eb_wof_read(c_bytes(data), len(data), layout_id, len(layout), sizes(layout),
                             pointers)
    for buf in buffers:
        assert (buf[buf.size - GUARD:] == SENTINEL).all(), "eb_wof_read wrote past a tensor"
    arrays = [b[:b.size - GUARD].reshape(shape) for b, (_, shape) in zip(buffers, layout,
                                                                         strict=True)]
    return STATUSES[status], arrays


def c_write(lib, tensors, layout, capacity: int | None = None):
    """(status name, file bytes, untouched tail) of eb_wof_write; None tensors are absent."""
    arrays = [None if t is None else np.ascontiguousarray(t, dtype=np.float32)
              for t in tensors]
    pointers = (P_FLOAT * len(layout))(*(P_FLOAT() if a is None else a.ctypes.data_as(P_FLOAT)
                                         for a in arrays))
    capacity = lib.eb_wof_size(len(layout), sizes(layout)) if capacity is None else capacity
    buf = (ctypes.c_uint8 * (capacity + 16))(*([0xA5] * (capacity + 16)))
    written = U32(12345)
    status = lib.eb_wof_write(buf, capacity, wof.layout_id(layout), len(layout),
                              sizes(layout), pointers, ctypes.byref(written))
    raw = bytes(buf)
    assert raw[written.value:] == b"\xa5" * (len(raw) - written.value), "wrote past the file"
    return STATUSES[status], raw[:written.value]


def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Bit-identical (NaN payloads and -0.0 included), same shape."""
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.astype("<f4").tobytes() == b.astype("<f4").tobytes()


# ---- the format, pinned -----------------------------------------------------------------

GOLDEN_TENSORS = [np.array([1.0, -2.0]), None, np.array([[0.5]])]
GOLDEN_LAYOUT = 0x04030201
GOLDEN = bytes.fromhex(
    "45425746"  # magic EBWF
    "0100" "0000"  # version 1, reserved 0
    "03000000"  # 3 tensors
    "3c000000"  # 60 bytes: 24 header + 3 * 8 table + 3 floats
    "01020304"  # layout id 0x04030201
    "9ae83954"  # crc32 of bytes [24, 60) (zlib.crc32, checked below)
    "30000000" "02000000"  # tensor 0 at 48, 2 floats
    "ffffffff" "00000000"  # tensor 1 absent
    "38000000" "01000000"  # tensor 2 at 56, 1 float
    "0000803f" "000000c0"  # 1.0f, -2.0f
    "0000003f")  # 0.5f


def test_golden_bytes():
    assert struct.unpack_from("<I", GOLDEN, 20)[0] == zlib.crc32(GOLDEN[24:])
    assert wof.encode(GOLDEN_TENSORS, GOLDEN_LAYOUT) == GOLDEN


def test_c_writes_the_golden_bytes(lib):
    layout = [("a", (2,)), ("b", (5,)), ("c", (1, 1))]
    arrays = [np.array([1.0, -2.0], np.float32), None, np.array([[0.5]], np.float32)]
    pointers = (P_FLOAT * 3)(*(P_FLOAT() if a is None else a.ctypes.data_as(P_FLOAT)
                               for a in arrays))
    buf, written = (ctypes.c_uint8 * 60)(), U32()
    status = lib.eb_wof_write(buf, 60, GOLDEN_LAYOUT, 3, sizes(layout), pointers,
                              ctypes.byref(written))
    assert (STATUSES[status], written.value, bytes(buf)) == ("OK", 60, GOLDEN)


def test_layout_id_is_sha256_of_the_canonical_json():
    canonical = b'[["conv.weight",[2,1,3]],["conv.bias",[2]],["fc.weight",[3,2]],["fc.bias",[3]]]'
    digest = hashlib.sha256(canonical).digest()
    assert wof.layout_id(MODEL) == int.from_bytes(digest[:4], "little")
    assert wof.layout_id(MODEL) != wof.layout_id(OTHER)
    assert wof.layout_id(MODEL) != wof.layout_id(MODEL[::-1])


def test_c_crc32_is_zlib_crc32(lib):
    check = b"123456789"
    assert lib.eb_wof_crc32(c_bytes(check), len(check)) == 0xCBF43926 == zlib.crc32(check)
    blob = np.random.default_rng(1).integers(0, 256, 1000, dtype=np.uint8).tobytes()
    assert lib.eb_wof_crc32(c_bytes(blob), len(blob)) == zlib.crc32(blob)
    assert lib.eb_wof_crc32(c_bytes(b""), 0) == 0


# ---- round trips ------------------------------------------------------------------------

def test_round_trip_python(tmp_path):
    tensors = values(MODEL)
    tensors[1] = None
    path = tmp_path / "weights.wof"
    wof.write(path, tensors, wof.layout_id(MODEL))
    back = wof.read(path, MODEL)
    assert all(same(a, b) for a, b in zip(tensors, back, strict=True))
    assert [p.name for p in tmp_path.iterdir()] == ["weights.wof"]


def test_round_trip_python_to_c(lib):
    tensors = values(MODEL, seed=2)
    status, back = c_read(lib, wof.encode(tensors, wof.layout_id(MODEL)), MODEL)
    assert status == "OK"
    assert all(same(a, b) for a, b in zip(tensors, back, strict=True))


def test_round_trip_c_to_python(lib):
    tensors = values(MODEL, seed=3)
    tensors[2] = None
    status, data = c_write(lib, tensors, MODEL)
    assert status == "OK"
    assert data == wof.encode(tensors, wof.layout_id(MODEL))
    back = wof.decode(data, MODEL, SOURCE)
    assert all(same(a, b) for a, b in zip(tensors, back, strict=True))


def test_round_trip_c_to_c(lib):
    tensors = values(MODEL, seed=4)
    status, data = c_write(lib, tensors, MODEL)
    assert status == "OK" and len(data) == 124
    status, back = c_read(lib, data, MODEL)
    assert status == "OK"
    assert all(same(a, b) for a, b in zip(tensors, back, strict=True))


def test_c_absent_tensors_keep_their_previous_values(lib):
    previous, saved = values(MODEL, seed=5), values(MODEL, seed=6)
    saved[0] = saved[3] = None
    status, back = c_read(lib, wof.encode(saved, wof.layout_id(MODEL)), MODEL, previous)
    assert status == "OK"
    assert same(back[0], previous[0]) and same(back[3], previous[3])
    assert same(back[1], saved[1]) and same(back[2], saved[2])


def test_c_size_and_capacity(lib):
    full = wof.encode(values(MODEL), wof.layout_id(MODEL))
    assert lib.eb_wof_size(len(MODEL), sizes(MODEL)) == len(full)
    huge = [("w", (0x40000000,))]  # 4 GiB of floats: no u32 size
    assert lib.eb_wof_size(1, sizes(huge)) == 0
    status, data = c_write(lib, values(MODEL), MODEL, capacity=len(full) - 1)
    assert (status, data) == ("CAPACITY", b"")  # c_write checked the buffer is untouched
    half = [None, None, *values(MODEL)[2:]]  # absent tensors need no room
    status, data = c_write(lib, half, MODEL, capacity=len(full) - 32)
    assert status == "OK" and data == wof.encode(half, wof.layout_id(MODEL))


def test_c_messages(lib):
    messages = [lib.eb_wof_message(i).decode() for i in range(len(STATUSES))]
    assert all(messages) and len(set(messages)) == len(STATUSES)
    assert lib.eb_wof_message(99).decode()


# ---- corruption: both readers -----------------------------------------------------------

def patched(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def recrc(data: bytes) -> bytes:
    """Fix the crc so that the check after it is the one that fires."""
    return patched(data, 20, "<I", zlib.crc32(data[24:]))


def entry(data: bytes, index: int, offset: int, count: int | None = None) -> bytes:
    data = patched(data, 24 + 8 * index, "<I", offset)
    return data if count is None else patched(data, 28 + 8 * index, "<I", count)


def flipped(data: bytes, offset: int) -> bytes:
    return patched(data, offset, "B", data[offset] ^ 0x10)


CORRUPT = {  # name: (file, message pattern, C status)
    "empty": (b"", r"^file is 0 bytes, shorter than the 24-byte header", "SHORT"),
    "header cut": (BASE[:23], r"^file is 23 bytes, shorter than the 24-byte header", "SHORT"),
    "magic": (patched(BASE, 0, "4s", b"EBWX"), r"^magic is 45 42 57 58 .*expected 45 42 57 46",
              "MAGIC"),
    "erased flash": (b"\xff" * 124, r"^magic is ff ff ff ff", "MAGIC"),
    "version": (patched(BASE, 4, "<H", 2), r"^version is 2, this edgebuild reads version 1$",
                "VERSION"),
    "reserved": (patched(BASE, 6, "<H", 1), r"^reserved field is 1, expected 0", "RESERVED"),
    "truncated": (BASE[:-4], r"^size field is 124 bytes, the file is 120 bytes", "SIZE"),
    "padded": (BASE + bytes(4), r"^size field is 124 bytes, the file is 128 bytes", "SIZE"),
    "size field": (patched(BASE, 12, "<I", 128), r"^size field is 128 bytes", "SIZE"),
    "data byte": (flipped(BASE, 100), r"^crc32 is 0x[0-9a-f]{8}, the content gives", "CRC"),
    "table byte": (flipped(BASE, 30), r"^crc32 is ", "CRC"),
    "crc field": (flipped(BASE, 21), r"^crc32 is ", "CRC"),
    "layout": (patched(BASE, 16, "<I", wof.layout_id(OTHER)),
               rf"^layout id is 0x{wof.layout_id(OTHER):08x}, expected "
               rf"0x{wof.layout_id(MODEL):08x}", "LAYOUT"),
    "count": (patched(BASE, 8, "<I", 5), r"^tensor count is 5, expected 4$", "COUNT"),
    "table cut": (recrc(patched(BASE[:40], 12, "<I", 40)),
                  r"^file is 40 bytes, shorter than its header and table of 4 tensors "
                  r"\(56 bytes\)", "SHORT"),
    "element count": (recrc(entry(BASE, 2, 88, 5)),
                      r"^tensor 2 \(fc\.weight\): element count is 5, expected 6", "TENSOR"),
    "zero count": (recrc(entry(BASE, 2, 88, 0)),
                   r"^tensor 2 \(fc\.weight\): element count is 0, expected 6", "TENSOR"),
    "misaligned": (recrc(entry(BASE, 1, 82)),
                   r"^tensor 1 \(conv\.bias\): offset is 82, not 4-byte aligned", "TENSOR"),
    "offset past end": (recrc(entry(BASE, 3, 128)), r"^tensor 3 \(fc\.bias\): offset is 128, "
                        r"outside the data area \[56, 124\]", "TENSOR"),
    "offset in table": (recrc(entry(BASE, 0, 24)),
                        r"^tensor 0 \(conv\.weight\): offset is 24, outside", "TENSOR"),
    "data past end": (recrc(entry(BASE, 3, 116)), r"^tensor 3 \(fc\.bias\): data \[116, 128\) "
                      r"runs past the end of the file \(124 bytes\)", "TENSOR"),
    "overlap": (recrc(entry(BASE, 1, 76)), r"^tensor 1 \(conv\.bias\): offset is 76, "
                r"overlapping the previous tensor's data, which ends at 80", "TENSOR"),
    "absent marker with count": (recrc(entry(BASE, 3, 0xFFFFFFFF)),
                                 r"^tensor 3 \(fc\.bias\): offset 0xffffffff marks the tensor "
                                 r"absent, but its element count is 3, expected 0", "TENSOR"),
}


def python_error(data: bytes, layout=MODEL) -> str:
    with pytest.raises(UserError) as caught:
        wof.decode(data, layout, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}: ")
    return caught.value.diagnostics[0].message


@pytest.mark.parametrize("case", CORRUPT)
def test_python_rejects(case):
    data, pattern, _ = CORRUPT[case]
    assert re.search(pattern, python_error(data))


@pytest.mark.parametrize("case", CORRUPT)
def test_c_rejects_and_keeps_the_weights(lib, case):
    data, _, expected = CORRUPT[case]
    status, back = c_read(lib, data, MODEL)
    assert status == expected
    assert all((b == SENTINEL).all() for b in back)


def kind(message: str) -> str:
    """The C status matching a Python message (the check that failed)."""
    return next(status for prefix, status in KINDS if message.startswith(prefix))


KINDS = [("file is", "SHORT"), ("magic", "MAGIC"), ("version", "VERSION"),
         ("reserved", "RESERVED"), ("size field", "SIZE"), ("crc32", "CRC"),
         ("layout id", "LAYOUT"), ("tensor count", "COUNT"), ("tensor ", "TENSOR")]


def test_header_checks_run_in_the_documented_order(lib):
    """A file failing every header check; fixing one field at a time, both readers always
    report the first remaining failure."""
    fixes = [("MAGIC", 0, "4s", b"EBWF"), ("VERSION", 4, "<H", 1), ("RESERVED", 6, "<H", 0),
             ("SIZE", 12, "<I", 124), ("CRC", 20, "<I", zlib.crc32(BASE[24:])),
             ("LAYOUT", 16, "<I", wof.layout_id(MODEL)), ("COUNT", 8, "<I", 4)]
    bad = BASE
    for offset, fmt, value in [(0, "4s", b"EBWX"), (4, "<H", 9), (6, "<H", 3),
                               (12, "<I", 999), (20, "<I", 1), (16, "<I", 7), (8, "<I", 7)]:
        bad = patched(bad, offset, fmt, value)
    for expected, offset, fmt, value in fixes:
        assert kind(python_error(bad)) == expected
        assert c_read(lib, bad, MODEL)[0] == expected
        bad = patched(bad, offset, fmt, value)
    assert bad == BASE


def test_entry_checks_run_in_the_documented_order(lib):
    """fc.bias (tensor 3, 3 floats at 112 in a 124-byte file), one problem fixed a time."""
    steps = [((130, 9), "offset is 130, outside"), ((114, 9), "offset is 114, not 4-byte"),
             ((116, 9), "element count is 9"), ((116, 3), "data [116, 128) runs past"),
             ((108, 3), "offset is 108, overlapping")]
    for (offset, count), message in steps:
        bad = recrc(entry(BASE, 3, offset, count))
        assert python_error(bad).startswith(f"tensor 3 (fc.bias): {message}")
        assert c_read(lib, bad, MODEL)[0] == "TENSOR"


def test_version_message():
    with pytest.raises(UserError, match=r"^weights\.wof: version is 2, this edgebuild reads "
                                        r"version 1$"):
        wof.decode(patched(BASE, 4, "<H", 2), MODEL, SOURCE)


def test_read_names_a_missing_file(tmp_path):
    with pytest.raises(UserError, match="weight file not found"):
        wof.read(tmp_path / "nothing.wof", MODEL)


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "weights.wof"
    wof.write(path, values(MODEL), wof.layout_id(MODEL))
    before = path.read_bytes()

    def crash(*_args):
        raise OSError("power lost")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power lost"):
        wof.write(path, values(MODEL, seed=9), wof.layout_id(MODEL))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["weights.wof"]


def test_encode_refuses_a_layout_that_is_not_u32():
    with pytest.raises(ValueError):
        wof.encode([], 1 << 32)


def test_describe():
    info = wof.describe(GOLDEN)
    assert info == {
        "magic": "EBWF", "version": 1, "reserved": 0, "tensor_count": 3, "size": 60,
        "actual_size": 60, "layout_id": GOLDEN_LAYOUT, "crc32": 0x5439E89A,
        "actual_crc32": 0x5439E89A,
        "tensors": [{"index": 0, "absent": False, "offset": 48, "count": 2},
                    {"index": 1, "absent": True, "offset": 0xFFFFFFFF, "count": 0},
                    {"index": 2, "absent": False, "offset": 56, "count": 1}]}
    damaged = wof.describe(GOLDEN[:40])  # a dump still works: only the entries present
    assert damaged["actual_size"] == 40 and len(damaged["tensors"]) == 2
    with pytest.raises(UserError, match="shorter than the 24-byte header"):
        wof.describe(GOLDEN[:10])


# ---- properties -------------------------------------------------------------------------

SHAPES = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
FLOATS = st.floats(width=32, allow_nan=False)  # NaN payloads: bit-compared by `same` anyway


@st.composite
def tensor_lists(draw):
    """(layout, tensors): up to 6 tensors of rank 0-3 (some empty), some absent."""
    shapes = draw(st.lists(SHAPES, max_size=6))
    layout = [(f"t{i}", shape) for i, shape in enumerate(shapes)]
    tensors = []
    for shape in shapes:
        size = int(np.prod(shape))
        flat = draw(st.lists(FLOATS, min_size=size, max_size=size))
        present = draw(st.booleans())
        tensors.append(np.array(flat, np.float32).reshape(shape) if present else None)
    return layout, tensors


@settings(max_examples=60, deadline=None)
@given(tensor_lists())
def test_python_round_trip_property(case):
    layout, tensors = case
    back = wof.decode(wof.encode(tensors, wof.layout_id(layout)), layout, SOURCE)
    assert all(same(a, b) for a, b in zip(tensors, back, strict=True))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensor_lists())
def test_c_and_python_agree_property(lib, case):
    layout, tensors = case
    data = wof.encode(tensors, wof.layout_id(layout))
    status, written = c_write(lib, tensors, layout)
    assert status == "OK" and written == data
    previous = values(layout, seed=7)
    status, back = c_read(lib, data, layout, previous)
    assert status == "OK"
    assert all(same(b, p if t is None else t)
               for t, b, p in zip(tensors, back, previous, strict=True))


@settings(max_examples=80, deadline=None)
@given(tensor_lists(), st.data())
def test_any_flipped_byte_is_refused_by_both_property(lib, case, data):
    """Every header field is checked and the crc covers the rest: no single-byte change
    gets through, and both readers name the same failed check."""
    layout, tensors = case
    raw = wof.encode(tensors, wof.layout_id(layout))
    where = data.draw(st.integers(0, len(raw) - 1))
    mask = data.draw(st.integers(1, 255))
    bad = patched(raw, where, "B", raw[where] ^ mask)
    message = python_error(bad, layout)
    status, back = c_read(lib, bad, layout)
    assert status == kind(message)
    assert all((b == SENTINEL).all() for b in back)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from(["<B", "<H", "<I"]),
                          st.integers(0, 0xFFFFFFFF)), min_size=1, max_size=4),
       st.integers(-8, 8), st.booleans())
def test_readers_agree_on_mangled_files_property(lib, edits, resize, repair):
    """Several fields overwritten (u8/u16/u32 anywhere in the table and data too), the file
    cut or padded, and sometimes size and crc repaired so the later checks are reached:
    both readers accept with the same values or fail the same check, and a failed C read
    leaves the weights untouched."""
    raw = bytearray(BASE[:len(BASE) + min(resize, 0)] + bytes(max(resize, 0)))
    for where, fmt, value in edits:
        width = struct.calcsize(fmt)
        if where + width <= len(raw):
            struct.pack_into(fmt, raw, where, value & ((1 << 8 * width) - 1))
    if repair:
        raw = bytearray(recrc(patched(bytes(raw), 12, "<I", len(raw))))
    previous = values(MODEL, seed=8)
    status, back = c_read(lib, bytes(raw), MODEL, previous)
    try:
        loaded = wof.decode(bytes(raw), MODEL, SOURCE)
    except UserError as exc:
        assert status == kind(exc.diagnostics[0].message)
        assert all(same(b, p) for b, p in zip(back, previous, strict=True))
    else:
        assert status == "OK"
        assert all(same(b, p if t is None else t)
                   for t, b, p in zip(loaded, back, previous, strict=True))


# ---- the device build -------------------------------------------------------------------

@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc is not on PATH")
def test_compiles_for_cortex_m4(tmp_path):
    result = subprocess.run([ARM_GCC, *ARM_FLAGS, *WARNINGS, "-c", str(TRAIN / "eb_wof.c"),
                             "-o", str(tmp_path / "eb_wof.o")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"


def test_a_file_far_larger_than_the_layout_is_refused_after_reading_what_it_could_hold(
        tmp_path):
    """A 3 GiB (sparse) file given as ondevice.weights: refused naming the size the layout
    needs; read no further than that (it was read whole, then rejected by its size field)."""
    path = tmp_path / "huge.wof"
    with open(path, "wb") as handle:
        handle.truncate(3 * 1024**3)
    layout = [("fc.weight", (4, 16)), ("fc.bias", (4,))]
    with pytest.raises(UserError, match=r"huge\.wof: larger than the \d+ bytes this model"):
        wof.read(path, layout)
