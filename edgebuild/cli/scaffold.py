"""`edgebuild init`: a working project in an empty directory (digits: offline, seconds)."""

from __future__ import annotations

from pathlib import Path

from edgebuild.core.errors import UserError
from edgebuild.core.fields import _identifier

MANIFEST = """\
# An edgebuild manifest: run `edgebuild` here to build it, `edgebuild status` to see
# what an edit would rebuild, `edgebuild schema -o manifest.schema.json` for every key
# (point your editor's YAML language server at that file).
name: {name}
seed: 1
dataset:
  format: sklearn-digits          # 1797 handwritten 8x8 digits shipped with scikit-learn
  split: {{val: 0.1, test: 0.2}}
model:
  input: [1, 8, 8]                # channels, height, width
  layers:
    - {{name: conv1, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu}}
    - {{name: conv2, op: conv2d, out: 32, kernel: 3, pad: 1, act: relu, pool: {{mode: max, size: 2}}}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train:
  epochs: 20
  batch: 64
  optimizer: {{adam: {{lr: 0.003}}}}
target:
  device: host
  memory: {{l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""

GITIGNORE = "build/\ncache/\n"


def init(directory: Path, name: str, git: bool = True) -> list[Path]:
    try:
        _identifier(name)
    except ValueError as exc:
        raise UserError(f"--name: {exc}") from None
    manifest, ignore = directory / "edgebuild.yaml", directory / ".gitignore"
    existing = [p for p in (manifest, directory / "manifests") if p.exists()]
    if existing:
        raise UserError(f"{existing[0]} already exists; `edgebuild init` only scaffolds a "
                        "project that has no manifest yet")
    directory.mkdir(parents=True, exist_ok=True)
    manifest.write_text(MANIFEST.format(name=name))
    written = [manifest]
    if not ignore.exists():
        ignore.write_text(GITIGNORE)
        written.append(ignore)
    if git:
        _repository(directory, written)
    return written


def _repository(directory: Path, written: list[Path]) -> None:
    """Make the project a git repository with its files staged, as `cargo new` and
    `uv init` do: edgebuild.lock is meant to be committed, and reverting an edit
    (`git checkout edgebuild.yaml`, the quick start's last step) needs the file tracked.
    Staged, not committed: a commit needs an author identity that is the user's to set.
    Skipped without git, or inside an existing work tree (its owner decides)."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        return
    inside = subprocess.run([git, "rev-parse", "--is-inside-work-tree"], cwd=directory,
                            capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if inside.returncode == 0:
        return
    for command in (["init", "-q"], ["add", "--", *(p.name for p in written)]):
        result = subprocess.run([git, *command], cwd=directory, capture_output=True,
                                text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise UserError(f"git {command[0]} in {directory} failed: "
                            f"{result.stderr.strip() or result.returncode}; run "
                            "`edgebuild init --no-git` to skip it")
