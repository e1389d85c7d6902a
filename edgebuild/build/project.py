"""Where things are: the manifests of a project, its build tree, cache and lock file.

A project is a directory holding `edgebuild.yaml` and/or `manifests/*.yaml`. Outputs go to
`build/<manifest name>/`, the cache to `cache/` (or `--cache-dir` / `EDGEBUILD_CACHE`), and
`edgebuild.lock` sits next to the manifests, meant to be committed.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from edgebuild.build import resolved as resolutions
from edgebuild.build.resolved import Resolved
from edgebuild.core.errors import Diagnostic, UserError

CACHE_ENV = "EDGEBUILD_CACHE"


@dataclass(frozen=True)
class Project:
    root: Path
    cache_root: Path
    manifests: tuple[Resolved, ...]

    @property
    def build_root(self) -> Path:
        return self.root / "build"

    @property
    def lock_path(self) -> Path:
        return self.root / "edgebuild.lock"

    def build_dir(self, name: str) -> Path:
        return self.build_root / name



def manifest_files(directory: Path) -> list[Path]:
    """`edgebuild.yaml` and `manifests/*.yaml|yml`: one directory read, no per-file stat
    beyond the type the directory entry carries (this runs on every build)."""
    found = [directory / "edgebuild.yaml"] if (directory / "edgebuild.yaml").is_file() else []
    try:
        entries = list(os.scandir(directory / "manifests"))
    except OSError:
        return found
    return found + sorted(Path(e.path) for e in entries
                          if e.name.endswith((".yaml", ".yml")) and e.is_file())


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
                raise UserError(Diagnostic(raw, _nothing_here(path)))
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise UserError(Diagnostic(raw, "no such manifest file or project directory"))
    return project_root(files[0]), files


def _nothing_here(directory: Path) -> str:
    """Where manifests go, and the ones lying elsewhere in `directory` if any."""
    stray = sorted(p.name for p in directory.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
    if stray:
        shown = ", ".join(stray[:5]) + (", ..." if len(stray) > 5 else "")
        return (f"no edgebuild.yaml or manifests/*.yaml here, but {shown}: a project's "
                "manifests go in manifests/ (or name the project's one edgebuild.yaml); "
                f"or build one as it is with `edgebuild build {stray[0]}`")
    return "no edgebuild.yaml or manifests/*.yaml here; create one with `edgebuild init`"


def where(paths: list[str], cwd: Path, cache_dir: str | None = None
          ) -> tuple[Path, Path, list[Path]]:
    """The project root, its cache directory and its manifests' real paths (no parsing)."""
    root, files = locate(paths, cwd)
    cache = Path(cache_dir or os.environ.get(CACHE_ENV) or root / "cache")
    cache = cache if cache.is_absolute() else cwd / cache
    return root, cache, list(dict.fromkeys(real_path(p) for p in files))


def load(paths: list[str], cwd: Path, cache_dir: str | None = None) -> Project:
    """Every manifest validated (memoized when unchanged), all problems reported at once."""
    root, cache, files = where(paths, cwd, cache_dir)
    fingerprint = resolutions.code_fingerprint()
    found: list[Resolved] = []
    problems: list[Diagnostic] = []
    here = cwd.resolve()
    for path in files:
        display = _display(path, here)
        try:
            found += (resolutions.recall(path, display, cache, fingerprint)
                      or _validate(path, display, cache, fingerprint))
        except UserError as exc:
            problems += exc.diagnostics
    problems += _duplicate_names(found)
    if problems:
        raise UserError(problems)
    return Project(root, cache, tuple(found))


def _validate(path: Path, display: str, cache: Path, fingerprint: str) -> list[Resolved]:
    from edgebuild.build import registry

    found = [resolutions.from_checked(c) for c in registry.provider().load_all(path, display)]
    resolutions.remember(found, cache, fingerprint)
    return found


def real_path(path: Path) -> Path:
    """The manifest's real absolute path: resolving is one lstat per path component, so the
    (shared) directory is resolved once and only a symlinked file itself again."""
    folder = _real_dir(str(path.parent))
    real = Path(folder, path.name)
    return real.resolve() if real.is_symlink() else real


@functools.cache
def _real_dir(folder: str) -> str:
    return os.path.realpath(folder)


def _display(path: Path, here: Path) -> str:
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)


def _duplicate_names(found: list[Resolved]) -> list[Diagnostic]:
    """Two files may not share a name (a manifest's targets do: `<name>/<label>`)."""
    seen: dict[str, Resolved] = {}
    problems = []
    for item in found:
        base = item.name.split("/")[0]
        if base in seen and seen[base].path != item.path:
            problems.append(_name_diagnostic(item, (
                f"manifest name {base!r} is already used by {seen[base].display}; "
                "names must be unique (they name build/<name>/)")))
        else:
            seen.setdefault(base, item)
    return list(dict.fromkeys(problems))


def _name_diagnostic(item: Resolved, message: str) -> Diagnostic:
    from edgebuild.core import document as yamlsource

    return yamlsource.load(item.path, item.display).diagnostic(("name",), message)
