"""Field types shared by every manifest section: the strict base model, identifiers, sizes.

Parsing happens once, at the boundary: `16KiB` becomes 16384 here and nowhere else.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema


class Strict(BaseModel):
    """Every manifest record: immutable, unknown keys are errors (typos never pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


C_KEYWORDS = frozenset(["auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary", "main"])

IDENTIFIER_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,47}$"
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


def _identifier(value: object) -> object:
    """Names become directory names and C identifiers: letters, digits, underscores only."""
    if not isinstance(value, str):
        return value  # pydantic reports the type error
    if not _IDENTIFIER.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use a letter followed by up to 47 letters, "
            "digits or underscores (names become file names and C identifiers)")
    if value in C_KEYWORDS:
        raise ValueError(f"{value!r} is a C keyword; choose another name")
    return value


# Field before BeforeValidator: the other order drops the pattern from the JSON Schema.
Identifier = Annotated[
    str,
    Field(pattern=IDENTIFIER_PATTERN),
    BeforeValidator(_identifier),
]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
          "kib": 1024, "mib": 1024**2, "gib": 1024**3}
MAX_BYTES = 1 << 40


def parse_bytes(value: object) -> int:
    """`16KiB` -> 16384, `1MB` -> 1000000, `512` -> 512 (bytes). Binary units are powers of 1024."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 16384, '16KiB' or '2MiB'")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise ValueError(f"{value!r} is not a size; use e.g. 16384, '16KiB', '2MiB', '512KB'")
        scale = _UNITS[(match.group(2) or "B").lower()]
        exact = float(match.group(1)) * scale
        if exact != int(exact):
            raise ValueError(f"{value!r} is not a whole number of bytes")
        number = int(exact)
    else:
        raise ValueError("expected a size such as 16384, '16KiB' or '2MiB'")
    if number <= 0 or number > MAX_BYTES:
        raise ValueError(f"size {number} bytes is out of range (1 byte .. 1 TiB)")
    return number


Bytes = Annotated[
    int,
    BeforeValidator(parse_bytes),
    WithJsonSchema({
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*([KMGkmg][iI]?[bB]|[bB])?\s*$"},
        ],
        "description": "bytes: an integer, or a string with a unit (B, KB, MB, KiB, MiB, GiB)",
    }),
]
