"""edgebuild: make for tiny neural networks on microcontrollers and edge accelerators.

Importing this package is cheap on purpose: commands that do not train (`check`,
`status`, a no-op build) must never pay for torch.
"""

__version__ = "0.1.0"
