"""Project settings that belong to the team, not to one model: `edgebuild.toml` at the
project root (committed next to edgebuild.lock).

    [cache]
    remote = "s3://team-bucket/edgebuild"   # the shared remote cache (fsspec URL)

    [cluster]
    scheduler = "tcp://scheduler:8786"       # run stages on a Dask cluster

A manifest says what to build; where results are shared and which machines build them is
the same for every manifest of a project, so it lives here. The command line
(`--remote`, `--scheduler`) and the environment (`EDGEBUILD_REMOTE`,
`EDGEBUILD_SCHEDULER`) override it, in that order. Credentials never go here: fsspec
reads them from its own configuration (docs/guide/sharing.md, "Sharing a cache").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from edgebuild.core.errors import UserError

FILE = "edgebuild.toml"
ALLOWED = {"cache": ("remote",), "cluster": ("scheduler",)}
ENV = {"remote": "EDGEBUILD_REMOTE", "scheduler": "EDGEBUILD_SCHEDULER"}
# Writing to the remote is asked for per machine (`--push`, or this variable in CI), never
# by the committed edgebuild.toml: a developer's build reads the team's results and
# writes none of its own (docs/guide/sharing.md, "Who may write the remote").
PUSH_ENV = "EDGEBUILD_REMOTE_PUSH"
MAX_BYTES = 64 * 1024  # the file has two settings: read no more than this


@dataclass(frozen=True)
class Settings:
    remote: str | None = None  # fsspec URL of the shared cache
    scheduler: str | None = None  # Dask scheduler address
    push: bool = False  # write what a build computes to the remote (--push, PUSH_ENV)


def read(root: Path) -> Settings:
    """The project's settings file, checked key by key (absent file: no settings)."""
    path = root / FILE
    raw = _parsed(path)
    values: dict[str, str] = {}
    for table, body in raw.items():
        if table not in ALLOWED or not isinstance(body, dict):
            raise UserError(f"{path}: unknown table [{table}] (allowed: "
                            f"{', '.join(f'[{t}]' for t in ALLOWED)})")
        for key, value in body.items():
            if key not in ALLOWED[table]:
                raise UserError(f"{path}: [{table}] {key}: unknown key (allowed: "
                                f"{', '.join(ALLOWED[table])})")
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{path}: [{table}] {key}: expected a non-empty string")
            values[key] = value.strip()
    return Settings(values.get("remote"), values.get("scheduler"))


def _parsed(path: Path) -> dict[str, object]:
    """The TOML document in `path` ({} without one), read within MAX_BYTES."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > MAX_BYTES:
        raise UserError(f"{path}: larger than {MAX_BYTES} bytes; it holds two settings")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); TOML "
                        "files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise UserError(f"{path}: nested too deeply to be edgebuild's settings") from None


def resolve(root: Path, remote: str | None, scheduler: str | None,
            push: bool = False) -> Settings:
    """Command line over environment over edgebuild.toml; an empty value (`--remote ''`,
    `EDGEBUILD_REMOTE=`) turns the setting off. Pushing: `push` (--push) or PUSH_ENV."""
    project = read(root)

    def pick(flag: str | None, name: str, default: str | None) -> str | None:
        for value in (flag, os.environ.get(ENV[name])):
            if value is not None:
                return value or None
        return default

    shared = project.remote
    if shared is not None and "://" not in shared and not Path(shared).is_absolute():
        shared = str(root / shared)  # a directory in edgebuild.toml: relative to the project
    wanted = push or _yes(os.environ.get(PUSH_ENV, ""), PUSH_ENV)
    return Settings(pick(remote, "remote", shared), pick(scheduler, "scheduler", project.scheduler),
                    wanted)


def _yes(value: str, name: str) -> bool:
    if value.strip().lower() in ("", "0", "false", "no", "off"):
        return False
    if value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    raise UserError(f"{name}={value!r}: expected 1/true/yes or 0/false/no")
