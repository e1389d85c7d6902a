"""On-device training targets (issue 7), measured by edgebuild itself.

Builds the examples with an `ondevice` section in a temporary project and prints, from each
report.json: C-vs-PyTorch loss difference over the verification steps (target: at most
1e-5 of the loss), held-out accuracy under drift before/after fine-tuning (target: after >
before), training RAM and Cortex-M4 instructions per step, the step per layer and phase
(forward, input gradient, weight gradient: instructions, estimated cycles, MAC-equivalents;
ondevice_kat.json), the memory plan (memory.json: L1 peak and L2 bytes against their
budgets, each pass's L1 working set and tiles), and the memory of every "last N" choice
of trainable layers. Then, for a range of budgets, lets edgebuild choose the layers
(`trainable: {budget: B}`, `edgebuild check`) and confirms the choice never exceeds B.
Exit status 1 on a miss.

    python benchmarks/ondevice.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ("motions_ondevice", "vowels_residual", "speechnet")


def build(project: Path, names) -> None:
    paths = [f"manifests/{name}.yaml" for name in names]
    result = subprocess.run(["edgebuild", "build", *paths], cwd=project, capture_output=True,
                            text=True)
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-3000:]}")


def budget_sweep(project: Path, name: str, choices: list[dict]) -> list[str]:
    """Budgets between the choices' needs: the chosen layers' memory must fit each."""
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.pipeline import validation

    misses = []
    path = project / "manifests" / f"{name}.yaml"
    text = path.read_text()
    needs = sorted({c["ram"] for c in choices})
    budgets = sorted({n + d for n in needs for d in (-1, 0, 1)} | {needs[-1] * 2})
    for budget in budgets:
        probe = project / "manifests" / f"budget_{budget}.yaml"
        probe.write_text(_with_budget(text, budget))
        try:
            checked = validation.load(probe)
        except Exception:  # noqa: BLE001 - a budget below the smallest need is refused
            ok = budget < needs[0]
            print(f"  budget {budget:>7}: refused ({'expected' if ok else 'UNEXPECTED'})")
            misses += [] if ok else [f"{name}: budget {budget} refused"]
            continue
        finally:
            probe.unlink()
        from edgebuild.model import folding

        layers, _ = folding.fold_layers(checked.manifest.model.layers)
        spec = checked.manifest.ondevice
        resolved = ondevice.resolve(spec, layers, tuple(checked.manifest.model.input),
                                    checked.manifest.target.memory.l1)
        fits = resolved.memory["ram"] <= budget
        print(f"  budget {budget:>7}: {', '.join(resolved.names):<28} {resolved.memory['ram']:>7} "
              f"bytes {'ok' if fits else 'OVER BUDGET'}")
        misses += [] if fits else [f"{name}: budget {budget} exceeded"]
    return misses


def step_table(project: Path, name: str) -> list[str]:
    """The Cortex-M4 training step per layer and phase (ondevice_kat.json `segments`):
    instructions, estimated cycles, MAC-equivalents and their ratio."""
    kat = json.loads((project / "build" / name / "ondevice_kat" / "ondevice_kat.json")
                     .read_text())["cortex_m4"]
    if "skipped" in kat:
        return [f"{name}: Cortex-M4 skipped ({kat['skipped']})"]
    print(f"  {'layer':<10} {'phase':<8} {'MACs':>10} {'insn':>12} {'cycles':>12} "
          f"{'insn/MAC':>8}")
    for seg in kat["segments"]:
        ratio = f"{seg['instructions'] / seg['macs']:.2f}" if seg["macs"] else "-"
        print(f"  {seg['layer'] or '(step)':<10} {seg['phase']:<8} {seg['macs']:>10,} "
              f"{seg['instructions']:>12,} {seg['cycles']:>12,} {ratio:>8}")
    print(f"  {'step':<10} {'':<8} {kat['macs_per_step']:>10,} "
          f"{kat['instructions_per_step']:>12,} {kat['cycles_per_step']:>12,} "
          f"{kat['insn_per_mac']:>8}")
    return []


def memory_table(project: Path, name: str) -> list[str]:
    """The training memory plan (memory.json): L1 and L2 against the budgets, per pass."""
    memory = json.loads((project / "build" / name / "ondevice" / "memory.json").read_text())
    print(f"  L1 peak {memory['l1_peak']:,} of {memory['l1_budget']:,} B; L2 "
          f"{memory['l2_bytes']:,} of {memory['l2_budget']:,} B; L2 <-> L1 "
          f"{memory['traffic']:,} B per step (lower bound {memory['traffic_lower_bound']:,})")
    print(f"  {'layer':<10} {'pass':<12} {'L1 bytes':>9} {'tiles':>5} {'tile':>9}")
    for p in memory["passes"]:
        tile = f"{p['rows']}x{p['channels']}" if p["tiled"] else "whole"
        print(f"  {p['layer']:<10} {p['phase']:<12} {p['l1_bytes']:>9,} {p['tiles']:>5} "
              f"{tile:>9}")
    misses = []
    if memory["l1_peak"] > memory["l1_budget"]:
        misses.append(f"{name}: L1 peak {memory['l1_peak']} over {memory['l1_budget']}")
    if memory["l2_bytes"] > memory["l2_budget"]:
        misses.append(f"{name}: L2 {memory['l2_bytes']} over {memory['l2_budget']}")
    return misses


def _with_budget(text: str, budget: int) -> str:
    lines = [f"  trainable: {{budget: {budget}}}" if line.startswith("  trainable:") else line
             for line in text.splitlines()]
    text = "\n".join(lines) + "\n"
    for l2 in ("l2: 96KiB", "l2: 256KiB", "l2: 2000000"):
        text = text.replace(l2, "l2: 4MiB")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="build in this directory and keep it")
    args = parser.parse_args()
    project = Path(args.keep or tempfile.mkdtemp(prefix="edgebuild-ondevice-"))
    (project / "manifests").mkdir(parents=True, exist_ok=True)
    for name in EXAMPLES:
        shutil.copy(REPO / "manifests" / f"{name}.yaml", project / "manifests")
    build(project, EXAMPLES)
    misses = []
    print(f"{'manifest':<18} {'steps':>5} {'loss rel diff':>13} {'before':>7} {'after':>7} "
          f"{'RAM bytes':>9} {'M4 insn/step':>12}")
    for name in EXAMPLES:
        m = json.loads((project / "build" / name / "report.json").read_text())["metrics"]["ondevice"]
        print(f"{name:<18} {m['steps']:>5} {m['loss_max_rel_diff']:>13.3g} "
              f"{m['accuracy_before']:>7} {m['accuracy_after']:>7} {m['memory_bytes']:>9} "
              f"{m['instructions_per_step'] or 'skipped':>12}")
        if m["loss_max_rel_diff"] > 1e-5:
            misses.append(f"{name}: loss differs by {m['loss_max_rel_diff']:.3g} of the loss")
        if not m["accuracy_after"] > m["accuracy_before"]:
            misses.append(f"{name}: no accuracy gain")
        misses += step_table(project, name)
        misses += memory_table(project, name)
        for choice in m["memory_choices"]:
            print(f"  train {', '.join(choice['layers']):<34} needs {choice['ram']:>7} bytes")
        misses += budget_sweep(project, name, m["memory_choices"])
    if not args.keep:
        shutil.rmtree(project)
    for miss in misses:
        print(f"MISS: {miss}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
