"""What `cnn.h` tells a firmware author besides the API: how a raw input value becomes the
model's int8 input, and the names of the classes its outputs score.

The conversion is the data stage's (pipeline/stages/data.py), which made every training,
test and known-answer input: x' = (x - offset) / scale with the training split's
statistics (one pair, or one per channel), then `numerics.np_quantize_inputs`: q =
floor(128 x' + 0.5) saturated to [-128, 127], all in float64. The header carries offset
and scale as exact double literals and does the same operations in double, in the same
order, so it gives edgebuild's int8 inputs bit for bit (tests/test_header.py checks it).
The product 128 x' is exact (a power of two), so a compiler that fuses it with the + 0.5
into one multiply-add still rounds the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgebuild.core import numerics


@dataclass(frozen=True)
class InputFormat:
    """What the data stage recorded of a model's inputs and classes (data.json, read by
    the codegen stage: data.info.DataInfo); a model without a dataset has neither."""

    method: str  # "minmax" | "standard" (training-split statistics) | "none" | "scale"
    offset: tuple[float, ...]  # x' = (x - offset) / scale: one value, or one per channel
    scale: tuple[float, ...]
    labels: tuple[str, ...]  # class names in output order


def c_double(value: float) -> str:
    """A C literal of exactly this double: Python's shortest round-trip form (`8.0`,
    `1e-05`), which a C compiler reads back to the same double (hex floats would not
    compile as C++ before C++17)."""
    number = float(value)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"not a finite number: {value}")
    return repr(number)


def c_string(text: str) -> str:
    """A C string literal of `text` (UTF-8): `"`, `\\` and `?` (no trigraphs) escaped, every
    byte outside printable ASCII as a three-digit octal escape."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\?':
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def normalization_context(inputs: InputFormat, input_size: int) -> dict[str, Any] | None:
    """cnn.h's normalization constants: one offset/scale pair per group of consecutive input
    values (channels first: a channel's values are consecutive). None when the groups do not
    tile one inference's input (per-value statistics of a 1-D sample cut into frames)."""
    groups = len(inputs.offset)
    if groups == 0 or groups > input_size or input_size % groups:
        return None
    return {"method": inputs.method, "groups": groups, "group_size": input_size // groups,
            "offsets": [c_double(v) for v in inputs.offset],
            "scales": [c_double(v) for v in inputs.scale]}


def context(inputs: InputFormat | None, input_size: int, outputs: int) -> dict[str, Any]:
    """The template values of the normalization and the labels. Labels only when the
    dataset's classes are the outputs (validation requires it of a dataset model)."""
    numbers = {"act_scale": c_double(numerics.ACT_SCALE), "q_min": numerics.INT8_MIN,
               "q_max": numerics.INT8_MAX}
    if inputs is None:
        return {**numbers, "has_dataset": False, "normalization": None, "labels": []}
    labels = inputs.labels if len(inputs.labels) == outputs else ()
    return {**numbers, "has_dataset": True,
            "normalization": normalization_context(inputs, input_size),
            "labels": [c_string(label) for label in labels]}
