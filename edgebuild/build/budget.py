"""The CPU budget of parallel stages: jobs x threads <= cores, imports paid once.

torch (and the BLAS/OpenMP libraries under numpy) start one thread per core by default.
With `-j N`, N stage processes would each run that many threads on the same cores and
thrash: on 2 cores three trainings took 48.5 s with -j 1 and 81.9 s with -j 4. So:
- at most one stage process per core (`workers`): more only add contention;
- each gets cores // jobs threads (at least one) before it computes anything (`apply`);
- the heavy libraries are imported once, in the scheduler's process, before it forks its
  workers (`preload`): importing torch, the torch._dynamo that deterministic algorithms
  load, and matplotlib costs about 5 s of CPU per process, which every worker otherwise
  pays again (measured with benchmarks/jobs.py). Importing starts no threads, so the
  fork stays safe; the threads settings are in place before OpenMP loads.
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


def workers(jobs: int) -> int:
    """Stage processes actually run for `-j jobs`."""
    return max(1, min(jobs, cores()))


def threads_per_stage(jobs: int) -> int:
    return max(1, cores() // workers(jobs))


PRELOAD = ("numpy", "torch", "torch._dynamo", "matplotlib.pyplot")  # dynamo: an optimizer's first step


def preload(threads: int) -> None:
    """Import what stage processes import anyway, once, before they are forked."""
    import importlib

    apply(threads)
    try:
        import matplotlib

        matplotlib.use("Agg")  # as train.plots does: no display in a build
        for name in PRELOAD:
            importlib.import_module(name)
    except ImportError:  # an optimization only: the stage itself reports what is missing
        return


def apply(threads: int) -> None:
    """Limit this (stage) process to `threads` compute threads: the variables for
    libraries loaded later and for child processes, torch's pools if already loaded."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
