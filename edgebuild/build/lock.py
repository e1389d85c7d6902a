"""`edgebuild.lock`: per manifest and stage, the cache key and output digest of the last
successful build, and (`provenance`) what those keys were made of. Committed next to the manifests; `build --locked` (CI) fails when a
stage's key or digest differs, naming the stage. Sorted keys, one field per line: diffs
show exactly which stage moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeAlias, TypedDict

from edgebuild.build import provenance
from edgebuild.build.cache import write_atomic
from edgebuild.build.provenance import Provenance
from edgebuild.core import boundedjson
from edgebuild.core.errors import UserError

VERSION = 1


class LockEntry(TypedDict, total=False):
    """One stage of one manifest. A lock file always has the key and digest; `outputs`
    (file -> digest prefix) lets a differing digest name the files that differ."""

    key: str
    digest: str
    outputs: dict[str, str]


Lock: TypeAlias = dict[str, dict[str, LockEntry]]  # manifest name -> stage -> entry


def read(path: Path) -> Lock:
    return read_file(path)[0]


def read_file(path: Path) -> tuple[Lock, Provenance | None]:
    """The lock file's manifests, or {} without one. Anything else that is not exactly
    the shape `write` produces is a user error naming the file: valid JSON of another
    shape (`[]`, `null`, a stage that is a string) used to reach `.get` calls far away and
    end the build as an internal error (tests/test_faults.py)."""
    try:
        raw = boundedjson.read(path)
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:  # JSONLimitError: too large or too deep
        raise UserError(f"{path}: unreadable lock file ({exc}); restore it from version "
                        "control, or delete it and rebuild") from None
    if not isinstance(raw, dict) or raw.get("version") != VERSION \
            or not isinstance(raw.get("manifests"), dict):
        raise UserError(f"{path}: not an edgebuild lock file of version {VERSION}; delete it "
                        "and rebuild")
    for name, stages in raw["manifests"].items():
        if not isinstance(stages, dict):
            raise UserError(f"{path}: manifests.{name} is not an object of stages; delete "
                            "the file and rebuild")
        for stage, entry in stages.items():
            if not (isinstance(entry, dict) and isinstance(entry.get("key"), str)
                    and isinstance(entry.get("digest"), str)):
                raise UserError(f"{path}: manifests.{name}.{stage} lacks a string key and "
                                "digest; delete the file and rebuild")
    return raw["manifests"], provenance.parse(raw.get("provenance"))


def write(path: Path, manifests: Lock, record: Provenance | None = None) -> None:
    body: dict[str, object] = {"version": VERSION, "manifests": manifests}
    if record is not None:
        body["provenance"] = record
    write_atomic(path, json.dumps(body, indent=2, sort_keys=True) + "\n")


def merge(previous: Lock, results: Lock, keep: set[str]) -> Lock:
    """Update the built manifests' stages; drop manifests that no longer exist."""
    merged = {name: dict(stages) for name, stages in previous.items() if name in keep}
    for name, stages in results.items():
        merged.setdefault(name, {}).update(stages)
    return merged
