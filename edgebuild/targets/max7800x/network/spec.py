"""The records the network description is read into: one `Spec` per layer, one `DataBuffer`
per `data_buffer` entry, and the `Reporter` that collects every problem with its position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgebuild.core import document as yamlsource
from edgebuild.core.document import Loc
from edgebuild.core.errors import Diagnostic, UserError


@dataclass
class Spec:
    """One layer of the network description, normalized (keys lower case, synonyms merged,
    values parsed); `keys` maps each normalized key to the key as written (for positions)."""

    index: int
    keys: dict[str, str]
    raw: dict[str, Any]
    seq: int = 0
    yaml_name: str | None = None
    op: str = "conv2d"
    eltwise: str | None = None
    kernel: int | tuple[int, int] | None = None
    pad: int | None = None
    stride: int = 1
    dilation: int | tuple[int, int] = 1
    groups: int = 1
    # mode, size, stride (None until `pool_stride` is read)
    pool: tuple[str, int | tuple[int, int], int | tuple[int, int] | None] | None = None
    pool_first: bool = True
    act: str = "none"
    flatten: bool = False
    wide: bool = False
    refs: list[Any] | None = None
    inputs: list[int] = field(default_factory=list)  # spec positions; -1 = the model input
    operands: int | None = None
    processors: int | None = None
    output_processors: int | None = None
    in_offset: int | None = None
    out_offset: int | None = None
    data_format: str | None = None
    write_gap: int | None = None
    read_gap: int | None = None
    bias_group: int | list[int] | None = None
    streaming: bool = False
    in_channels: int | None = None
    out_channels: int | None = None
    in_dim: int | list[int] | None = None
    quantization: int | None = None
    output_shift: int | None = None
    buffer_shift: int | None = None  # shifts a data buffer (the buffer layer's hardware layer)
    buffer_insert: int | None = None  # writes its output into a data buffer's newest word
    length: int | None = None  # op "buffer" (made from a data_buffer entry): frames kept


@dataclass(frozen=True)
class DataBuffer:
    """One `data_buffer` entry: `dim` words per channel at `offset`, on `processors`."""

    index: int
    name: str
    processors: int
    dim: int
    channels: int
    offset: int


class Reporter:
    """Collects every problem of the network description (errors and warnings)."""

    def __init__(self, document: yamlsource.Document):
        self.document = document
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    def diagnostic(self, loc: Loc, message: str) -> Diagnostic:
        return self.document.diagnostic(loc, message)

    def error(self, loc: Loc, message: str) -> None:
        self.errors.append(self.diagnostic(loc, message))

    def warn(self, loc: Loc, message: str) -> None:
        self.warnings.append(self.diagnostic(loc, message))

    def layer_error(self, spec: Spec, key: str | None, message: str) -> None:
        self.error(_loc(spec, key), f"layer {spec.index}: {message}")

    def layer_warn(self, spec: Spec, key: str | None, message: str) -> None:
        self.warn(_loc(spec, key), f"layer {spec.index}: {message}")

    def raise_errors(self) -> None:
        if self.errors:
            ordered = sorted(self.errors, key=lambda d: (d.line or 0, d.col or 0))
            raise UserError(ordered)


def _loc(spec: Spec, key: str | None) -> Loc:
    if key is None:
        return ("layers", spec.index)
    return ("layers", spec.index, spec.keys.get(key, key))
