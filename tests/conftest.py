"""Shared test helpers. Tests write only under tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from edgebuild.build import kernels

# Builds pin torch's CPU kernels to the x86-64 baseline before torch computes
# (edgebuild/build/kernels.py) and refuse to train in a process that chose others: tests that
# build in-process share this process with tests that use torch directly, so pin it first.
kernels.pin()

# CI runs are reproducible (the same examples every run); local runs keep exploring.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "manifests"

DIGITS_MANIFEST = """\
name: {name}
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: 2, batch: 64}}
qat: {{epochs: 1}}
target: {{device: host, memory: {{l1: 16KiB, l2: 128KiB, flash: 512KiB}}}}
"""

# a 4x4 npz dataset beside the manifest (data.npz), one linear layer: the fastest build
NPZ_MANIFEST = """\
name: tiny
seed: 1
dataset:
  format: npz
  path: data.npz
model:
  input: [1, 4, 4]
  layers:
    - {name: fc, op: linear, out: 3, flatten: true}
train: {epochs: 1, batch: 16}
qat: {epochs: 1}
target: {device: host, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""


def npz_data(path: Path, seed: int = 0) -> Path:
    """The 60 random 1x4x4 samples of 3 classes that NPZ_MANIFEST's `data.npz` names."""
    import numpy as np

    rng = np.random.default_rng(seed)
    np.savez(path, x=rng.normal(size=(60, 1, 4, 4)).astype(np.float32), y=np.arange(60) % 3)
    return path


def example_targets() -> list[tuple[str, object]]:
    """Every example manifest once per target (`vowels.yaml` lists two), as the pipeline
    reads it: `(id, Manifest)`, the id `name` or `name/target`."""
    from edgebuild.core import document
    from edgebuild.manifest import targets

    found: list[tuple[str, object]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        variants, problems, _ = targets.split(document.load(path))
        assert not problems, problems
        found += [(path.stem if v.target is None else f"{path.stem}/{v.target}", v.manifest)
                  for v in variants]
    return found


def edgebuild_cmd() -> list[str]:
    """The installed console script when present, else the module (same code path)."""
    script = shutil.which("edgebuild")
    return [script] if script else [sys.executable, "-m", "edgebuild"]


def run_cli(args: list[str], cwd: Path, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("EDGEBUILD_CACHE", None) if env is None or "EDGEBUILD_CACHE" not in env else None
    return subprocess.run(edgebuild_cmd() + args, cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def build_json(cwd: Path, *extra: str, env: dict | None = None) -> dict:
    result = run_cli(["build", "--json", *extra], cwd, env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["manifests"]


@pytest.fixture(scope="session")
def examples_build() -> Path:
    """The examples of `manifests/`, built once per run where the README's main job builds
    them (this repository's build/ and cache/; after that job, a no-op), for tests that
    read a real build instead of making their own. Each xdist worker asks; edgebuild's
    claim on build/<name>/ makes the second wait for the first and find it up to date.
    Tests read it and never write to it: copy what you change."""
    result = run_cli(["build", "-j", "2"], REPO, timeout=3600)
    assert result.returncode == 0, result.stderr[-4000:]
    return REPO / "build"


def example_project(root: Path, examples_build: Path, *names: str) -> Path:
    """A writable project at `root` with copies of the named examples (and the folders
    beside them), built from the cache the examples' build filled: restored by key, not
    recomputed. For tests that edit an example and watch what reruns."""
    del examples_build  # asked for so that its build ran: the cache holds every stage
    (root / "manifests").mkdir(parents=True)
    for name in names:
        shutil.copy(EXAMPLES / f"{name}.yaml", root / "manifests" / f"{name}.yaml")
        if (EXAMPLES / name).is_dir():
            shutil.copytree(EXAMPLES / name, root / "manifests" / name)
    build_json(root, "--cache-dir", str(REPO / "cache"))
    return root


@pytest.fixture
def digits_project(tmp_path: Path) -> Path:
    """A project with one small digits manifest at manifests/small.yaml."""
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "small.yaml").write_text(DIGITS_MANIFEST.format(name="small"))
    return tmp_path


def tool(name: str) -> str:
    """The path of a program the README's set-up installs (gcc, arm-none-eabi-gcc, cc, ...).
    Missing, the environment is not the one the README makes: the test fails, never skips."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: the README's set-up commands install it")
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the current renderer")
