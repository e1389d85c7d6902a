"""Stage `kat`: build the generated C project and prove it computes the integer reference.

Host: every test sample goes through the C code (`build/cnn_kat --batch`) and is compared with
the integer reference, element by element. Cortex-M4: the firmware runs its built-in KAT
under `qemu-system-arm -M mps2-an386`; one inference is bracketed by two marker symbols
and its instructions are counted exactly by a TCG plugin, which also estimates their
cycles from the Cortex-M4 TRM's table (QEMU has no cycle model; templates/tools/insn_count.c),
with the kernels the project has (optimized where the C runs on a Cortex-M4: a `cortex-m4`
target or a MAX7800x's core, emulating the device's number format; else the reference
ones) and again with the reference kernels. The firmware calls a third marker between
layers (-DEB_LAYER_MARKERS, KAT builds only), so both counts come per planned layer too,
beside the layer's multiply-accumulates and weight bytes.
A compiler failure or any mismatch fails the stage; the previous good project in build/
stays untouched (nothing is published).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.build.stage import Context, Stage, scratch
from edgebuild.core import boundedjson
from edgebuild.core.errors import StageFailed
from edgebuild.report.katresult import (
    OPTIMIZED,
    REFERENCE,
    FirmwareRun,
    HostCheck,
    KatResult,
    LayerRun,
    ReferenceRun,
    Skipped,
    per_mac,
)

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    from collections.abc import Callable

    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.pipeline.validation import Checked
    from edgebuild.targets.toolchain import ArmTools, QemuRun

COMPILE_TIMEOUT_S = 300
RUN_TIMEOUT_S = 600


def config(checked: Checked) -> JSONObject:
    return {"targets": ["host", "cortex-m4"]}


def _run(command: list[str], cwd: Path, what: str, timeout: float = COMPILE_TIMEOUT_S
         ) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                                timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise StageFailed(f"kat: {what}: `{command[0]}` not found; install a C compiler and "
                          "make (Debian: apt-get install build-essential)") from None
    except subprocess.TimeoutExpired:
        raise StageFailed(f"kat: {what}: timed out after {timeout} s") from None
    if result.returncode != 0:
        raise StageFailed(f"kat: {what} failed (exit {result.returncode}):\n"
                          f"{(result.stdout + result.stderr).strip()[-4000:]}")
    return result


def host(work: Path, x_test: NDArray[np.integer[Any]], reference: NDArray[np.integer[Any]]
         ) -> tuple[HostCheck, NDArray[np.int64]]:
    import numpy as np

    _run(["make", "-s", "cnn_kat"], work, "host build")
    _run(["build/cnn_kat"], work, "host known-answer test")
    (work / "inputs.bin").write_bytes(np.ascontiguousarray(x_test, dtype=np.int8).tobytes())
    _run(["build/cnn_kat", "--batch", "inputs.bin", "outputs.bin"], work, "host batch run",
         RUN_TIMEOUT_S)
    raw = np.frombuffer((work / "outputs.bin").read_bytes(), dtype="<i4")
    outputs = raw.reshape(len(x_test), -1).astype(np.int64)
    if outputs.shape != reference.shape:
        raise StageFailed(f"kat: host outputs have shape {outputs.shape}, the reference "
                          f"{reference.shape}")
    mismatched = np.any(outputs != reference, axis=1)
    return HostCheck(int(len(x_test)), int(mismatched.sum()),
                     tuple(np.flatnonzero(mismatched)[:10].tolist())), outputs


@dataclass(frozen=True)
class LayerFacts:
    """What a planned layer is, beside its counts: its op, MACs and stored weight bytes."""

    layer: str
    op: str
    macs: int
    weight_bytes: int


def cortex_m4(work: Path, macs: int, weight_bytes: int, layers: tuple[LayerFacts, ...],
              log: Callable[[str], None]) -> FirmwareRun | Skipped:
    from edgebuild.targets import toolchain

    tools = toolchain.arm_toolchain()
    if tools is None:
        reason = toolchain.missing_reason()
        log(f"kat: Cortex-M4 skipped: {reason}")
        return Skipped(reason)
    plugin = toolchain.build_plugin(work)
    _run(["make", "-s", "m4"], work, "Cortex-M4 build")
    elf = work / "build" / "cnn_kat_m4.elf"
    kernels = OPTIMIZED if (work / "model" / "eb_kernels_opt.c").is_file() else REFERENCE
    counted = _qemu_kat(tools, elf, plugin, f"Cortex-M4 ({kernels} kernels)")
    sizes = toolchain.elf_size(tools, elf)
    reference, reference_counted = None, None
    if "m4-ref:" in (work / "Makefile").read_text():
        _run(["make", "-s", "m4-ref"], work, "Cortex-M4 reference-kernel build")
        reference_counted = _qemu_kat(tools, work / "build" / "cnn_kat_m4_ref.elf", plugin,
                                      "Cortex-M4 (reference kernels)")
        reference = ReferenceRun(reference_counted.instructions,
                                 per_mac(reference_counted.instructions, macs),
                                 reference_counted.cycles, per_mac(reference_counted.cycles, macs))
    return FirmwareRun(sizes["text"], sizes["data"], sizes["bss"], counted.instructions,
                       per_mac(counted.instructions, macs), sizes["text"] - weight_bytes, "pass",
                       reference, kernels, counted.cycles, per_mac(counted.cycles, macs),
                       layer_runs(layers, counted, reference_counted))


def layer_runs(layers: tuple[LayerFacts, ...], counted: QemuRun,
               reference: QemuRun | None) -> tuple[LayerRun, ...]:
    """Each planned layer's segment of the counts: the firmware marks one boundary before
    every layer and one after the last, so the segments are [call in, layer 1, ...,
    layer N, return]."""
    def segments(run: QemuRun) -> tuple[tuple[int, int], ...]:
        if len(run.segments) != len(layers) + 2:
            raise StageFailed(f"kat: the Cortex-M4 firmware marked {len(run.segments) - 2} "
                              f"layers, the plan has {len(layers)}")
        return tuple((s.instructions, s.cycles) for s in run.segments[1:-1])

    if counted.instructions is None:
        return ()
    mine = segments(counted)
    theirs = segments(reference) if reference is not None and reference.instructions is not None \
        else ((None, None),) * len(layers)
    return tuple(LayerRun(facts.layer, facts.op, facts.macs, facts.weight_bytes, *own, *ref)
                 for facts, own, ref in zip(layers, mine, theirs, strict=True))


def _qemu_kat(tools: ArmTools, elf: Path, plugin: Path, what: str) -> QemuRun:
    """Run the firmware's KAT under QEMU; the counts of one inference, per layer."""
    from edgebuild.targets import toolchain

    start = toolchain.symbol_address(tools.nm, elf, "eb_marker_start")
    stop = toolchain.symbol_address(tools.nm, elf, "eb_marker_stop")
    layer = toolchain.symbol_address(tools.nm, elf, "eb_marker_layer")
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin, start=start,
                             stop=stop, layer=layer)
    if run.exit_code != 0:
        raise StageFailed(f"kat: {what} known-answer test failed under QEMU (exit "
                          f"{run.exit_code}):\n{(run.stdout + run.stderr).strip()[-3000:]}")
    return run


