"""The no-op index: a whole project answered "up to date" from stats alone.

The full up-to-date check (build.uptodate) re-derives every stage's key from the
manifest's resolved settings, data files, upstream digests and tool versions, then
compares it with the stage's state record. Its answer only changes when one of those
inputs changes, and every input is a file: so after a full check has passed, this index
records the stat (size, mtime, inode) of everything it read — the manifest, its data and
template files, the state records, every output file and directory, edgebuild's own
package files, the package directories on sys.path, the tool binaries on PATH — with the
keys and digests it found. The next build stats each of those once, reads this one file,
and if nothing moved, answers without parsing a manifest, reading a state record or
importing the scheduler. Anything that moved sends the build down the full path, which
rewrites the index.

Stats are taken *before* the full check that vouches for them: a file changed after its
stat was taken differs from the recorded stat next time; one changed before fails the
check. The index is a cache of a verdict, never a source of truth — deleting it only
costs one full check.

One index file per environment (`index-<digest of the environment>.json`): builds that
differ in what every key depends on outside the manifests — another interpreter or
virtual environment, another cache directory (`--cache-dir`, EDGEBUILD_CACHE), edited
edgebuild sources — each keep their own, so alternating them (a CI job and a developer's
shell, two cache directories) leaves both on the fast path, and a no-op reads only its own
file, whatever the others hold. The newest MAX_ENVIRONMENTS files are kept. Builds that
differ only in their arguments (which manifests, `--until`, `-j`, `--json`, `--locked`)
share one file: its entries are per manifest file and per stage, and a build of some
manifests or stages updates only theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TypeAlias

from edgebuild.build import builder, outputs, uptodate
from edgebuild.build.cache import write_atomic
from edgebuild.build.outcome import Options, StageRecord
from edgebuild.build.project import Project
from edgebuild.build.registry import STAGES
from edgebuild.build.resolved import Resolved, code_fingerprint
from edgebuild.core import boundedjson

VERSION = 3  # 2: a manifest file's entries are a list, one per target it lists; 3: a file
# per environment
MAX_ENVIRONMENTS = 4  # index files kept (the newest); a no-op reads only its own
Stat: TypeAlias = list[int]  # [size, mtime_ns, inode]
Records: TypeAlias = dict[str, dict[str, StageRecord]]  # manifest name -> stage -> record


def commands() -> list[str]:
    """The external commands some stage runs (`cmd:<name>` among its tools)."""
    return sorted({tool[4:] for stage in STAGES.values() for tool in stage.tools
                   if tool.startswith("cmd:")})


def stat(path: str) -> Stat | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ino]


# What the last `answer` in this process did (tests and benchmarks read these, never a
# build): "hits" and "misses" count answers, `last_miss` says why the last miss missed.
counters = {"hits": 0, "misses": 0}
last_miss: str | None = None


def path_of(build_root: Path, env: dict[str, object]) -> str:
    """The index file of this environment."""
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]
    return f"{build_root}/.edgebuild/index-{digest}.json"


def environment(cache_root: Path) -> dict[str, object]:
    """What every key also depends on, outside the manifests: edgebuild itself, the
    interpreter and its packages, the programs found on PATH, the cache location.
    Spellings of the same thing are one environment: `python` and `python3` of one
    virtual environment (the interpreter's real path and its prefix), `../cache` and
    the absolute path of the same directory."""
    return {"version": VERSION, "code": code_fingerprint(),
            "python": [os.path.realpath(sys.executable), sys.prefix],
            "sites": builder.site_fingerprint(), "cache": os.path.abspath(cache_root),
            "commands": {name: _command(name) for name in commands()}}


def _command(name: str) -> list[object] | None:
    found = shutil.which(name)
    return None if found is None else [found, stat(found)]


def answer(build_root: Path, cache_root: Path, files: list[Path], stages: list[str],
           options: Options) -> Records | None:
    """Every stage's record if the index vouches that all are up to date, else None."""
    global last_miss
    env = environment(cache_root)
    try:
        index = boundedjson.read(path_of(build_root, env))
        if index["environment"] != env:
            found, last_miss = None, "environment"
        else:
            found = _answer(index["manifests"], build_root, files, stages, options)
            last_miss = None if found is not None else "moved"
    except FileNotFoundError:
        found, last_miss = None, "no index for this environment"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        found, last_miss = None, f"unreadable: {type(exc).__name__}"
    counters["hits" if found is not None else "misses"] += 1
    return found


def _answer(manifests: dict[str, dict], build_root: Path, files: list[Path], stages: list[str],
            options: Options) -> Records | None:
    seen: dict[str, Stat | None] = {}  # inputs shared by several manifests: stat once
    found: Records = {}
    for path in files:
        entries = manifests.get(str(path))
        if not entries:
            return None
        for entry in entries:  # one per target of the file
            if stat(str(path)) != entry["manifest"]:
                return None
            for name, recorded in entry["inputs"].items():
                if name not in seen:
                    seen[name] = stat(name)
                if seen[name] != recorded:
                    return None
            records = _stages(entry, f"{build_root}/{entry['name']}", stages, options)
            if records is None:
                return None
            found[entry["name"]] = records
    return found


def _stages(entry: dict, build_dir: str, stages: list[str],
            options: Options) -> dict[str, StageRecord] | None:
    records: dict[str, StageRecord] = {}
    for stage in stages:
        if stage not in entry["applies"]:
            continue
        known = entry["stages"].get(stage)
        if known is None:  # never built: it must run
            return None
        if stat(f"{build_dir}/.state/{stage}.json") != known["state"] or any(
                stat(f"{build_dir}/{name}") != recorded for name, recorded in known["paths"]):
            return None
        key, digest = known["key"], known["digest"]
        if not uptodate.promised(key, digest, uptodate.locked(options, entry["name"], stage),
                                 options.strict):
            return None
        records[stage] = {"status": "uptodate", "key": key, "digest": digest, "seconds": 0.0}
    return records


def update(project: Project, options: Options) -> None:
    """Record the project's manifests whose every stage passes the full check now (run
    after a successful build); entries of other manifests stay, they carry their stats."""
    env = environment(project.cache_root)
    target = path_of(project.build_root, env)
    try:
        old = boundedjson.read(target)
        manifests = old["manifests"] if old["environment"] == env else {}
    except (OSError, ValueError, KeyError, TypeError):
        manifests = {}
    targets: dict[str, list[dict | None]] = {}  # a file listing several targets: one each
    for resolved in project.manifests:
        targets.setdefault(resolved.path, []).append(_entry(project, resolved, options))
    for path, entries in targets.items():
        vouched = [entry for entry in entries if entry is not None]
        if len(vouched) == len(entries):
            manifests[path] = vouched
        else:  # one target not vouched for: the file takes the full path
            manifests.pop(path, None)
    try:
        write_atomic(Path(target), json.dumps({"environment": env, "manifests": manifests},
                                              separators=(",", ":")))
    except OSError:
        pass  # an optimization: the next build takes the full path
    _prune(project.build_root)


def _prune(build_root: Path) -> None:
    """Keep the newest MAX_ENVIRONMENTS index files (and drop version 2's `index.json`)."""
    folder = f"{build_root}/.edgebuild"
    try:
        found = [(entry.stat().st_mtime_ns, entry.path) for entry in os.scandir(folder)
                 if entry.name.startswith("index-") and entry.name.endswith(".json")]
        for _, path in sorted(found, reverse=True)[MAX_ENVIRONMENTS:]:
            os.unlink(path)
        os.unlink(f"{folder}/index.json")
    except OSError:
        pass  # gone already, or another build pruned it


def _entry(project: Project, resolved: Resolved, options: Options) -> dict | None:
    """Stats first, then the full check that vouches for them (see the module doc)."""
    build_dir = project.build_dir(resolved.name)
    inputs = {name: stat(name) for names in resolved.files.values() for name in names}
    entry: dict = {"name": resolved.name, "manifest": stat(resolved.path), "inputs": inputs,
                   "applies": list(resolved.configs), "stages": {}}
    for stage in [name for name in STAGES if name in resolved.configs]:  # pipeline order
        # only the stages built so far: a build may have stopped --until
        state_stat = stat(f"{build_dir}/.state/{stage}.json")
        state = outputs.read_state(build_dir, stage)
        if state is not None:
            entry["stages"][stage] = {"state": state_stat, "key": state.key,
                                      "digest": state.digest,
                                      "paths": _tree(str(build_dir), stage, state)}
    checked = uptodate.noop(_only(project, resolved), list(entry["stages"]), options)
    if checked is None or _mismatch(entry, checked[resolved.name]) or \
            None in inputs.values() or entry["manifest"] is None:
        return None
    return entry


def _only(project: Project, resolved: Resolved) -> Project:
    from dataclasses import replace

    return replace(project, manifests=(resolved,))


def _mismatch(entry: dict, records: dict[str, StageRecord]) -> bool:
    for stage, known in entry["stages"].items():
        record = records.get(stage)
        if record is None or (record["key"], record["digest"]) != (known["key"], known["digest"]):
            return True
        if known["state"] is None or any(s is None for _, s in known["paths"]):
            return True
    return False


def _tree(build_dir: str, stage: str, state: outputs.State) -> list[list[object]]:
    """`[relative path, stat]` of the stage's directory tree (each directory before its
    entries: adding or removing a file changes its directory's mtime) and its exports."""
    found: list[list[object]] = []
    pending = [stage]
    while pending:
        relative = pending.pop()
        found.append([relative, stat(f"{build_dir}/{relative}")])
        try:
            entries = sorted(os.scandir(f"{build_dir}/{relative}"), key=lambda e: e.name)
        except OSError:
            continue
        for item in entries:
            name = f"{relative}/{item.name}"
            if item.is_dir(follow_symlinks=False):
                pending.append(name)
            else:
                found.append([name, stat(item.path)])
    found += [[name, stat(f"{build_dir}/{name}")] for name in sorted(state.exports or {})]
    return found
