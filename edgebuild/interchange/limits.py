"""How much an ONNX file may ask `edgebuild import-onnx` to hold, checked with Python
integers before protobuf, numpy or onnx's reference evaluator allocates anything.

A file is untrusted input: a dimension of 1e9, a constant whose folding needs terabytes or
a million empty nodes costs the file a few bytes and the importer all the machine's memory
or hours. Every such quantity has a limit here, and exceeding one is a user error that
names the file, the tensor or node, its size and the limit.

Why these numbers: the largest weight memory of any target edgebuild builds for is the
MAX78002's kernel memory (2340 KiB of 8-bit weights); Cortex-M4 parts have at most a few
MiB of flash. A float model a microcontroller could ever run has at most a few million
float32 weights (about 10 MB), a few hundred layers (the MAX78002 runs 128) and so a few
thousand ONNX nodes. The limits are an order of magnitude beyond that, so no deployable
model comes near them, and small enough that a file at the limits is read in seconds and
under a gigabyte of memory (a 236 MB model: 3 s, 740 MB).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError

if TYPE_CHECKING:
    import onnx

MIB = 1 << 20
MAX_FILE_BYTES = 256 * MIB  # the .onnx file, read whole by protobuf
MAX_TENSOR_BYTES = 64 * MIB  # one tensor: an initializer, a folded constant, an input sample
MAX_TENSOR_ELEMENTS = MAX_TENSOR_BYTES // 4  # ... and as float32, the weights edgebuild keeps
MAX_TOTAL_BYTES = 256 * MIB  # every initializer and folded constant together
MAX_RANK = 16  # dimensions of a tensor (PyTorch's exports use at most 6)
MAX_NODES = 10_000  # nodes in the whole file, subgraphs and functions included
MAX_TENSORS = 2 * MAX_NODES  # initializers and constant attributes (about 2 per node)
# The protobuf encoding (see interchange.wire): decoding an empty message costs some 150
# bytes for its 2 bytes in the file, so sizes in memory are estimated before decoding.
MAX_DECODED_BYTES = 2 * MAX_FILE_BYTES
MAX_FIELDS = 1_000_000  # protobuf fields in the file (a 10,000-node model has ~300,000)
MAX_DEPTH = 48  # messages nested in messages (a Loop's body in an If's branch: 13)
SHOWN_CHARACTERS = 80  # of a name from the file, in a message or a manifest comment


def refuse(path: object, message: str) -> UserError:
    """The user error for `path` (the file imported): `FILE: message`."""
    return UserError(Diagnostic(str(path), message))


def printable(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """A name from the file as a message or a comment shows it: one line (control
    characters escaped, so a name cannot start a line of YAML) and at most `limit`
    characters (a name of megabytes would be a message of megabytes)."""
    cut = text if len(text) <= limit else f"{text[:limit - 3]}..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)


def describe(node: onnx.NodeProto) -> str:
    """`OpType name` as the manifest's comments and the error messages show a node."""
    return printable(f"{node.op_type} {node.name or (node.output[0] if node.output else '')}")


def shown_list(values: Sequence[Any]) -> str:
    """A shape (or an attribute's list) as a message shows it: at most 8 values of it."""
    shown = [_short_repr(v) for v in values[:8]] + (["..."] if len(values) > 8 else [])
    return f"[{', '.join(shown)}]"


def _short_repr(value: Any) -> str:
    return printable(repr(value), 24)


def elements(shape: Sequence[int]) -> int:
    """The element count of a shape, exactly (Python integers do not overflow)."""
    count = 1
    for dim in shape:
        count *= dim
    return count


def amount(size: int) -> str:
    """A byte count with its binary magnitude: `4,000,000,000 bytes (3.7 GiB)`."""
    value, unit = float(size), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if value < 1024 or unit == "EiB":
            break
        value /= 1024
    return f"{size:,} bytes" + ("" if unit == "bytes" else f" ({value:.1f} {unit})")


def tensor_problem(shape: Sequence[int], itemsize: int) -> str | None:
    """What makes a tensor of this shape too large for an import, or None."""
    if len(shape) > MAX_RANK:
        return (f"has {len(shape)} dimensions; edgebuild imports tensors of at most "
                f"{MAX_RANK}")
    if any(d < 0 for d in shape):
        return f"has shape {shown_list(shape)}, with a negative dimension"
    count = elements(shape)
    size = count * itemsize
    if count > MAX_TENSOR_ELEMENTS or size > MAX_TENSOR_BYTES:
        return (f"has shape {shown_list(shape)}: {count:,} elements, {amount(size)}; "
                f"edgebuild imports tensors of at most {MAX_TENSOR_ELEMENTS:,} elements and "
                f"{amount(MAX_TENSOR_BYTES)}, far more than any microcontroller target holds")
    return None


@dataclass
class Budget:
    """The bytes of tensors held so far (initializers, then folded constants), against
    MAX_TOTAL_BYTES; `spend` refuses what would exceed it."""

    path: str
    spent: int = 0

    def spend(self, what: str, size: int) -> None:
        if self.spent + size > MAX_TOTAL_BYTES:
            raise refuse(self.path, f"{what} ({amount(size)}) would bring the model's "
                                    f"constants to {amount(self.spent + size)}; edgebuild "
                                    f"imports models of at most {amount(MAX_TOTAL_BYTES)} of "
                                    "constants, far more than any microcontroller target "
                                    "holds")
        self.spent += size
