"""Code-aware cache keys (edgebuild/build/sources.py): a stage's key covers the source files that
compute it, found by import, so editing code reruns exactly the stages that use it."""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from edgebuild.build import sources
from edgebuild.pipeline.stages import STAGES

PACKAGE = Path(sources.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def closures() -> dict[str, set[str]]:
    edges = sources.graph()
    return {stage: sources.closure(edges, f"edgebuild.pipeline.stages.{stage}")
            for stage in STAGES}


def test_training_code_is_not_the_quantizers(closures):
    assert "edgebuild.model.quantization" not in closures["train"]
    assert "edgebuild.model.quantization" in closures["quantize"]
    assert "edgebuild.train.loop" in closures["train"]
    # function-local imports count: the stage imports torch code inside run()
    assert "edgebuild.train.network" in closures["train"]


def test_a_stage_does_not_depend_on_the_other_stages_or_on_validation(closures):
    assert "edgebuild.pipeline.stages.quantize" not in closures["train"]
    assert all("edgebuild.pipeline.validation" not in found for found in closures.values())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package: the baseline and every edit start from the same bytes."""
    copy = tmp_path_factory.mktemp("pristine") / "edgebuild"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.fixture(scope="module")
def baseline(pristine: Path) -> dict[str, str]:
    return sources.stage_digests(CUTS, pristine)


CUTS = {name: stage.cut() for name, stage in STAGES.items()}


def _edited(tmp_path: Path, pristine: Path, relative: str,
            edit: Callable[[str], str]) -> dict[str, str]:
    copy = tmp_path / "edgebuild"
    shutil.copytree(pristine, copy)
    (copy / relative).write_text(edit((copy / relative).read_text()))
    return sources.stage_digests(CUTS, copy)


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {stage for stage in before if before[stage] != after[stage]}


def _in_function(name: str) -> Callable[[str], str]:
    """One statement more at the top of the module-level function `name`."""
    def edit(text: str) -> str:
        function = next(n for n in ast.parse(text).body
                        if isinstance(n, ast.FunctionDef) and n.name == name)
        first = function.body[0]
        lines = text.splitlines(keepends=True)
        lines.insert(first.lineno - 1, " " * first.col_offset + "_edited = 1\n")
        return "".join(lines)
    return edit


def test_editing_the_quantizer_changes_quantize_and_its_readers_not_train(
        tmp_path, pristine, baseline, closures):
    changed = _changed(baseline, _edited(tmp_path, pristine, "model/quantization.py",
                                         lambda text: text + "\nEDITED = 1\n"))
    assert not changed  # a definition nothing reads is no stage's code
    changed = _changed(baseline, _edited(
        tmp_path / "2", pristine, "pipeline/stages/quantize.py", _in_function("quantize_layers")))
    assert "quantize" in changed
    assert not changed & {"data", "train", "qat"}
    assert changed <= {s for s, found in closures.items()
                       if "edgebuild.pipeline.stages.quantize" in found}


def test_comments_and_docstrings_are_no_stage_s_code(tmp_path, pristine, baseline):
    def edit(text: str) -> str:
        return text.replace('"""', '""" edited', 1) + "\n# edited\n"
    assert not _changed(baseline, _edited(tmp_path, pristine, "model/quantization.py", edit))


def test_a_device_profile_is_code_of_the_stages_that_read_profiles(tmp_path, pristine, baseline,
                                                                   closures):
    changed = _changed(baseline, _edited(
        tmp_path, pristine, "targets/max7800x/profiles/max78000.yaml",
        lambda text: text + "\n# edited\n"))
    readers = {s for s, found in closures.items()
               if "edgebuild.targets.max7800x.profile" in found}
    assert "accelerator" in changed and changed <= readers
    assert not changed & {"data", "train"}  # qat and quantize read its number format


def test_type_checking_imports_are_not_followed(tmp_path):
    package = tmp_path / "edgebuild"
    for name, body in {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from edgebuild import b\n"
                "else:\n    from edgebuild import c\n",
        "b.py": "", "c.py": "def f():\n    from edgebuild import d\n", "d.py": ""}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(body)
    edges = sources.graph(package)
    assert sources.closure(edges, "edgebuild.a") == {"edgebuild.a", "edgebuild.c", "edgebuild.d"}


def test_the_key_material_names_the_code_not_a_version(tmp_path):
    from edgebuild.build import builder

    cache_root = tmp_path / "cache"
    digest = builder.code_digest("train", cache_root)
    assert len(digest) == 64
    assert (cache_root / "stat").is_dir()  # remembered for the next process
    assert not hasattr(STAGES["train"], "version")
