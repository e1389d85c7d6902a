"""Stage `codegen`: the C project (static kernels + rendered glue + KAT vectors).

The KAT vectors are the first test samples and the integer reference's outputs for them
(never the float model's); cnn.h also carries the data stage's input normalization and
class names. See edgebuild/codegen/ for the renderer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads jinja2 or numpy
    from edgebuild.codegen.header import InputFormat
    from edgebuild.codegen.project import ProjectSpec
    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.pipeline.validation import Checked

KAT_SAMPLES = 8


def config(checked: Checked) -> JSONObject:
    manifest = checked.manifest
    return {"name": manifest.name, "target": manifest.target.model_dump(mode="json", exclude={"name"}),
            "kat_samples": KAT_SAMPLES}


def template_files(checked: Checked) -> list[Path]:
    """Every shipped template: their content keys the C project (a fixed kernel or an
    edgebuild upgrade regenerates it), checked live like data files."""
    from edgebuild.core.resources import template_files as shipped

    return shipped()


def spec_for(ctx: Context[Checked]) -> ProjectSpec:
    from edgebuild.codegen import project as codegen
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model import knownanswer, quantized
    from edgebuild.targets.cpu import cpu

    manifest = ctx.checked.manifest
    kat_inputs, kat_expected = knownanswer.vectors(ctx.checked, ctx.inputs, KAT_SAMPLES)
    return codegen.ProjectSpec(
        name=manifest.name, model=quantized.load(ctx.inputs["quantize"], manifest),
        plan=MemoryPlan.load(ctx.inputs["plan"]),
        kat_inputs=kat_inputs, kat_expected=kat_expected,
        flash_bytes=manifest.target.memory.flash,
        ram_bytes=manifest.target.memory.l2 + manifest.target.memory.l1,  # L1 scratchpad in RAM too
        device=cpu(manifest.target.device.value), inputs=input_format(ctx))


def input_format(ctx: Context[Checked]) -> InputFormat | None:
    """The data stage's normalization and class names, for cnn.h (no dataset: None)."""
    from edgebuild.codegen.header import InputFormat
    from edgebuild.data.info import DataInfo

    if "data" not in ctx.inputs:
        return None
    info = DataInfo.load(ctx.inputs["data"])
    return InputFormat(info.normalize.method, info.normalize.offset, info.normalize.scale,
                       info.classes)


def run(ctx: Context[Checked]) -> None:
    from edgebuild.codegen import project as codegen

    files = codegen.render(spec_for(ctx))
    for relative, text in files.items():
        path = ctx.out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ctx.log(f"codegen: {len(files)} files")


STAGE = Stage("codegen", ("plan", "quantize", "evaluate", "data"), config, run,
              "C project: kernels, layer calls, const weights, KAT vectors, Makefile",
              tools=("jinja2",), files=lambda checked: template_files(checked) + kat_files(checked),
              facets=("c", "stream"))


def kat_files(checked: Checked) -> list[Path]:
    from edgebuild.model import knownanswer

    return knownanswer.files(checked)
