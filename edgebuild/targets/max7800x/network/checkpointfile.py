"""A checkpoint file read as untrusted input: what `torch.load` is given, how it is called,
and what its failures say.

A `.pth.tar` is a pickle, and unpickling arbitrary objects runs arbitrary code, so it is
only ever loaded with `weights_only=True` (tensors, plain data and the optimizer classes
ai8x-training pickles, as class references); a file that needs more is refused with how
to re-save it, never with torch's advice to turn that off. Before torch sees the file its
size, its pickle's size and its archive's directory are bounded and its kind named
(torch.save's zip archive, an old pickle-only checkpoint, or neither: an empty file, a
truncated archive), so every refusal gives a reason. A zip archive is memory-mapped
(`mmap=True`): its tensors are read from the file when used, not copied into memory as
it loads, and `size_problem` bounds each tensor's size (a view can declare any shape over
one stored value) before anything derives an array from it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError

if TYPE_CHECKING:
    import torch

MIB = 1 << 20
# The file: an ai8x-training checkpoint holds the weights (the MAX78002's 2340 KiB kernel
# memory as float32: 9 MiB) and the optimizer's state (two more copies for Adam): some
# 30 MiB at most. Eight times that is far beyond any checkpoint a device can use.
MAX_CHECKPOINT_BYTES = 256 * MIB
MAX_RECORDS = 10_000  # zip entries: one per tensor (a checkpoint has a few hundred)
# The pickle (torch.save's data.pkl, or the whole of a pickle-only checkpoint): torch's
# weights-only unpickler runs in Python, some 3 MB/s at worst (16 MiB of one-byte opcodes:
# 6 s). A checkpoint's pickle holds keys and the optimizer's settings: some 100 KiB.
MAX_PICKLE_BYTES = 16 * MIB
SHOWN_CHARACTERS = 80  # of a key or name from the file, in a message

_ZIP, _PICKLE = b"PK", b"\x80"  # how torch.save's archive and a pickle (protocol 2+) begin


def shown(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """A key or name from the file as a message shows it: one line, at most `limit`
    characters (a key of megabytes would be a message of megabytes)."""
    cut = text if len(text) <= limit else f"{text[:limit - 3]}..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)


def load(path: Path, allowed: list[Any]) -> Any:
    """The unpickled contents of the checkpoint at `path` (weights-only; `allowed`: the
    classes it may reference besides torch's defaults), or a user error saying why not."""
    display = str(path)
    mmap = _kind(path, display)
    import warnings

    import torch

    try:
        with warnings.catch_warnings(), torch.serialization.safe_globals(allowed):
            warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 4": not ours
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as exc:  # torch raises what pickle, zipfile and its C++ reader raise
        raise UserError(Diagnostic(display, _refusal(exc))) from None


def _kind(path: Path, display: str) -> bool:
    """Whether the file is torch.save's zip archive (True: it is memory-mapped) or a
    pickle-only checkpoint (False); a user error when it is neither, or too large."""
    if not path.is_file():
        raise UserError(Diagnostic(display, "checkpoint file not found"))
    with open(path, "rb") as file:
        size = file.seek(0, 2)
        file.seek(0)
        head = file.read(8)
    if size == 0:
        raise UserError(Diagnostic(display, "not a PyTorch checkpoint: empty file (0 bytes)"))
    if size > MAX_CHECKPOINT_BYTES:
        raise UserError(Diagnostic(display, (
            f"the checkpoint has {size:,} bytes; edgebuild reads checkpoints of at most "
            f"{MAX_CHECKPOINT_BYTES:,} bytes ({MAX_CHECKPOINT_BYTES // MIB} MiB), far more than "
            "the weights any MAX7800x device holds")))
    if head.startswith(_ZIP):
        _check_archive(path, display, size)
        return True
    if head.startswith(_PICKLE):
        _check_pickle(display, "the checkpoint, a pickle-only (pre-1.6 torch.save) file,", size)
        return False
    raise UserError(Diagnostic(display, (
        f"not a PyTorch checkpoint: neither torch.save's zip archive nor a pickle (it begins "
        f"with {shown(repr(head))})")))


def _check_archive(path: Path, display: str, size: int) -> None:
    """torch.save's archive, whole: its directory at the end (a truncated copy has none),
    at most MAX_RECORDS records (counted from the directory's end record before zipfile
    reads the directory: a directory of millions of entries is read into millions of
    objects), none compressed (torch.save stores them as they are, and a mapped
    compressed record would be read as its compressed bytes)."""
    import zipfile

    found = _directory(path, size)
    if found is None:
        raise UserError(Diagnostic(display, (
            f"not a PyTorch checkpoint: truncated zip archive (no directory at its end; "
            f"{size:,} bytes: an interrupted download or copy?)")))
    records, directory = found
    if records > MAX_RECORDS or directory > MAX_RECORDS * _ENTRY_BYTES:
        raise UserError(Diagnostic(display, (
            f"the checkpoint archive has {records:,} records in a {directory:,}-byte "
            f"directory; edgebuild reads at most {MAX_RECORDS:,} (one per tensor)")))
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UserError(Diagnostic(display, (
            f"not a PyTorch checkpoint: damaged zip archive ({shown(str(exc), 200)})"))) \
            from None
    for record in infos:
        if record.filename.endswith(".pkl"):
            _check_pickle(display, f"record {shown(record.filename)!r}", record.file_size)
    packed = next((r for r in infos if r.compress_type != zipfile.ZIP_STORED), None)
    if packed is not None:
        raise UserError(Diagnostic(display, (
            f"record {shown(packed.filename)!r} of the checkpoint archive is compressed; "
            "torch.save stores records uncompressed (save it again with torch.save, not "
            "re-zipped)")))


def _check_pickle(display: str, what: str, size: int) -> None:
    if size > MAX_PICKLE_BYTES:
        raise UserError(Diagnostic(display, (
            f"{what} has {size:,} bytes of pickle; edgebuild unpickles at most "
            f"{MAX_PICKLE_BYTES:,} ({MAX_PICKLE_BYTES // MIB} MiB): a checkpoint's pickle holds "
            "its keys and settings, some kilobytes (save it again with torch.save)")))


_ENTRY_BYTES = 1024  # a directory entry: 46 bytes, its name (torch's are ~30) and extras
_END, _END64, _LOCATOR64 = b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07"


def _directory(path: Path, size: int) -> tuple[int, int] | None:
    """(records, directory bytes) as the archive's end record says, where zipfile reads
    them (zip64's record right before its locator, when there is one); None when there is
    no end record."""
    with open(path, "rb") as file:
        start = max(0, size - (22 + 0xFFFF + 20 + 56))  # end record, comment, zip64 parts
        file.seek(start)
        tail = file.read()
    at = tail.rfind(_END)
    if at < 0 or len(tail) - at < 22:
        return None
    records = int.from_bytes(tail[at + 10:at + 12], "little")
    directory = int.from_bytes(tail[at + 12:at + 16], "little")
    locator = at - 20
    if locator >= 56 and tail[locator:locator + 4] == _LOCATOR64:
        record = tail[locator - 56:locator]
        if record[:4] == _END64:
            records = int.from_bytes(record[32:40], "little")
            directory = int.from_bytes(record[40:48], "little")
    return records, directory


def _refusal(exc: Exception) -> str:
    """Why torch.load refused the file, for the user: a pickle that needs more than
    tensors and plain data says so and how to fix it; anything else is a damaged or
    foreign file, with torch's reason (its first sentence, without its advice)."""
    import pickle

    if isinstance(exc, pickle.UnpicklingError):
        return (f"the checkpoint cannot be loaded safely: it is not a weights-only checkpoint "
                f"({_beyond(str(exc))}). edgebuild never unpickles arbitrary objects, as "
                "unpickling them can run code. Fix: in a trusted environment, load it and "
                "save its tensors alone: torch.save({'arch': ARCH, 'state_dict': "
                "model.state_dict()}, FILE)")
    first = re.split(r"(?<=[.!?])\s", str(exc).strip(), maxsplit=1)[0].rstrip(".")
    if "%ld" in first:  # torch's C++ left its format unfilled
        first = f"{first.split(':')[0]} (a truncated or damaged file)"
    reason = shown(first, 200) if first else type(exc).__name__
    return f"not a PyTorch checkpoint: {reason}"


def _beyond(text: str) -> str:
    """What the weights-only unpickler refused, from its message (never its advice)."""
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        return f"it pickles {shown(found.group(1))}, an object beyond tensors and plain data"
    refused = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)
    return "a pickle that holds more than tensors and plain data" + (
        f": {shown(refused.group(1), 120)}" if refused else "")


def kind_problem(tensor: torch.Tensor) -> str | None:
    """Why a tensor of the file cannot become an array of numbers (None: it can): it is
    not dense numbers on the CPU."""
    import torch

    if tensor.layout != torch.strided or tensor.device.type != "cpu":
        return f"is a {tensor.layout} tensor on {tensor.device}; expected dense values"
    integers = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)
    if tensor.is_quantized or not (tensor.dtype.is_floating_point or tensor.dtype in integers):
        return f"holds {tensor.dtype} values; expected integers (or floats of them)"
    return None


def size_problem(tensor: torch.Tensor, most: int) -> str | None:
    """What makes a tensor of the file too large to become an array (None: it is not),
    from its declared shape: a view can declare any shape over one stored value, so the
    shape, not the file's size, says what an array of it would take."""
    if tensor.numel() <= most:
        return None
    shape = ", ".join(str(d) for d in list(tensor.shape)[:8])
    return (f"has shape [{shape}]: {tensor.numel():,} values "
            f"({tensor.numel() * tensor.element_size():,} bytes)")
