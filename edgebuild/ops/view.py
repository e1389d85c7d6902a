"""What the views (flatten, reshape, passthrough) share: no code in the generated C. Every
deployed tensor is stored channels first and contiguous, so a view's output is its input's
bytes; the plan gives it no step and no buffer, and its readers read its input."""

from __future__ import annotations

from edgebuild.ops.c import CCode, CStep
from edgebuild.ops.operator import C, LayerBase


def no_code(step: CStep[LayerBase]) -> CCode:
    """Never called for a planned model (views get no step); an empty step if it were."""
    return CCode()


VIEW_C = C(no_code)
