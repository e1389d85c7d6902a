"""Advisory file locks between edgebuild processes (cache keys, stages, build trees).

On POSIX this is `fcntl.flock` on an open descriptor: the kernel releases it when the
holder exits however it exits (kill -9 included), so a lock is never stale. The filelock
package does the same and more, but importing it costs 60-80 ms (it loads logging and
inspect), a fifth of the no-op build budget, and every build takes locks. Elsewhere
(Windows) the filelock package is used, imported only there.
"""

from __future__ import annotations

import os
import time
from types import TracebackType

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]

POLL_S = 0.05


class Timeout(Exception):
    """The lock stayed taken for the whole timeout."""


class FileLock:
    """`with FileLock(path, timeout):` or `lock.acquire(timeout=0)` (then Timeout when
    another process holds it). Not reentrant: one holder per open descriptor."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self._fd: int | None = None
        self._fallback: object | None = None

    def acquire(self, timeout: float | None = None) -> FileLock:
        wait = self.timeout if timeout is None else timeout
        if fcntl is None:
            return self._acquire_fallback(wait)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise Timeout(self.path) from None
                time.sleep(POLL_S)

    def release(self) -> None:
        if self._fallback is not None:
            self._fallback.release()  # type: ignore[attr-defined]
            self._fallback = None
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor releases the flock

    def _acquire_fallback(self, wait: float) -> FileLock:
        import filelock

        lock = filelock.FileLock(self.path)
        try:
            lock.acquire(timeout=wait)
        except filelock.Timeout:
            raise Timeout(self.path) from None
        self._fallback = lock
        return self

    def __enter__(self) -> FileLock:
        return self.acquire() if self._fd is None and self._fallback is None else self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()
