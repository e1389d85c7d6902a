"""The stage registry, in pipeline order. Later stages plug in here with one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.pipeline.stage import Stage
from edgebuild.pipeline.stages import (
    accelerator,
    codegen,
    data,
    evaluate,
    kat,
    ondevice,
    ondevice_kat,
    onnx,
    plan,
    qat,
    quantize,
    report,
    train,
    validate,
)

if TYPE_CHECKING:
    from collections.abc import Container

STAGES: dict[str, Stage] = {
    stage.name: stage
    for stage in (validate.STAGE, data.STAGE, train.STAGE, qat.STAGE, quantize.STAGE,
                  onnx.STAGE, evaluate.STAGE, plan.STAGE, accelerator.STAGE,
                  codegen.STAGE, kat.STAGE, ondevice.STAGE,
                  ondevice_kat.STAGE, report.STAGE)
}


def upstream(stage: Stage, active: Container[str]) -> tuple[str, ...]:
    """The stage's upstream stages that exist for a manifest (`active`: applicable names)."""
    return tuple(name for name in stage.upstream if name in active)


def closure(target: str) -> list[str]:
    """`target` and everything upstream of it, in pipeline order."""
    needed = {target}
    for name in reversed(list(STAGES)):
        if name in needed:
            needed.update(STAGES[name].upstream)
    return [name for name in STAGES if name in needed]