def layer_facts(plan: MemoryPlan, nodes: dict[str, int]
                ) -> tuple[LayerFacts, ...]:
    """Per planned step (the layers cnn.c runs, in order): op, MACs (`nodes`: the graph's,
    by layer) and the bytes its weights and bias take in flash (the plan's, packed weights
    counted packed: memory.budget's count)."""
    return tuple(LayerFacts(step.layer, step.op, nodes.get(step.layer, 0),
                            step.weight_bytes or 0) for step in plan.steps)


def emulation_skip(plan_dir: Path) -> Skipped | None:
    """On an accelerator target whose Cortex-M4 cannot hold the emulation (the plan stage's
    emulation.json; targets.max7800x.emulation), the firmware run is skipped, saying why:
    the device could not run that firmware, and the host KAT has proved the C already."""
    from edgebuild.targets.max7800x import emulation

    path = plan_dir / emulation.FILE
    if not path.is_file():
        return None
    fit = emulation.EmulationFit.from_json(boundedjson.read(path))
    return None if fit.fits else Skipped(fit.reason())


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import arrays
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.model import knownanswer
    from edgebuild.model.graph import Graph

    x = knownanswer.evaluation_inputs(ctx.checked, ctx.inputs)
    reference = arrays.load(ctx.inputs["evaluate"] / "reference_outputs.npz")["outputs"]
    plan = MemoryPlan.load(ctx.inputs["plan"])
    graph = Graph.load(ctx.inputs["validate"])
    layers = layer_facts(plan, {node.name: node.macs for node in graph.nodes})
    with tempfile.TemporaryDirectory(prefix="edgebuild-kat-") as temp:
        work = Path(temp) / "c"
        shutil.copytree(ctx.inputs["codegen"], work, ignore=scratch)
        for path in work.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        c_vs_reference, outputs = host(work, x, reference.reshape(len(reference), -1))
        if c_vs_reference.mismatches:
            raise StageFailed(f"kat: the C code differs from the integer reference on "
                              f"{c_vs_reference.mismatches} of {c_vs_reference.samples} "
                              f"test samples (first: {list(c_vs_reference.first_mismatches)})")
        skip = emulation_skip(ctx.inputs["plan"])
        if skip is not None:
            ctx.log(f"kat: Cortex-M4 skipped: {skip.reason}")
        m4 = skip or cortex_m4(work, graph.macs, plan.weight_bytes, layers, ctx.log)
    np.save(ctx.out / "outputs.npy", outputs)
    result = KatResult(c_vs_reference, m4, "known answer" if ctx.checked.manifest.kat
                       else "integer reference")
    (ctx.out / "kat.json").write_text(json.dumps(result.to_json(), indent=1, sort_keys=True)
                                      + "\n")
    counted = f"skipped: {m4.reason}" if isinstance(m4, Skipped) else m4.summary()
    ctx.log(f"kat: host {c_vs_reference.samples} samples, {c_vs_reference.mismatches} "
            f"mismatches; cortex-m4 {counted}")


STAGE = Stage("kat", ("codegen", "evaluate", "plan", "validate", "data"), config, run,
              "build and run the C project: host (every test sample) and Cortex-M4 (QEMU)",
              tools=("numpy", "cmd:cc", "cmd:arm-none-eabi-gcc", "cmd:qemu-system-arm"),
              artifacts={"kat.json": "kat.v1"}, facets=())
