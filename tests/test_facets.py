"""A stage's code key leaves out the operator facets it does not read (build.definitions,
Stage.facets): here the stages run with every operator record traced, and a facet a stage
reads without declaring it fails the test — the declaration is what keeps its key honest.

The examples run cold (their own cache: a restored stage reads nothing) in this process,
one job, covering every stage: training, QAT, the MAX78000 accelerator, streaming state,
residual adds, global pooling and on-device training.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild import cli
from edgebuild.build.stage import IDENTITY
from edgebuild.ops import OPS
from edgebuild.ops.operator import Operator
from edgebuild.pipeline.stages import STAGES

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = ("digits_max78000", "vowels_residual", "motions_stream", "kws_dscnn")
FIELDS = frozenset(f.name for f in dataclasses.fields(Operator))
PROPERTIES = {"computes": "role", "deployed": "role"}


class Traced:
    """An operator record that writes down which field each stage reads."""

    def __init__(self, operator: Operator, reads: dict[str, set[str]], current: list[str]):
        self._operator = operator
        self._reads = reads
        self._current = current

    def __getattr__(self, name: str) -> Any:
        field = PROPERTIES.get(name, name)
        if field in FIELDS and self._current:
            self._reads.setdefault(self._current[-1], set()).add(field)
        return getattr(self._operator, name)


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, set[str]]]:
    root = tmp_path_factory.mktemp("facets")
    (root / "manifests").mkdir()
    for name in EXAMPLES:
        shutil.copy(REPO / "manifests" / f"{name}.yaml", root / "manifests")
        if (REPO / "manifests" / name).is_dir():
            shutil.copytree(REPO / "manifests" / name, root / "manifests" / name)
    found: dict[str, set[str]] = {}
    current: list[str] = []
    saved_ops, saved_stages = dict(OPS), dict(STAGES)

    def traced(stage: str, run: Any) -> Any:
        def wrapper(ctx: Any) -> None:
            current.append(stage)
            try:
                run(ctx)
            finally:
                current.pop()
        return wrapper

    try:
        for name, operator in saved_ops.items():
            OPS[name] = Traced(operator, found, current)  # type: ignore[assignment]
        for name, stage in saved_stages.items():
            STAGES[name] = dataclasses.replace(stage, run=traced(name, stage.run))
        code = cli.main(["-C", str(root), "build", "-j", "1", "--cache-dir", str(root / "cache")])
        assert code == 0
        yield found
    finally:
        OPS.update(saved_ops)
        STAGES.update(saved_stages)


@pytest.mark.slow
def test_every_stage_declares_the_facets_it_reads(reads: dict[str, set[str]]):
    undeclared = {stage: sorted(fields - IDENTITY - set(STAGES[stage].facets or FIELDS))
                  for stage, fields in reads.items()}
    assert not any(undeclared.values()), (
        f"stages read operator facets they do not declare (add them to the stage's "
        f"`facets`, or its cache key misses code it runs): {undeclared}")
    assert {"train", "qat", "codegen", "accelerator", "ondevice"} <= set(reads)


def test_declared_facets_are_operator_fields():
    for name, stage in STAGES.items():
        assert set(stage.facets or ()) <= FIELDS - IDENTITY, name
    assert IDENTITY <= FIELDS
