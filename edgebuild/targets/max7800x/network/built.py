"""The edgebuild model being built from a network description, and its layer names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from edgebuild.core.fields import C_KEYWORDS
from edgebuild.targets.max7800x.network.hardware import HardwareLayer

NAME_LIMIT = 48


def identifier(text: str, used: set[str], limit: int = NAME_LIMIT) -> str:
    """A valid, unused edgebuild layer name made from `text`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "l"
    if not name[0].isalpha():
        name = "l" + name
    name = name[:limit]
    if name in C_KEYWORDS or name == "input":
        name = name[: limit - 1] + "_"
    base, n = name, 2
    while name in used:
        suffix = f"_{n}"
        name = base[: limit - len(suffix)] + suffix
        n += 1
    used.add(name)
    return name


@dataclass
class Built:
    layers: list[dict] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)  # spec position of every layer
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    hardware: list[HardwareLayer] = field(default_factory=list)
    placement: dict[str, dict] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    from_maps: list[str] = field(default_factory=list)  # layers whose channels came from maps
    weight_bits: dict[str, int] = field(default_factory=dict)  # `quantization`, no checkpoint
    shifts_ignored: list[str] = field(default_factory=list)  # `output_shift`, no checkpoint


def first_input(linked: dict, built: Built) -> str:
    return (linked.get("inputs") or [built.layers[-1]["name"] if built.layers else "input"])[0]
