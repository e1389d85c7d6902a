"""Running edgebuild on hostile input, bounded: every case must end within a time and a
memory bound, with the exit status and the one line it promises.

`run_bounded` starts the CLI under a small wrapper that reports the peak resident memory
of the whole process tree (RUSAGE_CHILDREN of the wrapper: the CLI and every process it
waited for) and the wall time. A case that stalls is killed at its time bound (and fails);
the peak memory bound is checked after the fact. With EDGEBUILD_HOSTILE_TABLE=FILE set,
each case appends one JSON line (case, exit, seconds, peak MiB) to FILE:

    EDGEBUILD_HOSTILE_TABLE=/tmp/hostile.jsonl pytest tests/test_hostile_*.py
    python -c "import json; [print(json.loads(l)) for l in open('/tmp/hostile.jsonl')]"
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from conftest import edgebuild_cmd

# The wrapper: runs argv[1:], then prints "<peak KiB> <seconds>" on its last stderr line.
_WRAPPER = """\
import os, resource, signal, subprocess, sys, time
start = time.monotonic()
child = subprocess.Popen(sys.argv[2:], start_new_session=True)
try:
    code = child.wait(timeout=float(sys.argv[1]))
except subprocess.TimeoutExpired:  # the whole tree: the CLI's stages run in its group
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    code = -9
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write(f"\\n@@bounds {peak} {time.monotonic() - start:.3f}\\n")
sys.exit(code if code >= 0 else 124)
"""


@dataclass(frozen=True)
class Outcome:
    case: str
    code: int
    stdout: str
    stderr: str  # without the wrapper's line
    seconds: float
    peak_mib: float

    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_bounded(case: str, args: list[str], cwd: Path, *, seconds: float = 60,
                mib: float = 1024, env: dict[str, str] | None = None) -> Outcome:
    """Run `edgebuild ARGS` in `cwd`; fail the test if it outlives `seconds` or its process
    tree's peak memory exceeds `mib`."""
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run([sys.executable, "-c", _WRAPPER, str(seconds), *edgebuild_cmd(),
                             *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=seconds + 30)
    body, _, tail = result.stderr.rpartition("\n@@bounds ")
    peak_kib, elapsed = tail.split()
    outcome = Outcome(case, result.returncode, result.stdout, body, float(elapsed),
                      int(peak_kib) / 1024)
    _record(outcome)
    assert outcome.code != 124, f"{case}: still running after {seconds} s (killed)"
    assert outcome.peak_mib <= mib, f"{case}: peak memory {outcome.peak_mib:.0f} MiB > {mib}"
    return outcome


def assert_user_error(outcome: Outcome, *needles: str) -> None:
    """Exit 2, no traceback, and a message holding every needle."""
    assert outcome.code == 2, (outcome.case, outcome.code, outcome.stderr[-3000:])
    assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr, \
        outcome.stderr[-3000:]
    for needle in needles:
        assert needle in outcome.stderr, (outcome.case, needle, outcome.stderr[-3000:])


def _record(outcome: Outcome) -> None:
    table = os.environ.get("EDGEBUILD_HOSTILE_TABLE")
    if not table:
        return
    with open(table, "a") as handle:
        handle.write(json.dumps({"case": outcome.case, "exit": outcome.code,
                                 "seconds": round(outcome.seconds, 2),
                                 "peak_mib": round(outcome.peak_mib, 1)}) + "\n")
