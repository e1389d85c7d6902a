"""Keys as narrow as the outputs (issue 30): editing one facet of one operator moves the
code key of the stages that run that facet, and no other. Each named function an
operator's facet holds gets one statement more (in a copy of its module) and every
stage's code digest is taken again (build.sources, build.definitions); the
facet's own argument in the record's call is edited the same way.

`EDGEBUILD_KEYS_TABLE=FILE` writes the table facet -> stages whose key moved.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from edgebuild.build import definitions, sources
from edgebuild.build.stage import IDENTITY
from edgebuild.ops import OPS
from edgebuild.ops.operator import Operator, Unsupported
from edgebuild.pipeline.stages import STAGES

PACKAGE = sources.PACKAGE
FACETS = sorted(f.name for f in dataclasses.fields(Operator) if f.name not in IDENTITY)
TRAINING = {"data", "train", "qat"}
NOT_EMITTERS = TRAINING | {"quantize", "evaluate"}  # no C or ONNX runs in them


def _functions(value: Any) -> Iterator[Callable[..., Any]]:
    """The named functions a facet holds (lambdas are covered by the call's edit)."""
    if isinstance(value, Unsupported) or value is None:
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _functions(getattr(value, field.name))
    elif inspect.isfunction(value) and value.__name__ != "<lambda>" and \
            value.__module__.startswith("edgebuild."):
        yield value


def _edited_function(function: Callable[..., Any]) -> tuple[str, str]:
    """(module, its source with one statement more at the top of the function's body)."""
    module = function.__module__
    path = Path(inspect.getsourcefile(function) or "")
    lines = path.read_text().splitlines(keepends=True)
    tree = ast.parse("".join(lines))
    line = function.__code__.co_firstlineno  # the def's, or its first decorator's
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == function.__name__
                and line in (n.lineno, *(d.lineno for d in n.decorator_list)))
    first = node.body[0]
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1, f"{indent}_facet_edited = 1\n")
    return module, "".join(lines)


def _edited_argument(module: definitions.Module, facet: str) -> str | None:
    """The module's source with the facet's argument of its operator calls edited."""
    text = module.source.decode()
    spans = []
    fields = [f.name for f in dataclasses.fields(Operator)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Operator":
            for position, argument in enumerate(node.args):
                if position < len(fields) and fields[position] == facet:
                    spans.append(argument)
            spans += [k.value for k in node.keywords if k.arg == facet]
    if not spans:
        return None
    lines = text.splitlines(keepends=True)
    for node in sorted(spans, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[node.lineno - 1]
        lines[node.lineno - 1] = line[:node.col_offset] + "(" + line[node.col_offset:]
        end = lines[(node.end_lineno or node.lineno) - 1]
        offset = (node.end_col_offset or 0) + (1 if node.end_lineno == node.lineno else 0)
        lines[(node.end_lineno or node.lineno) - 1] = end[:offset] + " )" + end[offset:]
    return "".join(lines)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Facet -> the stages whose code key moved when any of its code was edited."""
    parsed = sources.parse()
    known = sources.modules()
    cuts = {name: stage.cut() for name, stage in STAGES.items()}
    before = sources.digests(parsed, cuts)
    scratch = tmp_path_factory.mktemp("keys")
    moved: dict[str, set[str]] = {facet: set() for facet in FACETS}
    edits: list[tuple[str, str, str]] = []  # facet, module, edited source
    for facet in FACETS:
        seen = set()
        for operator in OPS.values():
            for function in _functions(getattr(operator, facet)):
                if function not in seen:
                    seen.add(function)
                    edits.append((facet, *_edited_function(function)))
        for name in known:
            if name.startswith("edgebuild.ops.") and \
                    (text := _edited_argument(parsed[name], facet)) is not None:
                edits.append((facet, name, text))
    for facet, name, text in edits:
        copy = scratch / f"{len(list(scratch.iterdir()))}.py"
        copy.write_text(text)
        edited = dict(parsed)
        edited[name] = definitions.parse(name, copy, known)
        edited[name].package = parsed[name].package
        after = sources.digests(edited, cuts)
        changed = {stage for stage in before if before[stage] != after[stage]}
        readers = {stage for stage, cut in cuts.items() if not cut.drops(facet)}
        assert changed or not readers, f"editing {facet} in {name} moved no key at all"
        moved[facet] |= changed
    if os.environ.get("EDGEBUILD_KEYS_TABLE"):
        Path(os.environ["EDGEBUILD_KEYS_TABLE"]).write_text(json.dumps(
            {facet: sorted(stages) for facet, stages in moved.items()}, indent=1) + "\n")
    return moved


@pytest.mark.slow
def test_editing_an_emitter_never_moves_a_training_key(table: dict[str, set[str]]):
    for facet in ("c", "onnx", "windows"):
        assert not table[facet] & NOT_EMITTERS, (facet, sorted(table[facet]))


@pytest.mark.slow
def test_an_onnx_emitter_is_the_onnx_stage_s_code_only(table: dict[str, set[str]]):
    everything = {name for name, stage in STAGES.items() if stage.facets is None}
    assert "onnx" in table["onnx"]
    assert table["onnx"] <= {"onnx"} | everything


@pytest.mark.slow
def test_each_facet_moves_the_stages_that_declare_it(table: dict[str, set[str]]):
    for facet, stages in table.items():
        if not stages:
            continue
        readers = {name for name, stage in STAGES.items()
                   if stage.facets is None or facet in stage.facets}
        assert stages <= readers, (facet, sorted(stages - readers))
