"""The README's quick start, run exactly as written (one bash, a temporary directory), with
the editor step replaced by the edit its comment describes; each step's output is checked
for what the README's comment promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, edgebuild_cmd
from test_readme import assert_current, generator

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("git") is None, reason="the quick start uses git")]


def _quick_start() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"## Quick start\n\n```sh\n(.*?)```", text, re.S)
    assert block, "README.md has no quick-start block"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()
            if line.split("#", 1)[0].strip()]


def _run(steps: list[str], cwd: Path) -> list[tuple[str, str]]:
    """(stdout, stderr) of each step; the steps share one shell (`cd` carries over)."""
    tool = Path(edgebuild_cmd()[0]).parent
    editor = cwd / "editor.sh"  # "change train.epochs", as the step's comment says
    before, after = generator().QUICK_START_EDIT  # the edit the README's status shows
    editor.write_text(f"#!/bin/sh\nsed -i -e 's/{before}/{after}/' \"$1\"\n")
    editor.chmod(0o755)
    env = {**os.environ, "PATH": f"{tool}{os.pathsep}{os.environ['PATH']}",
           "EDITOR": str(editor)}
    env.pop("EDGEBUILD_CACHE", None)
    script = "set -e\n" + "".join(f"echo '<<<step>>>'; echo '<<<step>>>' >&2\n{step}\n"
                                  for step in steps)
    result = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-3000:]
    outs = result.stdout.split("<<<step>>>\n")[1:]
    errs = result.stderr.split("<<<step>>>\n")[1:]
    assert len(outs) == len(errs) == len(steps)
    return list(zip(outs, errs, strict=True))


def test_the_quick_start_works_as_written(tmp_path):
    steps = _quick_start()
    assert steps[0].startswith("mkdir ") and "$EDITOR edgebuild.yaml" in steps
    outputs = dict(enumerate(_run(steps, tmp_path)))
    builds = [outputs[i][1] for i, step in enumerate(steps) if step == "edgebuild"]
    statuses = [outputs[i][0] for i, step in enumerate(steps) if step == "edgebuild status"]
    assert len(builds) == 2 and len(statuses) == 2
    assert re.search(r"\.train\s+built", builds[0]) and re.search(r"\.kat\s+built", builds[0])
    assert "would run" not in statuses[0]  # everything up to date
    assert "would run" in statuses[1] and "epochs" in statuses[1]  # which stage, which field
    assert_current("status", generator().status_of(statuses[1]))  # as the README shows it
    assert re.search(r"\.train\s+built", builds[1])  # the edit reruns training
    assert not re.search(r"\.data\s+built", builds[1])  # and only what it reaches
    last = outputs[len(steps) - 1][1]
    assert steps[-1].startswith("git checkout edgebuild.yaml")
    assert re.search(r"\.train\s+restored", last), last  # reverting restores from the cache
    assert not re.search(r"\s built\s", last), last
