"""An ONNX file's protobuf encoding, walked before protobuf decodes it: how many messages
of each type it holds, how deep they nest and what decoding them would cost in memory.

Protobuf decodes everything a file holds before anyone can look at it, and the encoding is
compact where memory is not: an empty NodeProto is 2 bytes in the file and some 150 in
memory, so a 14 MB file of empty nodes decodes to a gigabyte. This walk reads the
encoding against the message types' descriptors (onnx's own), counting as it goes and
stopping at the first limit crossed (interchange.limits), in time proportional to the
fields it reads: large payloads (raw tensor data) are skipped, not read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from edgebuild.interchange import limits

# What decoding costs in memory: a message (its struct and its slot in a repeated field),
# a length-delimited payload's overhead, a packed scalar (1-byte varints become 8 bytes).
MESSAGE_COST = 160
PAYLOAD_COST = 16
PACKED_VARINT_COST = 8

# protobuf's field types (google.protobuf.descriptor.FieldDescriptor.TYPE_*)
_MESSAGE, _STRING, _BYTES = 11, 9, 12
_FIXED = {1: 8, 6: 8, 16: 8, 2: 4, 7: 4, 15: 4}  # double, fixed64, sfixed64, float, ...


# Messages whose number the importer's work grows with: (limit, what they are).
_COUNTED = {"NodeProto": (limits.MAX_NODES, "nodes"),
            "TensorProto": (limits.MAX_TENSORS, "tensors (initializers and constants)")}


class Malformed(Exception):
    """Not a protobuf encoding of the expected message (truncated, or not protobuf)."""


class Excessive(Exception):
    """A limit is crossed; the message says which, for the user."""


@dataclass
class Tally:
    """What the walk found: messages by type name, fields read, estimated decoded bytes."""

    messages: Counter[str] = field(default_factory=Counter)
    fields: int = 0
    decoded: int = 0


def scan(data: bytes, root: Any) -> Tally:
    """Walk `data` as an encoded `root` (a message descriptor); Excessive at the first
    limit crossed, Malformed when it is no such encoding."""
    tally = Tally()
    stack: list[tuple[Any, int]] = [(root, len(data))]
    position = 0
    while stack:
        descriptor, end = stack[-1]
        if position >= end:
            stack.pop()
            continue
        position, nested = _field(data, position, end, descriptor, tally)
        if nested is not None:
            _enter(stack, nested, tally)
    return tally


def _enter(stack: list[tuple[Any, int]], nested: tuple[Any, int], tally: Tally) -> None:
    """A sub-message begins: counted, and its fields read next."""
    if len(stack) >= limits.MAX_DEPTH:
        raise Excessive(f"messages nested more than {limits.MAX_DEPTH} deep (graphs within "
                        "graphs); an ONNX model nests some 10 deep")
    descriptor = nested[0]
    tally.messages[descriptor.name] += 1
    tally.decoded += MESSAGE_COST
    most = _COUNTED.get(descriptor.name)
    if most is not None and tally.messages[descriptor.name] > most[0]:
        raise Excessive(f"more than {most[0]:,} {most[1]}; edgebuild imports models of at "
                        "most that many (a model a microcontroller runs has a few hundred)")
    if tally.decoded > limits.MAX_DECODED_BYTES:
        raise Excessive(_decoded_message(tally))
    stack.append(nested)


def _decoded_message(tally: Tally) -> str:
    return (f"decoding it would take more than {limits.amount(limits.MAX_DECODED_BYTES)} of "
            f"memory ({tally.messages.total():,} messages so far); edgebuild imports models "
            "of at most that size, far more than any microcontroller target holds")


def _field(data: bytes, position: int, end: int, descriptor: Any,
           tally: Tally) -> tuple[int, tuple[Any, int] | None]:
    """Read one field at `position`: (the position after it, or at its payload when it is
    a sub-message; that sub-message's (descriptor, end), else None)."""
    tally.fields += 1
    if tally.fields > limits.MAX_FIELDS:
        raise Excessive(f"more than {limits.MAX_FIELDS:,} protobuf fields; edgebuild imports "
                        "models of at most that many (a 10,000-node model has ~300,000)")
    tag, position = _varint(data, position, end)
    wire, known = tag & 7, descriptor.fields_by_number.get(tag >> 3)
    if wire == 2:
        length, position = _varint(data, position, end)
        if position + length > end:
            raise Malformed("a field runs past the end of its message (truncated?)")
        if known is not None and known.type == _MESSAGE:
            return position, (known.message_type, position + length)
        tally.decoded += _payload_cost(known, length)
        if tally.decoded > limits.MAX_DECODED_BYTES:
            raise Excessive(_decoded_message(tally))
        return position + length, None
    tally.decoded += 8
    if wire == 0:
        return _varint(data, position, end)[1], None
    if wire in (1, 5) and position + (8 if wire == 1 else 4) <= end:
        return position + (8 if wire == 1 else 4), None
    raise Malformed(f"wire type {wire} at byte {position}")


def _payload_cost(known: Any, length: int) -> int:
    """Memory a length-delimited payload takes once decoded: a string or unknown field as
    it is, packed scalars as their count of 4- or 8-byte values."""
    if known is None or known.type in (_STRING, _BYTES) or not known.is_repeated:
        return length + PAYLOAD_COST
    width = _FIXED.get(known.type)
    return length * (PACKED_VARINT_COST if width is None else 8 // width) + PAYLOAD_COST


def _varint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the base-128 varint at `position`."""
    value = shift = 0
    while True:
        if position >= end or shift > 63:
            raise Malformed(f"a varint runs past the end of its message at byte {position}")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
