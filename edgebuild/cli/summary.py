"""The table every build ends with: per manifest, what its stages did and what came out.

One row per manifest, read from what the build already wrote — the run's stage outcomes,
`build/<name>/report.json` (accuracies, memory, Cortex-M4 instructions, the known-answer
test) and the plan stage's state record (the budgets) — so it costs a few small reads,
no parsing of manifests, and a no-op build's whole output is this table.
"""

from __future__ import annotations

import json
from pathlib import Path

from edgebuild.pipeline.outcome import Run

HEADER = ("manifest", "stages", "time", "float", "int8", "RAM / budget", "flash / budget",
          "M4 insn", "KAT")


def table(run: Run, build_root: Path) -> str:
    """The summary as aligned text lines (empty when the run planned nothing)."""
    names = list(dict.fromkeys(manifest for manifest, _ in run.plan))
    if not names:
        return ""
    rows = [HEADER, *(_row(run, name, build_root / name) for name in names)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                   .rstrip() + "\n" for row in rows)


def _row(run: Run, name: str, build_dir: Path) -> tuple[str, ...]:
    records = run.outcomes.get(name, {})
    stages = [stage for manifest, stage in run.plan if manifest == name]
    seconds = sum(float(record["seconds"]) for record in records.values())
    metrics = _metrics(build_dir) if "report" in records else {}
    memory, m4 = _part(metrics, "memory"), _part(metrics, "cortex_m4")
    budget = _budgets(build_dir)
    return (name, _stages(run, name, stages), f"{seconds:.1f}s",
            _percent(metrics.get("float_accuracy")), _percent(metrics.get("int_accuracy")),
            _used(memory.get("arena_bytes"), budget.get("l2")),
            _used(memory.get("weight_bytes"), budget.get("flash")),
            _count(m4.get("instructions")),
            _kat(metrics, m4))


def _stages(run: Run, name: str, stages: list[str]) -> str:
    """`up to date`, or counts per outcome; the first failure by name."""
    failed = [task.split(".", 1)[1] for task, _, kind in run.failures
              if task.startswith(f"{name}.") and kind != "skipped"]
    if failed:
        return f"FAILED at {failed[0]}"
    counts: dict[str, int] = {}
    for stage, record in run.outcomes.get(name, {}).items():
        label = "shared" if _shared(run, name, stage, record["key"]) else \
            {"uptodate": "up to date"}.get(record["status"], record["status"])
        counts[label] = counts.get(label, 0) + 1
    if set(counts) == {"up to date"}:
        return "up to date"
    missing = len(stages) - sum(counts.values())
    parts = [f"{count} {label}" for label, count in counts.items()]
    return ", ".join(parts + ([f"{missing} skipped"] if missing else []))


def _shared(run: Run, name: str, stage: str, key: object) -> bool:
    """Built in this run for another manifest or target with the same inputs (one float
    training for several targets), and restored from it here."""
    return run.outcomes[name][stage]["status"] == "restored" and any(
        other != name and stage in records and records[stage]["key"] == key
        and records[stage]["status"] == "built" for other, records in run.outcomes.items())


def _metrics(build_dir: Path) -> dict[str, object]:
    try:
        metrics = json.loads((build_dir / "report.json").read_text()).get("metrics")
    except (OSError, ValueError, AttributeError):
        return {}
    return metrics if isinstance(metrics, dict) else {}


def _part(metrics: dict[str, object], name: str) -> dict[str, object]:
    part = metrics.get(name)
    return part if isinstance(part, dict) else {}


def _budgets(build_dir: Path) -> dict[str, int]:
    """The memory budgets the plan was made for (its state record's settings)."""
    try:
        state = json.loads((build_dir / ".state" / "plan.json").read_text())
        memory = state["material"]["config"]["target"]["memory"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {k: v for k, v in memory.items() if isinstance(v, int)} \
        if isinstance(memory, dict) else {}


def _kat(metrics: dict[str, object], m4: dict[str, object]) -> str:
    """The known-answer test: the host run's mismatches, and the Cortex-M4's verdict."""
    reference = metrics.get("c_vs_reference")
    if not isinstance(reference, dict) or not isinstance(reference.get("mismatches"), int):
        return "-"
    host = "pass" if reference["mismatches"] == 0 else f"FAIL ({reference['mismatches']})"
    on_m4 = m4.get("kat")
    return host if on_m4 in (None, "pass") else f"{host}, M4 {on_m4}"


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "-"


def _percent(value: object) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, float | int) else "-"


def _used(used: object, budget: int | None) -> str:
    if not isinstance(used, int):
        return "-"
    return f"{_size(used)} / {_size(budget)}" if budget else _size(used)


def _size(count: int) -> str:
    return f"{count / 1024:.1f} KiB" if count >= 1024 else f"{count} B"
