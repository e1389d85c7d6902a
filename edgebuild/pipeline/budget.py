"""The CPU budget of parallel stages: jobs x threads <= cores.

torch (and the BLAS/OpenMP libraries under numpy) start one thread per core by default.
With `-j N`, N stage processes would each run that many threads on the same cores and
thrash: on 2 cores three trainings took 48.5 s with -j 1 and 81.9 s with -j 4. Each stage
process therefore gets cores // jobs threads (at least one) before it computes anything.
"""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def cores() -> int:
    """Cores this process may run on (the affinity mask: containers and taskset count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_per_stage(jobs: int) -> int:
    return max(1, cores() // max(1, jobs))


def apply(threads: int) -> None:
    """Limit this (stage) process to `threads` compute threads: the variables for
    libraries loaded later and for child processes, torch's pools if already loaded."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
