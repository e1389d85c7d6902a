"""The stage registry, in pipeline order. Later stages plug in here with one line each.

Importing this package registers the stages with the engine (`build.registry`), with how
to load a manifest (`pipeline.validation`, imported only when a manifest must be checked:
a no-op build never loads pydantic). The engine imports this package by name on first
use of its registry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.build import registry
from edgebuild.build.registry import STAGES, Provider, closure, upstream
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
    from pathlib import Path

    from edgebuild.pipeline.validation import Checked

__all__ = ["STAGES", "closure", "upstream"]

# The manifest checker: its result is each stage's config, keyed by value, so a stage's
# code key does not follow it (build.sources).
VALIDATION = "edgebuild.pipeline.validation"


def load(path: Path, display: str | None, target: str | None) -> Checked:
    from edgebuild.pipeline import validation

    return validation.load(path, display, target)


def load_all(path: Path, display: str | None) -> tuple[Checked, ...]:
    from edgebuild.pipeline import validation

    return validation.load_all(path, display)


def generated(name: str) -> str | None:
    """The text the code makes of an artifact schema generated from its records (model.v1:
    the layer records of every op), or None for one written by hand."""
    if name != "model.v1":
        return None
    from edgebuild.manifest import schema as manifest_schema

    return manifest_schema.render_model_artifact()


registry.STAGES.register(
    (validate.STAGE, data.STAGE, train.STAGE, qat.STAGE, quantize.STAGE, onnx.STAGE,
     evaluate.STAGE, plan.STAGE, accelerator.STAGE, codegen.STAGE, kat.STAGE,
     ondevice.STAGE, ondevice_kat.STAGE, report.STAGE),
    Provider(load=load, load_all=load_all, stage_modules=__name__,
             not_followed=frozenset({VALIDATION}), generated=generated))
