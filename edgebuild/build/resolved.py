"""A validated manifest reduced to plain data: what the scheduler and cache keys need.

Validating with pydantic costs ~0.4 s of imports and model building, too much for a no-op
build (budget 0.5 s). A successful validation is therefore memoized by content: the record
`<cache>/checked/<id>.json` is keyed by the manifest's bytes, its absolute path (relative
data paths depend on it) and a fingerprint of edgebuild's own source, and it is only used
while the data files it was checked against still have the same content. Anything else —
an edit, a new edgebuild, a changed data file, an invalid manifest — takes the full path.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from edgebuild.build.cache import file_digest, write_atomic
from edgebuild.core import boundedjson
from edgebuild.core.jsontypes import JSONObject

if TYPE_CHECKING:  # validation loads pydantic: a no-op build never imports it (see above)
    from edgebuild.build.checked import Checked

RECORD_VERSION = 4


class Summary(TypedDict):
    """What `edgebuild check` prints about a model."""

    layers: int
    params: int
    macs: int
    warnings: list[str]  # validation's warnings (validation.Checked.warnings)


@dataclass(frozen=True)
class Resolved:
    name: str
    path: str  # absolute manifest path
    display: str  # as shown in messages
    configs: dict[str, JSONObject]  # stage -> resolved config
    files: dict[str, list[str]]  # stage -> data files whose content keys it
    summary: Summary
    target: str | None = None  # the target's label when the manifest lists several

    @property
    def reproducible(self) -> bool:
        """`train.reproducible` (build.kernels); a manifest without training is."""
        train = self.configs.get("train", {}).get("train")
        return not isinstance(train, dict) or train.get("reproducible", True) is not False


def code_fingerprint() -> str:
    """Changes whenever any file of edgebuild's package changes: its code and its data
    (device profiles). Stat only, strings only: it runs on every build, no-op included."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(directory, name)
            info = os.stat(path)
            digest.update(f"{path[len(root):]}:{info.st_size}:{info.st_mtime_ns};".encode())
    return digest.hexdigest()


def record_id(path: Path, fingerprint: str) -> str:
    with open(path, "rb") as handle:
        body = handle.read()
    head = f"{RECORD_VERSION}\0{os.path.realpath(path)}\0{fingerprint}\0".encode()
    return hashlib.sha256(head + body).hexdigest()


def _record_path(cache_root: Path, ident: str) -> str:
    return f"{cache_root}/checked/{ident[:2]}/{ident}.json"


def recall(path: Path, display: str, cache_root: Path, fingerprint: str
           ) -> list[Resolved] | None:
    """The memoized records for this exact manifest (one per target), if its data files
    are unchanged."""
    try:
        raw = boundedjson.read(_record_path(cache_root, record_id(path, fingerprint)))
        for name, digest in raw["file_digests"].items():
            if file_digest(name, cache_root) != digest:
                return None
        return [Resolved(**{**item, "display": display}) for item in raw["resolved"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember(found: list[Resolved], cache_root: Path, fingerprint: str) -> None:
    files = sorted({f for resolved in found for paths in resolved.files.values() for f in paths})
    try:
        record = {"resolved": [asdict(resolved) for resolved in found],
                  "file_digests": {f: file_digest(Path(f), cache_root) for f in files}}
        write_atomic(Path(_record_path(cache_root, record_id(Path(found[0].path), fingerprint))),
                     json.dumps(record, sort_keys=True))
    except OSError:
        pass  # memoization is an optimization; an unwritable cache is reported by `build`


def from_checked(checked: Checked) -> Resolved:
    """Reduce a checked manifest (the full pydantic path) to plain data."""
    from edgebuild.build.registry import STAGES

    graph = checked.graph
    return Resolved(
        name=checked.name, path=str(Path(checked.path).resolve()), target=checked.target,
        display=checked.document.path,
        configs={name: stage.config(checked) for name, stage in STAGES.items()
                 if stage.applies(checked)},
        files={name: [str(p.resolve()) for p in stage.files(checked)]
               for name, stage in STAGES.items() if stage.applies(checked)},
        summary={"layers": len(graph.nodes), "params": graph.params, "macs": graph.macs,
                 "warnings": list(checked.warnings)})
