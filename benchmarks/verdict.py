"""The end of every benchmark: its failed checks on stderr (or OK), and the exit status."""

from __future__ import annotations

import sys


def verdict(failures: list[str]) -> int:
    """Print `FAIL: ...` per failed check, else `OK`; 1 if any failed, else 0."""
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    if not failures:
        print("OK")
    return 1 if failures else 0
