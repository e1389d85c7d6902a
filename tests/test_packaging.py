"""An installed (non-editable) edgebuild finds its templates and schemas (the manifest's and
every artifact's)."""

from __future__ import annotations

import json
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

PROBE = """
import edgebuild, json, sys
from edgebuild.core.resources import templates_dir
from edgebuild.manifest import schema
root = templates_dir()
assert str(root).startswith(sys.argv[1]), (root, sys.argv[1])
for rel in ("kernels/eb_kernels.c", "kernels/eb_kernels.h", "project/cnn.c.j2",
            "project/link.ld.j2", "project/startup_m4.c", "tools/insn_count.c"):
    assert (root / rel).is_file(), rel
from importlib.resources import files
shipped = files("edgebuild.schemas").joinpath("manifest.schema.json").read_text()
assert shipped == schema.render(), "the wheel ships a stale schema"
from edgebuild.core.resources import schemas_dir
from edgebuild.build import contracts
from edgebuild.pipeline.stages import STAGES
assert str(schemas_dir()).startswith(sys.argv[1]), (schemas_dir(), sys.argv[1])
for stage in STAGES.values():
    for name in stage.artifacts.values():
        assert contracts.schema_path(name).is_file(), name
        contracts.validator(name)
from edgebuild.targets.max7800x import profile as device
assert set(device.DEVICE_NAMES) >= {"max78000", "max78002"}, device.DEVICE_NAMES
assert device.profile("max78000").data_memory.instance_bytes == 32768
import importlib, pkgutil
installed = {m.name for m in pkgutil.walk_packages(edgebuild.__path__, "edgebuild.")}
missing = set(sys.argv[2].split(",")) - installed
assert not missing, f"the wheel lacks modules: {sorted(missing)}"
for name in sorted(installed):
    if not name.endswith("__main__"):  # runs the command line
        importlib.import_module(name)
from edgebuild.build import sources
print(json.dumps(sources.stage_digests(list(STAGES))))  # keys: the same installed or not
from edgebuild.core.resources import template_files
print("ok", root)
for path in template_files():
    print(path.relative_to(root).as_posix())
"""


_SCRATCH = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", ".mypy_cache",
                                  ".ruff_cache", ".pytest_cache", ".setuptools-build")


def _not_source(directory: str, names: list[str]) -> set[str]:
    """What a clean copy leaves behind: caches anywhere, and the build and cache trees at
    the top only (`edgebuild/build/` is the build engine's package, not a build tree)."""
    top = {"build", "cache"} & set(names) if Path(directory) == REPO else set()
    return top | set(_SCRATCH(directory, names))


def test_wheel_install_ships_templates(tmp_path):
    # Installed from a clean copy: setuptools reuses a checkout's build/lib and never removes
    # a file deleted from the sources, so an earlier install there would ship stale files.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=_not_source)
    target = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                             "--quiet", "--target", str(target), str(source)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    # setuptools' scratch files stay out of build/, which is edgebuild's (setup.cfg)
    assert not (source / "build").exists() and (source / ".setuptools-build").is_dir()
    # every module of the checkout is in the wheel and imports there (a subpackage missing
    # from pyproject's package list would otherwise only show when CI installs it)
    import edgebuild

    modules = sorted(m.name for m in pkgutil.walk_packages(edgebuild.__path__, "edgebuild."))
    probe = subprocess.run([sys.executable, "-c", PROBE, str(target), ",".join(modules)],
                           cwd=tmp_path,
                           env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr[-2000:]
    digests, output = probe.stdout.split("\n", 1)
    from edgebuild.build import sources
    from edgebuild.pipeline.stages import STAGES

    assert json.loads(digests) == sources.stage_digests(list(STAGES))
    assert output.startswith("ok")
    # the files that key code generation are the same installed and in this checkout, so
    # edgebuild.lock written in either agrees
    from edgebuild.core.resources import template_files, templates_dir

    here = [p.relative_to(templates_dir()).as_posix() for p in template_files()]
    assert output.splitlines()[1:] == here
