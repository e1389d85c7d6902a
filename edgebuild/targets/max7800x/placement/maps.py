"""Processor maps as ints (bit p = processor p) and as text.
"""

from __future__ import annotations

from collections.abc import Iterable


def bits(mask: int) -> list[int]:
    """The processors of a map, lowest first."""
    return [p for p in range(mask.bit_length()) if mask >> p & 1]


def mask(processors: Iterable[int]) -> int:
    """The map of the processors `processors`."""
    out = 0
    for p in processors:
        out |= 1 << p
    return out


def hexmap(value: int) -> str:
    """A map as the network description writes it: 64-bit hex."""
    return f"0x{value:016x}"


def first(count: int) -> int:
    """The map of processors 0 .. count - 1."""
    return (1 << count) - 1


def spans(processors: list[int]) -> str:
    """`0-3, 8` for [0, 1, 2, 3, 8]."""
    runs: list[list[int]] = []
    for p in processors:
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
