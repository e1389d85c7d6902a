"""One manifest, several targets: `target:` is one mapping or a list of them.

A list is read as one manifest per target, each holding that target alone, built into
`build/<name>/<label>/` (the label is the target's `name`, else its device). The stages
whose settings do not read the target — the data, float training, and QAT and
quantization for targets with the same number format — get the same cache key for every
target, so they run once and the other targets restore their result; each target gets
its own plan, C project, known-answer test and report. A problem in one target's settings
is reported at `target[i]`, on its own lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import Diagnostic
from edgebuild.manifest import GENERIC_DEVICES, Manifest, reading

# The sections the device, on-device training and budget checks read: with any of them
# broken those checks would judge defaults instead of what the author wrote.
READ_BY_DEVICE_CHECKS = frozenset({"dataset", "model", "qat", "quantize", "target",
                                   "placement", "kat", "ondevice"})


@dataclass(frozen=True)
class Variant:
    """The manifest as one target sees it."""

    target: str | None  # its label; None when the manifest has a single target
    manifest: Manifest
    document: yamlsource.Document


@dataclass(frozen=True)
class TargetView(yamlsource.Document):
    """The document as one target's manifest reads it: `data` holds that target alone, and
    a problem at `target...` is placed at `target[index]...`, on that target's lines."""

    index: int = 0

    def diagnostic(self, loc: yamlsource.Loc, message: str) -> Diagnostic:
        if tuple(loc[:1]) == ("target",):
            loc = ("target", self.index, *loc[1:])
        return super().diagnostic(loc, message)


def label(manifest: Manifest) -> str:
    return manifest.target.name or manifest.target.device.value


def split(document: yamlsource.Document
          ) -> tuple[list[Variant], list[Diagnostic], frozenset[str]]:
    """(one variant per sound target, every schema problem, the broken sections)."""
    data = document.data
    specs = data.get("target") if isinstance(data, dict) else None
    if not isinstance(specs, list):
        read = reading.read(document)
        variants = [] if read.manifest is None else [Variant(None, read.manifest, document)]
        return variants, read.problems, read.broken
    if not specs:
        return [], [document.diagnostic(("target",), (
            "an empty list; give one target (a mapping) or a list of targets"))], \
            frozenset({"target"})
    return _each(document, data, specs)


def _each(document: yamlsource.Document, data: dict[str, Any], specs: list[Any]
          ) -> tuple[list[Variant], list[Diagnostic], frozenset[str]]:
    variants: list[Variant] = []
    problems: list[Diagnostic] = []
    broken: set[str] = set()
    for index, spec in enumerate(specs):
        view = TargetView(document.path, {**data, "target": spec}, document.positions, index)
        read = reading.read(view)
        problems += read.problems
        broken |= read.broken - {"target"}  # a broken target drops that target alone
        if read.manifest is not None and "target" not in read.broken:
            variants.append(Variant(label(read.manifest), read.manifest, view))
    problems += _duplicate_labels(variants)
    return _placed(variants), list(dict.fromkeys(problems)), frozenset(broken)


def _duplicate_labels(variants: list[Variant]) -> list[Diagnostic]:
    seen: set[str | None] = set()
    problems = []
    for variant in variants:
        if variant.target in seen:
            problems.append(variant.document.diagnostic(("target", "name"), (
                f"another target is also labelled {variant.target!r} (it names "
                f"build/{variant.manifest.name}/{variant.target}/); give each target a "
                "distinct `name`")))
        seen.add(variant.target)
    return problems


def _placed(variants: list[Variant]) -> list[Variant]:
    """`placement` is the accelerator targets' business: the CPU targets of a manifest
    that also has an accelerator leave it out."""
    if all(v.manifest.target.device.value in GENERIC_DEVICES for v in variants):
        return variants
    return [Variant(v.target, v.manifest.model_copy(update={"placement": {}}), v.document)
            if v.manifest.target.device.value in GENERIC_DEVICES else v for v in variants]


def in_file_order(problems: list[Diagnostic]) -> list[Diagnostic]:
    """Each problem once, in the order of the file's lines (those without a line last)."""
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda d: (d.line is None, d.line or 0, d.col or 0))
