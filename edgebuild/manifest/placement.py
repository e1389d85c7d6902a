"""The manifest's `placement` section: where a layer runs on a MAX7800x-style device.

Field names follow the MAX7800x network description (processors, output_processors,
in_offset, out_offset, data_format, write_gap, read_gap, bias_group, streaming) so a user of that
toolchain recognizes them. Processor maps are 64-bit masks, written as YAML integers
(`0x0000000000000ff0`) or strings with dots (`0x0000.0000.0000.0ff0`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from edgebuild.core.fields import Strict

_HEX = re.compile(r"^(0x)?[0-9a-f][0-9a-f._]*$", re.IGNORECASE)


def parse_processors(value: object) -> object:
    """A 64-bit processor map from an int or a hex string (dots and `0x` ignored)."""
    if isinstance(value, bool):
        raise ValueError("a processor map is a 64-bit hex number such as 0x0000000000000ff0")
    if isinstance(value, str):
        text = value.strip()
        if not _HEX.match(text):
            raise ValueError(f"{value!r} is not a hex processor map such as 0x0000.0000.0000.0ff0")
        value = int(text.lower().removeprefix("0x").replace(".", "").replace("_", ""), 16)
    if isinstance(value, int) and not 0 < value < 1 << 64:
        raise ValueError(f"processor map {value:#x} must have between 1 and 64 bits set "
                         "within 64 bits")
    return value


ProcessorMap = Annotated[int, BeforeValidator(parse_processors),
                         WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                                   {"type": "string", "pattern": _HEX.pattern}],
                                         "description": "64-bit processor map"})]
Offset = Annotated[int, Field(strict=True, ge=0, le=1 << 24)]


def _format(value: object) -> object:
    aliases = {"hwc": "HWC", "little": "HWC", "chw": "CHW", "big": "CHW"}
    return aliases.get(value.lower(), value) if isinstance(value, str) else value


class LayerPlacement(Strict):
    processors: ProcessorMap | None = Field(default=None, description="processors reading the "
                                            "layer's input (one per channel, see multi-pass)")
    output_processors: ProcessorMap | None = Field(
        default=None, description="data memories and word positions the output is written to; "
                                  "default: the next layer's processors")
    in_offset: Offset | None = Field(default=None, description="byte offset of the input in each "
                                     "data memory instance; default: previous out_offset")
    out_offset: Offset | None = Field(default=None, description="byte offset of the output")
    data_format: Annotated[Literal["HWC", "CHW"] | None, BeforeValidator(_format)] = Field(
        default=None, description="first layer only: input layout")
    write_gap: int | None = Field(strict=True, default=None, ge=0, le=64,
                                  description="words skipped between output words (interleaving)")
    read_gap: int | None = Field(strict=True, default=None, ge=0, le=64,
                                 description="MAX78002: words skipped between input words "
                                             "(reads write_gap data directly)")
    bias_group: int | tuple[Annotated[int, Field(strict=True, ge=0)], ...] | None = Field(
        default=None, description="bias memory (quadrant) or list of them")
    streaming: bool = Field(default=False, description="stream the layer's input through FIFOs")
