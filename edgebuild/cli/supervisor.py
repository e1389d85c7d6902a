"""Interrupts: SIGINT, SIGTERM or SIGHUP at any moment end `edgebuild` within about a
second, with one line and exit status 128 + signal number (130, 143, 129).

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be: in
an import, in doit (which reports it as a failed action and carries on), in torch's C++
(which may abort the process), or nowhere at all while a C call runs. So the `edgebuild`
command is two processes. This supervisor imports nothing heavy and only waits; the
command runs in a forked worker in its own process group, together with everything it
starts (doit's workers, compilers, QEMU). On a signal the supervisor kills that whole
group with SIGKILL, reaps it, prints one line and exits.

Killing is safe because nothing edgebuild writes is ever trusted half-written: cache
entries, build-tree stages, state records and the lock file are all published by an
atomic rename, so a kill at any instant leaves either the old or the new version, plus
temporary directories that the next build (build tree) and `cache gc` (cache) remove.
Finished stages stay cached; the next build continues from them.

Ctrl-Z stops the worker's group with the supervisor, and `fg` resumes both. If the
supervisor itself is killed with SIGKILL, the worker gets SIGKILL too (Linux
PR_SET_PDEATHSIG). Where fork does not exist, the command runs in-process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}
REAP_S = 1.5  # a SIGKILLed group is gone in milliseconds; never wait longer than this


def run(command: Callable[[], int]) -> int:
    """Run `command` in a supervised worker; its exit status, or 128 + a signal's number.

    The handlers are in place before the fork (edgebuild/__init__.py installs the same
    ones even earlier, for the program's own imports): there is no moment at which a
    signal meets Python's default KeyboardInterrupt."""
    if not hasattr(os, "fork"):
        return command()
    parent = os.getpid()
    worker: list[int] = []  # the worker's pid, once forked
    install(lambda: worker[0] if worker else None)
    pid = os.fork()
    if pid == 0:
        _worker(command, parent)
    worker.append(pid)
    return _supervise(pid)


def install(worker: Callable[[], int | None]) -> None:
    """SIGINT/SIGTERM/SIGHUP: kill the worker's group if there is one yet, one line, exit
    128 + n. In a freshly forked worker that has not reset them yet, exit silently: the
    supervisor speaks for both."""
    supervisor = os.getpid()

    def stop(number: int, frame: FrameType | None) -> None:
        if os.getpid() != supervisor:
            os._exit(128 + number)
        pid = worker()
        if pid is not None:
            _kill_group(pid)
        print(f"\nedgebuild: interrupted by {NAMES[signal.Signals(number)]}; finished "
              "stages are cached, run edgebuild again to continue", file=sys.stderr, flush=True)
        os._exit(128 + number)

    for number in NAMES:
        signal.signal(number, stop)


def _worker(command: Callable[[], int], parent: int) -> None:
    code = 1
    try:
        os.setpgid(0, 0)
        _die_with(parent)
        _forked_children_die_with_parents()
        for number in NAMES:  # the supervisor decides what a signal means
            signal.signal(number, signal.SIG_DFL)
        code = command()
    except SystemExit as exc:  # argparse's --help, --version and usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def _die_with(parent: int) -> None:
    """Linux: SIGKILL this worker when the supervisor dies, however it dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl
        os._exit(128 + int(signal.SIGKILL))


def _forked_children_die_with_parents() -> None:
    """Every process forked below the worker (doit's `-j N` stage processes) gets the same
    death signal for its own parent. Without it a supervisor killed alone (`kill -9 PID`)
    took only the worker with it: doit's stage processes lived on as orphans, blocked
    forever on their task queue and holding the build tree's claim lock they inherited, so
    every later build of that tree printed "waiting for edgebuild (pid ...)" and hung for
    up to an hour (tests/test_faults.py). Programs started with subprocess (compilers,
    QEMU) are not forked by Python, keep no lock and end on their own."""
    forking = [os.getpid()]  # the process about to fork: the child's parent

    def before() -> None:
        forking[0] = os.getpid()

    def after_in_child() -> None:
        _die_with(forking[0])

    os.register_at_fork(before=before, after_in_child=after_in_child)


def _supervise(pid: int) -> int:
    try:
        os.setpgid(pid, pid)  # also here: whichever runs first, no signal finds no group
    except OSError:
        pass  # the worker already did it, or has already exited

    _forward_job_control(pid)
    _, status = os.waitpid(pid, 0)  # PEP 475: retried after a handler that returns
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the worker was killed from outside (the OOM killer, kill -9)
        print(f"edgebuild: the build process was killed by {signal.Signals(-code).name}",
              file=sys.stderr, flush=True)
        return 128 - code
    return code


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        return
    deadline = time.monotonic() + REAP_S
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.01)


def _forward_job_control(pid: int) -> None:
    """Ctrl-Z reaches only the supervisor's (foreground) group: stop the worker's too."""
    def suspend(number: int, frame: FrameType | None) -> None:
        _signal_group(pid, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stops here until SIGCONT
        signal.signal(signal.SIGTSTP, suspend)

    def resume(number: int, frame: FrameType | None) -> None:
        _signal_group(pid, signal.SIGCONT)

    signal.signal(signal.SIGTSTP, suspend)
    signal.signal(signal.SIGCONT, resume)


def _signal_group(pid: int, number: int) -> None:
    try:
        os.killpg(pid, number)
    except OSError:
        pass
