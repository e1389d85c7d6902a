"""Stage log lines under `-j`: each prefixed with the stage it belongs to.

Stages running side by side in several processes write to the same terminal; without a
prefix, "epoch 3/30 ..." of one manifest and "plan: arena ..." of another interleave and
nobody can tell which is which. In a stage process, `prefixed` wraps stderr and stdout so
that every line starts with `[manifest.stage]`. Progress bars are turned off there
(`isatty` is False): redrawn lines do not survive a prefix, and `-j` logs are read later.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO


class Prefixed:
    """A text stream that starts every line it passes on with `prefix`."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        self.stream, self.prefix, self.at_start = stream, prefix, True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            if self.at_start:
                out.append(self.prefix)
            out.append(piece)
            self.at_start = piece.endswith(("\n", "\r"))
        self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return self.stream.encoding


@contextlib.contextmanager
def prefixed(name: str) -> Iterator[None]:
    """Within: this process's stderr and stdout lines start with `[name] `."""
    saved = sys.stderr, sys.stdout
    sys.stderr = Prefixed(saved[0], f"[{name}] ")
    sys.stdout = Prefixed(saved[1], f"[{name}] ")
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stdout.flush()
        sys.stderr, sys.stdout = saved
