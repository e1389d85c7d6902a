"""Stage `ondevice_kat`: build the generated training code and prove, step by step, that
it computes what PyTorch computes.

The C project (codegen) plus the training code (ondevice/train) are compiled for the host
and run: the per-step losses (printed as float32 bits, exact) are compared with the
PyTorch trace of the `ondevice` stage, and so are the first step's gradients and the
weights after the last step (saved by the C in the weight-only file format and read with
edgebuild.ondevice.wof). Under QEMU the Cortex-M4 build (hard float) runs the same steps; its
losses are compared too and the instructions of one training step are counted.

Pass/fail (float32 summation order is the only allowed difference):
- a NaN or a missing step fails;
- a loss further than LOSS_TOLERANCE x max(|loss|, 1) from PyTorch fails; `meets_target`
  also records the strict figure, LOSS_TOLERANCE x the largest loss of the trace (a nearly
  converged model's loss is a small difference of large logits, so its relative error
  grows without any bug; the floor keeps such a build passing);
- a first-step gradient further than GRAD_TOLERANCE x that tensor's largest magnitude
  (+ GRAD_FLOOR) fails: a gradient bug (a re-zeroed tile, a branch overwritten) shows here whatever the
  loss scale.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from edgebuild.build.stage import Context, Stage, scratch
from edgebuild.core.errors import StageFailed
from edgebuild.pipeline.stages.kat import RUN_TIMEOUT_S, _run
from edgebuild.report.katresult import Skipped
from edgebuild.report.trainingkat import LossComparison, TrainingKat, TrainingRun

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.ondevice.wof import Layout
    from edgebuild.pipeline.validation import Checked

LOSS_TOLERANCE = 1e-5
GRAD_TOLERANCE = 1e-4
# softmax - onehot of a confident prediction cancels (1 - p), leaving float32 noise of a
# few 1e-8 on gradients that may themselves be 1e-5: an absolute floor keeps that a pass.
GRAD_FLOOR = 1e-6
STEP = re.compile(r"^step (\d+) loss ([0-9a-f]{8})$", re.MULTILINE)


class HostRun(TypedDict):
    """What the host build of the training code computed."""

    losses: list[float]  # per step
    gradients: dict[str, NDArray[np.float32]]  # first step, name -> array
    final: dict[str, NDArray[np.float32]]  # after the last step, name -> array


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


def _max_diff(a: Mapping[str, NDArray[np.floating[Any]]],
              b: Mapping[str, NDArray[np.floating[Any]]]) -> float:
    import numpy as np

    return max(float(np.max(np.abs(a[k].ravel() - b[k].ravel()))) for k in a)


def _max_rel_diff(a: Mapping[str, NDArray[np.floating[Any]]],
                  b: Mapping[str, NDArray[np.floating[Any]]], floor: float = 0.0) -> float:
    """Largest |a - b| per tensor over (that tensor's largest |b| + floor); the worst."""
    import numpy as np

    return max(float(np.max(np.abs(a[k].ravel() - b[k].ravel())) /
                     max(float(np.max(np.abs(b[k]))) + floor, 1e-30)) for k in a)


def host(work: Path, layout: Layout, steps: int) -> HostRun:
    """The host build's losses, first-step gradients and final weights (name -> array)."""
    import numpy as np

    from edgebuild.ondevice import wof

    train = work / "train"
    _run(["make", "-s", "train_kat"], train, "training code host build")
    result = _run(["build/train_kat", "--save", "updated.wof", "--grads", "grads.bin"], train,
                  "training known-answer test", RUN_TIMEOUT_S)
    values = losses(result.stdout, steps, "host")
    raw = np.frombuffer((train / "grads.bin").read_bytes(), dtype="<f4")
    grads: dict[str, NDArray[np.float32]] = {}
    offset = 0
    for name, shape in layout:
        count = int(np.prod(shape))
        grads[name] = raw[offset:offset + count].reshape(shape)
        offset += count
    final: dict[str, NDArray[np.float32]] = {}
    for (name, _), value in zip(layout, wof.read(train / "updated.wof", layout), strict=True):
        assert value is not None  # the training code saves every trainable tensor
        final[name] = value
    return {"losses": values, "gradients": grads, "final": final}


def cortex_m4(work: Path, torch_losses: Sequence[float], log: Callable[[str], None]
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
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin, start=start,
                             stop=stop)
    if run.exit_code != 0:
        raise StageFailed(f"ondevice_kat: Cortex-M4 training run failed under QEMU (exit "
                          f"{run.exit_code}):\n{(run.stdout + run.stderr).strip()[-3000:]}")
    values = losses(run.stdout, len(torch_losses), "Cortex-M4")
    sizes = toolchain.elf_size(tools, elf)
    return TrainingRun(tuple(values), run.instructions, sizes["text"], sizes["data"],
                       sizes["bss"], compare(values, torch_losses))


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.ondevice.finetune import LossTrace
    from edgebuild.ondevice.memory import TrainingMemory
    from edgebuild.ondevice.wof import FileLayout

    trace = LossTrace.load(ctx.inputs["ondevice"])
    torch_arrays = arrays.load(ctx.inputs["ondevice"] / "trace.npz")
    layout = FileLayout.load(ctx.inputs["ondevice"]).layout()
    with tempfile.TemporaryDirectory(prefix="edgebuild-ondevice-") as temp:
        work = Path(temp) / "c"
        shutil.copytree(ctx.inputs["codegen"], work, ignore=scratch)
        shutil.copytree(ctx.inputs["ondevice"] / "train", work / "train", ignore=scratch)
        for path in work.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        c = host(work, layout, len(trace.losses))
        m4 = cortex_m4(work, trace.losses, ctx.log)
    torch_grads = {n: torch_arrays[f"grad:{n}"] for n, _ in layout}
    torch_final = {n: torch_arrays[f"final:{n}"] for n, _ in layout}
    result = TrainingKat(
        len(trace.losses), tuple(c["losses"]), trace.losses, compare(c["losses"], trace.losses),
        _max_diff(c["gradients"], torch_grads), _max_rel_diff(c["gradients"], torch_grads),
        _max_rel_diff(c["gradients"], torch_grads, GRAD_FLOOR / GRAD_TOLERANCE),
        _max_diff(c["final"], torch_final), TrainingMemory.load(ctx.inputs["ondevice"]).ram, m4)
    np.save(ctx.out / "losses.npy", np.asarray(c["losses"], dtype=np.float32))
    (ctx.out / "ondevice_kat.json").write_text(json.dumps(result.to_json(), indent=1,
                                                          sort_keys=True) + "\n")
    _verdict(result)
    counted = m4.reason if isinstance(m4, Skipped) else m4.instructions_per_step
    ctx.log(f"ondevice_kat: {result.steps} steps, loss max |C - torch| "
            f"{result.losses.loss_max_abs_diff:.3g}; cortex-m4 "
            f"{counted} instructions per step")


def _verdict(result: TrainingKat) -> None:
    """Fail when the C does not compute what PyTorch computes (host or Cortex-M4)."""
    if not result.losses.within_tolerance:
        raise StageFailed(
            f"ondevice_kat: the C training losses differ from PyTorch by up to "
            f"{result.losses.loss_max_abs_diff:.3g} (allowed {LOSS_TOLERANCE} x max(|loss|, 1)): "
            f"C {list(result.loss_c)} vs torch {list(result.loss_torch)}")
    if result.grad_check > GRAD_TOLERANCE:
        raise StageFailed(
            f"ondevice_kat: the C gradients of the first step differ from PyTorch's by up to "
            f"{result.grad_max_rel_diff:.3g} of the tensor's magnitude (allowed "
            f"{GRAD_TOLERANCE} x magnitude + {GRAD_FLOOR})")
    m4 = result.cortex_m4
    if isinstance(m4, TrainingRun) and not m4.comparison.within_tolerance:
        raise StageFailed(f"ondevice_kat: the Cortex-M4 training losses differ from PyTorch "
                          f"by up to {m4.comparison.loss_max_abs_diff:.3g}: C {list(m4.losses)} "
                          f"vs torch {list(result.loss_torch)}")


STAGE = Stage("ondevice_kat", ("ondevice", "codegen"), config, run,
              "build and run the training code: losses vs PyTorch (host and Cortex-M4/QEMU)",
              tools=("numpy", "cmd:cc", "cmd:arm-none-eabi-gcc", "cmd:qemu-system-arm"),
              applies=lambda checked: checked.manifest.ondevice is not None,
              artifacts={"ondevice_kat.json": "ondevice_kat.v1"}, facets=())
