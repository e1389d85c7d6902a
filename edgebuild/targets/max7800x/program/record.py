"""What the accelerator stage made (`accelerator.json`, schema accelerator.v1): the MSDK
project's directory and files, and the figures the report shows about it — so the report
can say which code runs where (the accelerator program in `max7800x/`, the Cortex-M4
software emulation of the same network in `codegen/`) without reading C.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson

FILE = "accelerator.json"
PROJECT = "max7800x"  # the MSDK project's directory, in the stage and in build/<name>/
VERSION = 1


@dataclass(frozen=True)
class ProgramRecord:
    device: str  # the manifest's target device (max78000, max78002)
    files: tuple[str, ...]  # the project's files, in PROJECT/
    layers: int  # hardware layers the accelerator runs
    quadrants: tuple[int, ...]  # quadrants the program enables
    kernel_bytes: int  # kernel-memory words loaded x 4
    bias_bytes: int
    output_words: int  # data-memory words the known-answer test checks
    # why no program was generated (a layer the generator cannot program yet; the
    # Cortex-M4 emulation in codegen/ still runs the network), None when it was
    unsupported: str | None = None
    project: str = f"{PROJECT}/"
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "device": self.device, "project": self.project,
                "files": list(self.files), "layers": self.layers,
                "quadrants": list(self.quadrants), "kernel_bytes": self.kernel_bytes,
                "bias_bytes": self.bias_bytes, "output_words": self.output_words,
                "unsupported": self.unsupported}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProgramRecord:
        return cls(data["device"], tuple(data["files"]), data["layers"],
                   tuple(data["quadrants"]), data["kernel_bytes"], data["bias_bytes"],
                   data["output_words"], data["unsupported"], data["project"],
                   data["version"])

    @classmethod
    def refused(cls, device: str, reason: str) -> ProgramRecord:
        """The record of a network the generator cannot program yet: no project."""
        return cls(device, (), 0, (), 0, 0, 0, reason)

    @classmethod
    def load(cls, directory: Path) -> ProgramRecord:
        return cls.from_json(boundedjson.read(directory / FILE))
