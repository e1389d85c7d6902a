"""The table every build ends with: per manifest, what its stages did and what came out.

One row per manifest, read from what the build already wrote — the run's stage outcomes
and the headline of `build/<name>/report.json` (accuracies, RAM and flash against their
budgets, Cortex-M4 instructions, the known-answer test: edgebuild/report/headline.py, the figures
report.html's headline shows, formatted by the same functions) — so it costs a few small
reads, no parsing of manifests, and a no-op build's whole output is this table.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgebuild.build.outcome import Run
from edgebuild.core import boundedjson
from edgebuild.report import headline as figures
from edgebuild.report.headline import Headline

MISSING = "-"  # a figure the build does not have (ASCII: terminals without UTF-8 too)

HEADER = ("manifest", "stages", "time", "float", "int8", "RAM / budget", "flash / budget",
          "M4 insn", "M4 cycles*", "KAT")
FOOTNOTE = "* estimated from the instruction mix under QEMU (no wait states)\n"


def table(run: Run, build_root: Path) -> str:
    """The summary as aligned text lines (empty when the run planned nothing)."""
    names = list(dict.fromkeys(manifest for manifest, _ in run.plan))
    if not names:
        return ""
    rows = [HEADER, *(_row(run, name, build_root / name) for name in names)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    cycles = HEADER.index("M4 cycles*")
    note = FOOTNOTE if any(row[cycles] != MISSING for row in rows[1:]) else ""
    where = "".join(_where(name, build_root / name) for name in names
                    if "report" in run.outcomes.get(name, {}))
    return "".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                   .rstrip() + "\n" for row in rows) + note + where


def _where(name: str, build_dir: Path) -> str:
    """For a MAX7800x build, which code runs where: the accelerator's program (an MSDK
    project) or why there is none; the table's M4 columns are then the Cortex-M4 emulation
    of the same network (codegen/)."""
    report = _report(build_dir)
    accelerator = report.get("accelerator") or {}
    program = accelerator.get("program")
    if not isinstance(program, dict):
        return ""
    m4 = (report.get("metrics") or {}).get("cortex_m4") or {}
    skipped = m4.get("skipped") if isinstance(m4, dict) else None
    if program.get("unsupported"):
        return (f"{name}: no accelerator program ({program['unsupported']}); "
                f"the M4 columns are the Cortex-M4 code in codegen/\n")
    place = os.path.relpath(build_dir / str(program.get("project", "")))
    emulated = f"its {skipped}" if isinstance(skipped, str) and skipped.startswith(
        "Cortex-M4 emulation") else "the M4 columns are its Cortex-M4 emulation in codegen/"
    return f"{name}: accelerator program in {place}/ (MSDK project); {emulated}\n"


def _row(run: Run, name: str, build_dir: Path) -> tuple[str, ...]:
    records = run.outcomes.get(name, {})
    stages = [stage for manifest, stage in run.plan if manifest == name]
    seconds = sum(float(record["seconds"]) for record in records.values())
    head = _headline(build_dir) if "report" in records else None
    return (name, _stages(run, name, stages), f"{seconds:.1f}s", *_figures(head))


def _figures(head: Headline | None) -> tuple[str, ...]:
    """The headline's cells: float, int8, RAM / budget, flash / budget, M4 insn and
    cycles, KAT."""
    if head is None:
        return (MISSING,) * 7
    return (figures.percent(head.accuracy.floating, 1, MISSING),
            figures.percent(head.accuracy.int8, 1, MISSING),
            figures.used(head.ram, MISSING), figures.used(head.flash, MISSING),
            figures.count(head.instructions.count, MISSING),
            figures.count(head.instructions.cycles, MISSING),
            figures.kat_text(head.kat, MISSING))


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


def _report(build_dir: Path) -> dict:
    """report.json, or {} when it is missing or unreadable."""
    try:
        data = boundedjson.read(build_dir / "report.json")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _headline(build_dir: Path) -> Headline | None:
    """report.json's headline; None when the file is missing, unreadable or older than
    the headline (its cells then read `-`)."""
    try:
        return Headline.from_json(_report(build_dir)["headline"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
