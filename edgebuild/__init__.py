"""edgebuild: make for tiny neural networks on microcontrollers and edge accelerators.

Importing this package is cheap on purpose: commands that do not train (`check`,
`status`, a no-op build) must never pay for torch.
"""

import os
import signal
import sys

__version__ = "0.1.0"


def _interrupted(number: int, frame: object) -> None:
    print(f"\nedgebuild: interrupted by {signal.Signals(number).name} while starting",
          file=sys.stderr, flush=True)
    os._exit(128 + number)


# The `edgebuild` program (not a library import): from its first import on, SIGINT,
# SIGTERM and SIGHUP end it with one line and status 128 + n, never a KeyboardInterrupt
# traceback out of some import. The interrupt supervisor (cli/supervisor.py) replaces
# these handlers with its own before it starts the work.
if sys.argv and os.path.basename(sys.argv[0]) == "edgebuild":
    for _number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_number, _interrupted)
