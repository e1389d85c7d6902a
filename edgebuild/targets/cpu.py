"""The CPU that runs a target's generated C: it decides which kernels the project compiles.

A generic target is its CPU (`host`, `cortex-m4`). An accelerator target's C runs on the
microcontroller core beside the accelerator: MAX78000 (family ai85) and MAX78002 (ai87)
pair the CNN accelerator with an Arm Cortex-M4F. There the C computes the device's number
format with the same integer kernels as any Cortex-M4 target: the format is in the values
the kernels are given (the 8-bit bias already scaled by 2^bias_scale_log2 into int32
accumulator units, each layer's shift and rounding in its parameters; see numerics), so
the dual-MAC kernels serve it unchanged.

The core is written here by family rather than in the profiles: every stage that reads a
profile is keyed by the profile files, and only the C project depends on the core.
"""

from __future__ import annotations

ACCELERATOR_CPUS = {"ai85": "cortex-m4", "ai87": "cortex-m4"}  # profile family -> its core
UNKNOWN_CPU = "unknown"  # an accelerator family not listed: the portable reference kernels


def cpu(device: str) -> str:
    """`host`, `cortex-m4`, or the core beside an accelerator (UNKNOWN_CPU if not known)."""
    from edgebuild.targets.max7800x import profile as devices

    if not devices.is_accelerator(device):
        return device
    return ACCELERATOR_CPUS.get(devices.profile(device).family, UNKNOWN_CPU)
