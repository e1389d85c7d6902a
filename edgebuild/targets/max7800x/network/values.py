"""Small value parsers of the network description: processor maps, byte offsets, sizes
and flags as the toolchain spells them. Each returns None for a value it cannot read (the
caller reports it, naming the key).
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

# Processor maps are 64-bit (the manual: "processors is specified as a 64-bit hexadecimal
# value"), whatever the device: its own processor count is placement's to check.
MAP_BITS = 64
_HEX = re.compile(r"^(0x)?[0-9a-f][0-9a-f._]*$", re.IGNORECASE)


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_processor_map(value: Any) -> int | None:
    """A 64-bit processor map: an int or a hex string (dots, underscores, `0x` ignored)."""
    if isinstance(value, str):
        text = value.strip()
        if not _HEX.match(text):
            return None
        value = int(text.lower().removeprefix("0x").replace(".", "").replace("_", ""), 16)
    if is_int(value) and 0 < value < 1 << MAP_BITS:
        return value
    return None


def parse_offset(value: Any) -> int | None:
    if isinstance(value, str) and _HEX.match(value.strip()):
        value = int(value.strip().lower().removeprefix("0x").replace(".", "").replace("_", ""), 16)
    return value if is_int(value) and 0 <= value <= 1 << 24 else None


def pair_or_int(value: Any) -> int | tuple[int, int] | None:
    """2 -> 2, [2, 2] -> 2, [2, 3] -> (2, 3); None when it is neither."""
    if is_int(value) and value >= 1:
        return value
    if isinstance(value, list) and len(value) == 2 and all(is_int(v) and v >= 1 for v in value):
        return value[0] if value[0] == value[1] else (value[0], value[1])
    return None


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


def popcount(value: int | None) -> int:
    return 0 if value is None else bin(value).count("1")
