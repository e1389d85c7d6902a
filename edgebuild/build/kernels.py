"""The CPU kernels torch may use in a build: x86-64's baseline, on every machine.

torch picks its CPU kernels by the instruction sets the processor has (AVX-512, AVX2, or
the baseline), and so do MKL and oneDNN beneath it; each choice rounds differently, so the
same manifest trained on two machines gave two checkpoints — and `edgebuild build
--locked`, whose lock promises output digests, failed on the second. edgebuild therefore
pins all three to the baseline in its own processes, before torch runs anything, and the
training stages check that the pin took. It costs some speed (see docs/internals/cache.md,
"Reproducible builds"); what it buys is the same bytes from the same inputs on any x86-64 machine.
"""

from __future__ import annotations

import os
import sys

from edgebuild.core.errors import StageFailed

PINNED = {
    "ATEN_CPU_CAPABILITY": "default",  # torch's own kernels: no AVX2/AVX-512 variants
    "MKL_CBWR": "COMPATIBLE",  # MKL: conditional numerical reproducibility, any CPU
    "ONEDNN_MAX_CPU_ISA": "SSE41",  # oneDNN (convolutions): the SSE4.1 code path
}
SIGNATURE = ",".join(f"{name}={value}" for name, value in sorted(PINNED.items()))
UNPINNED = "native"  # train.reproducible: false — whatever this CPU does fastest


def pin() -> None:
    """Set the pins for this process and everything it starts (before torch computes)."""
    os.environ.update(PINNED)


def check() -> None:
    """Fail if torch in this process already chose faster kernels than the pin allows
    (it had run before `pin`): its results would not be the promised bytes."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    chosen = torch.backends.cpu.get_cpu_capability()
    if chosen != "DEFAULT":
        raise StageFailed(f"torch chose its {chosen} CPU kernels before edgebuild could pin "
                          "them to the x86-64 baseline (ATEN_CPU_CAPABILITY=default); run "
                          "edgebuild in a fresh process")
