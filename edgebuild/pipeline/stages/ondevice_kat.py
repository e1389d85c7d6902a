"""Stage `ondevice_kat`: build the generated training code and prove, step by step, that
it computes what PyTorch computes.

The C project (codegen) plus the training code (ondevice/train) are compiled for the host
and run, and under QEMU the Cortex-M4 build (hard float) runs the same steps; both are
compared with the PyTorch trace of the `ondevice` stage. The host's weights saved in the
weight-only file must equal the ones it printed after the last step. The Cortex-M4 build
counts the instructions (and estimated cycles) of the first step, per stretch of it
(train/segments.json: each layer's forward pass, input gradient and weight gradient).

Every step is compared on both builds: its loss, the gradient of every trainable tensor
and every trainable tensor after the update (the program prints them as float32 bits; the
PyTorch trace picked batches on which no step's loss or gradient is ~0, so the comparison
can fail). Pass/fail (float32 summation order is the only allowed difference):
- a NaN or a missing step fails;
- a loss further than LOSS_TOLERANCE x max(|loss|, 1) from PyTorch fails; `meets_target`
  also records the strict figure, LOSS_TOLERANCE x the largest loss of the trace (a nearly
  converged model's loss is a small difference of large logits, so its relative error
  grows without any bug; the floor keeps such a build passing);
- a gradient further than GRAD_TOLERANCE x that tensor's largest magnitude (+ GRAD_FLOOR)
  fails: a gradient bug (a re-zeroed tile, a branch overwritten) shows here whatever the
  loss scale;
- an updated weight further than WEIGHT_TOLERANCE x that tensor's largest magnitude (+
  WEIGHT_FLOOR) fails: a wrong optimizer step shows here.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from edgebuild.build.stage import Context, Stage, scratch
from edgebuild.core import boundedjson
from edgebuild.core.errors import StageFailed
from edgebuild.pipeline.stages.kat import RUN_TIMEOUT_S, _run
from edgebuild.report.katresult import Skipped
from edgebuild.report.trainingkat import (
    LossComparison,
    SegmentCount,
    TensorChecks,
    TrainingKat,
    TrainingRun,
)

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Callable, Sequence

    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.ondevice.wof import Layout
    from edgebuild.pipeline.validation import Checked
    from edgebuild.targets.toolchain import QemuRun

LOSS_TOLERANCE = 1e-5
GRAD_TOLERANCE = 1e-4
# softmax - onehot of a confident prediction cancels (1 - p), leaving float32 noise of a
# few 1e-8 on gradients that may themselves be 1e-5: an absolute floor keeps that a pass.
GRAD_FLOOR = 1e-6
WEIGHT_TOLERANCE = 1e-5
WEIGHT_FLOOR = 1e-7
STEP = re.compile(r"^step (\d+) loss ([0-9a-f]{8})$", re.MULTILINE)
TENSOR = re.compile(r"^(grad|weight) (\d+) (\d+) ((?:[0-9a-f]{8})*)$", re.MULTILINE)


Tensors = list[dict[str, "NDArray[np.float32]"]]  # per step: tensor name -> array


class Printed(TypedDict):
    """What a build of the training code printed: per step, its loss, every trainable
    tensor's gradient and its value after the update."""

    losses: list[float]
    gradients: Tensors
    weights: Tensors


def config(checked: Checked) -> JSONObject:
    return {"targets": ["host", "cortex-m4"], "tolerance": LOSS_TOLERANCE}


def losses(stdout: str, steps: int, where: str) -> list[float]:
    """Per-step losses from the program's output; a missing step or NaN fails."""
    found = {int(k): struct.unpack(">f", bytes.fromhex(bits))[0]
             for k, bits in STEP.findall(stdout)}
    missing = [k for k in range(steps) if k not in found]
    if missing:
        raise StageFailed(f"ondevice_kat: {where}: no loss printed for step(s) {missing}:\n"
                          f"{stdout.strip()[-2000:]}")
    values = [found[k] for k in range(steps)]
    bad = [k for k, v in enumerate(values) if v != v or v in (float("inf"), float("-inf"))]
    if bad:
        raise StageFailed(f"ondevice_kat: {where}: loss is not finite at step(s) {bad}")
    return values


def compare(c: Sequence[float], torch: Sequence[float]) -> LossComparison:
    diffs = [abs(a - b) for a, b in zip(c, torch, strict=True)]
    scale = max(abs(v) for v in torch) or 1.0
    return LossComparison(max(diffs), max(diffs) / scale, max(diffs) <= LOSS_TOLERANCE * scale,
                          max(diffs) <= LOSS_TOLERANCE * max(scale, 1.0))


def _max_diff(a: Tensors, b: Tensors) -> float:
    import numpy as np

    return max((float(np.max(np.abs(x[k].ravel() - y[k].ravel()), initial=0.0))
                for x, y in zip(a, b, strict=True) for k in x), default=0.0)


