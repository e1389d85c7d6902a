"""Where a model runs: the host and Cortex-M4 toolchains (builds, QEMU runs, instruction
counts) and the MAX7800x accelerators (device profiles, operator limits, placement and
memory maps, the vendor's network description in and out).

May import: core, ops, data, manifest, model, memory, codegen.
"""
