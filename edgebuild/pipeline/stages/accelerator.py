"""Stage `accelerator`: for a MAX78000/MAX78002 target, the program of the CNN accelerator
itself — an MSDK project (cnn.c, cnn.h, weights.h, sampledata.h, sampleoutput.h, main.c,
Makefile, project.mk) in `max7800x/`, also exported to build/<name>/max7800x/.

It runs the network on the accelerator, placed as the plan stage placed it, with the
quantize stage's weights; its known-answer test is the first KAT vector (the manifest's
`kat`, else the first test sample) with the integer reference's output for it. The C
project of stage codegen stays: it is the same network emulated in software on the
Cortex-M4 core (the host KAT over every test sample, and the fallback for what the
accelerator cannot run). The program's register, memory and data words are what the
vendor's synthesis tool would write for the same network (targets/max7800x/program).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light (a no-op build imports no numpy)
    from pathlib import Path

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.pipeline.validation import Checked
    from edgebuild.targets.max7800x.program.record import ProgramRecord

PROJECT = "max7800x"  # == program.record.PROJECT (tested)
FILES = ("Makefile", "cnn.c", "cnn.h", "main.c", "project.mk", "sampledata.h",
         "sampleoutput.h", "weights.h")  # == program.text.FILES (tested)


def applies(checked: Checked) -> bool:
    from edgebuild.targets.max7800x import profile as devices

    return devices.is_accelerator(checked.manifest.target.device.value)


def config(checked: Checked) -> JSONObject:
    manifest = checked.manifest
    return {"name": manifest.name, "target": manifest.target.model_dump(mode="json", exclude={"name"}),
            "placement": {name: entry.model_dump(mode="json")
                          for name, entry in sorted(manifest.placement.items())}}


def template_files(checked: Checked) -> list[Path]:
    """The project's templates and the manifest's known-answer files: their content keys
    the stage."""
    from edgebuild.core.resources import templates_dir
    from edgebuild.model import knownanswer

    root = templates_dir() / PROJECT
    return sorted(root / f"{name}.j2" for name in FILES) + knownanswer.files(checked)


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.model import knownanswer
    from edgebuild.model.quantization import Quantization
    from edgebuild.targets.max7800x import profile as devices
    from edgebuild.targets.max7800x.program import build, device, record, text

    manifest = ctx.checked.manifest
    rows = Quantization.load(ctx.inputs["quantize"]).layers
    bits = {row.name: row.bits for row in rows}
    # the output shifts are in quant.json; the program reads them beside the weights
    weights = {**arrays.load(ctx.inputs["quantize"] / "weights.npz"),
               **{f"{row.name}.scale_exp": np.array(row.scale_exp) for row in rows}}
    inputs, expected = knownanswer.vectors(ctx.checked, ctx.inputs, 1)
    part = manifest.target.device.value
    try:
        program = build.for_manifest(manifest, bits, weights, inputs[0], expected[0])
    except NotImplementedError as exc:
        _write(ctx, record.ProgramRecord.refused(part, str(exc)))
        ctx.log(f"accelerator: no program generated ({exc}); the Cortex-M4 emulation "
                "(codegen/) runs the network")
        return
    dev = device.device(devices.profile(part).family)
    files = text.render(dev, program, text.Project(manifest.name, part.upper()))
    (ctx.out / PROJECT).mkdir()
    for name, body in files.items():
        (ctx.out / PROJECT / name).write_text(body)
    summary = record.ProgramRecord(
        part, tuple(sorted(files)), len(program.configure),
        tuple(sorted({dev.quadrant(w.address) for w in program.start})),
        program.kernel_words * 4, program.bias_bytes, len(program.expected))
    _write(ctx, summary)
    ctx.log(f"accelerator: {summary.layers} layers on {part.upper()}, MSDK project in "
            f"{PROJECT}/")


def _write(ctx: Context[Checked], made: ProgramRecord) -> None:
    from edgebuild.targets.max7800x.program.record import FILE

    (ctx.out / FILE).write_text(json.dumps(made.to_json(), indent=1, sort_keys=True) + "\n")


STAGE = Stage("accelerator", ("quantize", "evaluate", "plan", "data"), config, run,
              "MAX7800x accelerator program: the MSDK project (cnn.c, weights.h, KAT)",
              tools=("jinja2", "numpy"), files=template_files, applies=applies,
              exports=tuple(f"{PROJECT}/{name}" for name in FILES),
              artifacts={"accelerator.json": "accelerator.v1"}, facets=("stream",))
