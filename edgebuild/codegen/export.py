"""`edgebuild export --to DIR`: put the generated model files into a user's firmware tree.

Only the model files (`model/` of the generated project, plus the training library of
`ondevice/train/` when the manifest trains on the device) are written. A record
(`DIR/.edgebuild-export.json`) lists what edgebuild wrote and each file's hash, so a
refresh can replace its own files, delete ones a model no longer needs, and refuse to
overwrite anything it did not write or that the user edited since (unless `--force`).
Files the record does not list are never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson
from edgebuild.core.errors import UserError

RECORD = ".edgebuild-export.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(target: Path) -> dict[str, Any]:
    # the record as read: JSON, {"manifest": name, "files": {file name: sha256}}
    try:
        return boundedjson.read(target / RECORD)
    except FileNotFoundError:
        return {"files": {}}
    except (OSError, ValueError) as exc:
        raise UserError(f"{target / RECORD}: unreadable ({exc}); delete it to start over") from None


# The training files a firmware needs; train_main.c, train_data.h (the known-answer test)
# and the Makefile stay in the build.
TRAINING_FILES = ("train_model.c", "train_model.h", "eb_train.c", "eb_train.h",
                  "eb_train_asm.h", "eb_train_tiles.c", "eb_train_tiles.h", "eb_wof.c", "eb_wof.h",
                  "eb_train_config.h")


def sources(build: Path) -> dict[str, Path]:
    """File name -> generated file, for a manifest's build directory."""
    found = {p.name: p for p in (build / "codegen" / "model").iterdir() if p.is_file()}
    train = build / "ondevice" / "train"
    if train.is_dir():
        found.update({name: train / name for name in TRAINING_FILES})
    return found


def export(files: dict[str, Path], target: Path, manifest: str, force: bool) -> list[str]:
    """Copy `files` (name -> generated file) into `target`; returns the names written."""
    previous = _record(target)
    owned = previous.get("files", {})
    names = sorted(files)
    conflicts = []
    for name in names:
        path = target / name
        if path.exists() and not force:
            if name not in owned:
                conflicts.append(f"{path}: exists and was not written by edgebuild")
            elif _sha(path) != owned[name]:
                conflicts.append(f"{path}: edited since the last export")
    if conflicts:
        raise UserError(conflicts + ["nothing was written; use --force to overwrite"])
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        temp = target / f".{name}.tmp"
        shutil.copyfile(files[name], temp)
        os.replace(temp, target / name)
    for stale in sorted(set(owned) - set(names)):
        if (target / stale).exists() and (force or _sha(target / stale) == owned[stale]):
            (target / stale).unlink()
    record = {"manifest": manifest, "files": {name: _sha(target / name) for name in names}}
    (target / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return names
