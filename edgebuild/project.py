"""Where things are: the manifests of a project, its build tree, cache and lock file.

A project is a directory holding `edgebuild.yaml` and/or `manifests/*.yaml`. Outputs go to
`build/<manifest name>/`, the cache to `cache/` (or `--cache-dir` / `EDGEBUILD_CACHE`), and
`edgebuild.lock` sits next to the manifests, meant to be committed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edgebuild import validation
from edgebuild.errors import Diagnostic, UserError

CACHE_ENV = "EDGEBUILD_CACHE"


@dataclass(frozen=True)
class Project:
    root: Path
    cache_root: Path
    manifests: tuple[validation.Checked, ...]

    @property
    def build_root(self) -> Path:
        return self.root / "build"

    @property
    def lock_path(self) -> Path:
        return self.root / "edgebuild.lock"

    def build_dir(self, name: str) -> Path:
        return self.build_root / name

    def named(self, name: str) -> validation.Checked:
        return next(c for c in self.manifests if c.manifest.name == name)


def manifest_files(directory: Path) -> list[Path]:
    found = [directory / "edgebuild.yaml"] if (directory / "edgebuild.yaml").is_file() else []
    found += sorted(p for p in (directory / "manifests").glob("*.y*ml")
                    if p.suffix in (".yaml", ".yml"))
    return found


def project_root(manifest: Path) -> Path:
    """`X/manifests/m.yaml` and `X/edgebuild.yaml` both belong to project X."""
    parent = manifest.resolve().parent
    return parent.parent if parent.name == "manifests" else parent


def locate(paths: list[str], cwd: Path) -> tuple[Path, list[Path]]:
    """The project root and the manifest files named by the command line (default: cwd)."""
    files: list[Path] = []
    for raw in paths or [str(cwd)]:
        path = (cwd / raw) if not Path(raw).is_absolute() else Path(raw)
        if path.is_dir():
            found = manifest_files(path)
            if not found:
                raise UserError(Diagnostic(raw, "no edgebuild.yaml or manifests/*.yaml here; "
                                                "create one with `edgebuild init`"))
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UserError(Diagnostic(raw, "no such manifest file or project directory"))
    return project_root(files[0]), files


def load(paths: list[str], cwd: Path, cache_dir: str | None = None) -> Project:
    root, files = locate(paths, cwd)
    checked, problems = [], []
    for path in dict.fromkeys(p.resolve() for p in files):
        try:
            checked.append(validation.load(path, _display(path, cwd)))
        except UserError as exc:
            problems += exc.diagnostics
    problems += _duplicate_names(checked)
    if problems:
        raise UserError(problems)
    cache = Path(cache_dir or os.environ.get(CACHE_ENV) or root / "cache")
    return Project(root, cache if cache.is_absolute() else cwd / cache, tuple(checked))


def _display(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd.resolve()))
    except ValueError:
        return str(path)


def _duplicate_names(checked: list[validation.Checked]) -> list[Diagnostic]:
    seen: dict[str, validation.Checked] = {}
    problems = []
    for c in checked:
        name = c.manifest.name
        if name in seen:
            problems.append(c.document.diagnostic(("name",), (
                f"manifest name {name!r} is already used by {seen[name].document.path}; "
                "names must be unique (they name build/<name>/)")))
        else:
            seen[name] = c
    return problems