def _max_rel_diff(a: Tensors, b: Tensors, floor: float = 0.0) -> float:
    """Largest |a - b| per tensor and step over (that tensor's largest |b| + floor); the
    worst."""
    import numpy as np

    return max((float(np.max(np.abs(x[k].ravel() - y[k].ravel()), initial=0.0)) /
                max(float(np.max(np.abs(y[k]), initial=0.0)) + floor, 1e-30)
                for x, y in zip(a, b, strict=True) for k in x), default=0.0)


def printed(stdout: str, layout: Layout, steps: int, where: str) -> Printed:
    """The losses, gradients and updated weights a build printed; a missing one fails."""
    import numpy as np

    values = losses(stdout, steps, where)
    found: dict[tuple[str, int, int], str] = {
        (kind, int(step), int(t)): bits for kind, step, t, bits in TENSOR.findall(stdout)}
    per_kind: dict[str, Tensors] = {"grad": [], "weight": []}
    for kind, per_step in per_kind.items():
        for step in range(steps):
            tensors = {}
            for t, (name, shape) in enumerate(layout):
                bits = found.get((kind, step, t))
                if bits is None or len(bits) != 8 * int(np.prod(shape)):
                    raise StageFailed(f"ondevice_kat: {where}: step {step} printed no {kind} "
                                      f"of {name} (or a wrong number of elements)")
                tensors[name] = np.frombuffer(bytes.fromhex(bits), ">f4").astype(
                    np.float32).reshape(shape)
            per_step.append(tensors)
    return {"losses": values, "gradients": per_kind["grad"], "weights": per_kind["weight"]}


def host(work: Path, layout: Layout, steps: int) -> tuple[Printed, dict[str, NDArray[np.float32]]]:
    """What the host build printed, and the weights it saved in the weight-only file."""
    from edgebuild.ondevice import wof

    train = work / "train"
    _run(["make", "-s", "train_kat"], train, "training code host build")
    result = _run(["build/train_kat", "--save", "updated.wof"], train,
                  "training known-answer test", RUN_TIMEOUT_S)
    run = printed(result.stdout, layout, steps, "host")
    saved: dict[str, NDArray[np.float32]] = {}
    for (name, _), value in zip(layout, wof.read(train / "updated.wof", layout), strict=True):
        assert value is not None  # the training code saves every trainable tensor
        saved[name] = value
    return run, saved


def checks(run: Printed, reference: Printed) -> TensorChecks:
    """How far a build's gradients and weights are from PyTorch's, every step."""
    return TensorChecks(
        _max_diff(run["gradients"], reference["gradients"]),
        _max_rel_diff(run["gradients"], reference["gradients"]),
        _max_rel_diff(run["gradients"], reference["gradients"], GRAD_FLOOR / GRAD_TOLERANCE),
        _max_diff(run["weights"], reference["weights"]),
        _max_rel_diff(run["weights"], reference["weights"], WEIGHT_FLOOR / WEIGHT_TOLERANCE))


def cortex_m4(work: Path, layout: Layout, reference: Printed, log: Callable[[str], None]
              ) -> TrainingRun | Skipped:
    from edgebuild.targets import toolchain

    tools = toolchain.arm_toolchain()
    if tools is None:
        reason = toolchain.missing_reason()
        log(f"ondevice_kat: Cortex-M4 skipped: {reason}")
        return Skipped(reason)
    plugin = toolchain.build_plugin(work)
    train = work / "train"
    _run(["make", "-s", "m4"], train, "training code Cortex-M4 build")
    elf = train / "build" / "train_kat_m4.elf"
    start = toolchain.symbol_address(tools.nm, elf, "eb_marker_start")
    stop = toolchain.symbol_address(tools.nm, elf, "eb_marker_stop")
    segment = toolchain.symbol_address(tools.nm, elf, "eb_train_segment")
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin, start=start,
                             stop=stop, layer=segment)
    if run.exit_code != 0:
        raise StageFailed(f"ondevice_kat: Cortex-M4 training run failed under QEMU (exit "
                          f"{run.exit_code}):\n{(run.stdout + run.stderr).strip()[-3000:]}")
    m4 = printed(run.stdout, layout, len(reference["losses"]), "Cortex-M4")
    sizes = toolchain.elf_size(tools, elf)
    return TrainingRun(tuple(m4["losses"]), run.instructions, sizes["text"], sizes["data"],
                       sizes["bss"], compare(m4["losses"], reference["losses"]),
                       checks(m4, reference), run.cycles, counted_segments(train, run))


