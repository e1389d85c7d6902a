"""User-facing errors.

A user error (bad manifest, missing data file, budget too small) is not a bug: it is
printed as `FILE:LINE:COL: field.path: message` lines and the process exits with status 2,
never with a traceback. A failing stage (a bug, a compiler error) exits with status 1.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_STAGE_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT; SIGTERM gives 128 + 15


@dataclass(frozen=True)
class Diagnostic:
    """One problem at one place: the unit every validation step reports."""

    file: str
    message: str
    line: int | None = None
    col: int | None = None
    field: str = ""

    def render(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}:{self.col or 1}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class UserError(Exception):
    """Carries every diagnostic found, so the user fixes them all in one round."""

    def __init__(self, diagnostics: Sequence[Diagnostic | str] | Diagnostic | str) -> None:
        if isinstance(diagnostics, str | Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = [d if isinstance(d, Diagnostic) else Diagnostic("edgebuild", d)
                            for d in diagnostics]
        super().__init__("\n".join(d.render() for d in self.diagnostics))


class StageFailed(Exception):
    """A stage could not produce its artifact for a reason that is not a user error."""


_ADVICE = {
    errno.ENOSPC: "free space on that disk",
    errno.EDQUOT: "free space on that disk (quota exceeded)",
    errno.EFBIG: "the file outgrew a size limit (ulimit -f?)",
    errno.EACCES: "make it writable (or readable) for this user",
    errno.EPERM: "make it writable (or readable) for this user",
    errno.EROFS: "that file system is read-only; build somewhere writable",
}


def describe(exc: OSError) -> str:
    """One line for an I/O error: what failed, on which path, and what to do about it."""
    copy = _failed_copy(exc)
    if copy is not None:
        return copy
    what = exc.strerror or type(exc).__name__
    where = f": {exc.filename}" if exc.filename else ""
    advice = _ADVICE.get(exc.errno or 0)
    return f"{what}{where}" + (f" ({advice})" if advice else "")


def _failed_copy(exc: OSError) -> str | None:
    """`shutil.copytree` (restoring a stage from the cache) raises one `shutil.Error`
    holding `(source, destination, reason)` per file, with no errno, strerror or filename:
    described like any OSError it read "stage report: Error" on a full disk
    (tests/test_faults.py). Describe its first failure, errno advice included."""
    failures = exc.args[0] if len(exc.args) == 1 else None
    if not (isinstance(failures, list) and failures and isinstance(failures[0], tuple)
            and len(failures[0]) == 3):
        return None
    _, destination, reason = failures[0]
    more = f" (and {len(failures) - 1} more files)" if len(failures) > 1 else ""
    match = re.match(r"\[Errno (\d+)\] ([^:]+)", str(reason))
    if match is None:
        return f"copying {destination} failed: {reason}{more}"
    number = int(match.group(1))
    return describe(OSError(number, match.group(2), str(destination))) + more
