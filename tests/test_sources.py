"""Code-aware cache keys (pipeline/sources.py): a stage's key covers the source files that
compute it, found by import, so editing code reruns exactly the stages that use it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from edgebuild.pipeline import sources
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
def baseline() -> dict[str, str]:
    return sources.stage_digests(list(STAGES))


def _edited(tmp_path: Path, relative: str, text: str) -> dict[str, str]:
    copy = tmp_path / "edgebuild"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / relative, "a") as handle:
        handle.write(text)
    return sources.stage_digests(list(STAGES), copy)


def _changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {stage for stage in before if before[stage] != after[stage]}


def test_editing_the_quantizer_changes_quantize_and_its_readers_not_train(tmp_path, baseline,
                                                                          closures):
    changed = _changed(baseline, _edited(tmp_path, "model/quantization.py", "\n# edited\n"))
    assert "quantize" in changed
    assert not changed & {"data", "train", "qat"}
    assert changed == {s for s, found in closures.items()
                       if "edgebuild.model.quantization" in found}


def test_a_device_profile_is_code_of_the_stages_that_read_profiles(tmp_path, baseline,
                                                                   closures):
    changed = _changed(baseline, _edited(
        tmp_path, "targets/max7800x/profiles/max78000.yaml", "\n# edited\n"))
    readers = {s for s, found in closures.items()
               if "edgebuild.targets.max7800x.profile" in found}
    assert readers and changed == readers


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
    from edgebuild.pipeline import builder

    cache_root = tmp_path / "cache"
    digest = builder.code_digest("train", cache_root)
    assert len(digest) == 64
    assert (cache_root / "stat").is_dir()  # remembered for the next process
    assert not hasattr(STAGES["train"], "version")