def counted_segments(train: Path, run: QemuRun) -> tuple[SegmentCount, ...]:
    """The count of each stretch segments.json names: the counter's first segment is the
    call into the step, up to the first mark; the others follow the marks in order."""
    names = boundedjson.read(train / "segments.json")
    if len(run.segments) != len(names) + 1:
        raise StageFailed(f"ondevice_kat: the Cortex-M4 training step marked "
                          f"{len(run.segments) - 1} stretches, segments.json names "
                          f"{len(names)}")
    return tuple(SegmentCount(name["layer"], name["phase"], name["macs"], count.instructions,
                              count.cycles)
                 for name, count in zip(names, run.segments[1:], strict=True))


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.ondevice.finetune import LossTrace
    from edgebuild.ondevice.memory import TrainingMemory
    from edgebuild.ondevice.wof import FileLayout

    trace = LossTrace.load(ctx.inputs["ondevice"])
    torch_arrays = arrays.load(ctx.inputs["ondevice"] / "trace.npz")
    layout = FileLayout.load(ctx.inputs["ondevice"]).layout()
    steps = len(trace.losses)
    reference: Printed = {
        "losses": list(trace.losses),
        "gradients": [{n: torch_arrays[f"grad:{k}:{n}"] for n, _ in layout} for k in range(steps)],
        "weights": [{n: torch_arrays[f"weight:{k}:{n}"] for n, _ in layout}
                    for k in range(steps)]}
    with tempfile.TemporaryDirectory(prefix="edgebuild-ondevice-") as temp:
        work = Path(temp) / "c"
        shutil.copytree(ctx.inputs["codegen"], work, ignore=scratch)
        shutil.copytree(ctx.inputs["ondevice"] / "train", work / "train", ignore=scratch)
        for path in work.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        c, saved = host(work, layout, steps)
        m4 = cortex_m4(work, layout, reference, ctx.log)
    if steps and any(not np.array_equal(saved[n], c["weights"][-1][n]) for n, _ in layout):
        raise StageFailed("ondevice_kat: the weight-only file the host build saved differs "
                          "from the weights it printed after the last step")
    result = TrainingKat(steps, tuple(c["losses"]), trace.losses,
                         compare(c["losses"], trace.losses), checks(c, reference),
                         TrainingMemory.load(ctx.inputs["ondevice"]).ram, m4)
    np.save(ctx.out / "losses.npy", np.asarray(c["losses"], dtype=np.float32))
    (ctx.out / "ondevice_kat.json").write_text(json.dumps(result.to_json(), indent=1,
                                                          sort_keys=True) + "\n")
    _verdict(result)
    counted = m4.reason if isinstance(m4, Skipped) else (
        f"{m4.instructions_per_step:,} instructions per step" + (
            f" ({m4.instructions_per_step / m4.macs_per_step:.2f} per MAC-equivalent)"
            if m4.instructions_per_step and m4.macs_per_step else ""))
    ctx.log(f"ondevice_kat: {result.steps} steps, loss max |C - torch| "
            f"{result.losses.loss_max_abs_diff:.3g}, gradients and weights of every step "
            f"within tolerance; cortex-m4 {counted}")


def _verdict(result: TrainingKat) -> None:
    """Fail when the C does not compute what PyTorch computes (host or Cortex-M4)."""
    runs = [("", result.losses, result.tensors)]
    m4 = result.cortex_m4
    if isinstance(m4, TrainingRun):
        runs.append(("Cortex-M4 ", m4.comparison, m4.tensors))
    for where, losses_, tensors in runs:
        if not losses_.within_tolerance:
            raise StageFailed(
                f"ondevice_kat: the {where}C training losses differ from PyTorch by up to "
                f"{losses_.loss_max_abs_diff:.3g} (allowed {LOSS_TOLERANCE} x max(|loss|, 1))")
        if tensors.grad_check > GRAD_TOLERANCE:
            raise StageFailed(
                f"ondevice_kat: the {where}C gradients differ from PyTorch's by up to "
                f"{tensors.grad_max_rel_diff:.3g} of the tensor's magnitude (allowed "
                f"{GRAD_TOLERANCE} x magnitude + {GRAD_FLOOR})")
        if tensors.weight_check > WEIGHT_TOLERANCE:
            raise StageFailed(
                f"ondevice_kat: the {where}C updated weights differ from PyTorch's by up to "
                f"{tensors.weight_max_abs_diff:.3g} (allowed {WEIGHT_TOLERANCE} x the "
                f"tensor's magnitude + {WEIGHT_FLOOR})")


STAGE = Stage("ondevice_kat", ("ondevice", "codegen"), config, run,
              "build and run the training code: losses vs PyTorch (host and Cortex-M4/QEMU)",
              tools=("numpy", "cmd:cc", "cmd:arm-none-eabi-gcc", "cmd:qemu-system-arm"),
              applies=lambda checked: checked.manifest.ondevice is not None,
              artifacts={"ondevice_kat.json": "ondevice_kat.v1"}, facets=())
