"""Where edgebuild's shipped files are: templates (C kernels, jinja glue, tools), JSON
Schemas (the manifest's and each artifact's) and the accelerator device profiles (data
files: which devices exist is known without importing any target code).

In a source checkout they are `repo/templates` and `repo/schemas`, next to the `edgebuild` package the code
was imported from — looked at first, so a second checkout (a git worktree, the refactor
comparison in benchmarks/) uses its own templates even where another checkout is installed
in editable mode. An installed package ships them as `edgebuild.templates` and
`edgebuild.schemas` (see pyproject's package-dir). Neither has an `__init__.py`, so
installed each is a namespace package whose `files()` is a MultiplexedPath — `str()` of
that is not a path, but a child of it is.
"""

from __future__ import annotations

from pathlib import Path

MARKER = "kernels"
SIGNATURE = Path("kernels") / "eb_kernels.h"  # a file only edgebuild's templates have
SCHEMA_MARKER = "artifacts"
SCHEMA_SIGNATURE = Path("manifest.schema.json")  # a file only edgebuild's schemas/ has


def templates_dir() -> Path:
    return _shipped("templates", SIGNATURE, MARKER)


def schemas_dir() -> Path:
    """The JSON Schemas: `manifest.schema.json` and `artifacts/<artifact>.v<N>.schema.json`."""
    return _shipped("schemas", SCHEMA_SIGNATURE, SCHEMA_MARKER)


def _shipped(name: str, signature: Path, marker: str) -> Path:
    """The checkout's `repo/<name>` when it has `signature`, else the installed
    `edgebuild.<name>` (found through its subdirectory `marker`)."""
    checkout = Path(__file__).resolve().parents[2] / name
    if (checkout / signature).is_file():
        return checkout
    try:
        from importlib.resources import files

        root = Path(str(files(f"edgebuild.{name}").joinpath(marker))).parent
        if (root / marker).is_dir():
            return root
    except (ModuleNotFoundError, TypeError, ValueError):
        pass
    return checkout


def template_files() -> list[Path]:
    """The shipped files that key code generation. Hidden files and caches are not shipped
    by an installed package, so a source checkout must not count them either: the keys of
    both (and so edgebuild.lock) agree."""
    root = templates_dir()
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


PROFILES_DIR = Path(__file__).resolve().parents[1] / "targets" / "max7800x" / "profiles"


def device_profiles() -> dict[str, Path]:
    """Accelerator device name -> its profile file (`targets/max7800x/profiles/<name>.yaml`)."""
    return {path.stem: path for path in sorted(PROFILES_DIR.glob("*.yaml"))}
