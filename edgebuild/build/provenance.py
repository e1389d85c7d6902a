"""What each locked key was made of, so `build --locked` can say *what* moved.

A cache key is a hash: when it differs from edgebuild.lock, the hash alone cannot say
whether a manifest field, a data file, a package or edgebuild's own code changed. The lock
therefore also records a digest of every leaf of the manifests' resolved settings, every
data file, every stage's code and every tool version (`summarize`); `explain` compares a
stage's key material with that record and names what differs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TypedDict, cast

from edgebuild.build.cache import KeyMaterial, canonical
from edgebuild.build.outputs import read_state

SHORT = 16  # hex digits kept per digest: enough to tell values apart, short in diffs


class Inputs(TypedDict):
    """One manifest's inputs: setting leaf (`train.epochs`) -> digest, data file -> digest."""

    fields: dict[str, str]
    files: dict[str, str]


class Environment(TypedDict):
    """What the machine contributes: each stage's code digest, each tool's version."""

    code: dict[str, str]
    tools: dict[str, str]


class Provenance(TypedDict):
    inputs: dict[str, Inputs]  # manifest name -> its inputs
    environment: Environment


def empty() -> Provenance:
    return {"inputs": {}, "environment": {"code": {}, "tools": {}}}


def short(value: object) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()[:SHORT]


def leaves(config: object, prefix: str = "") -> dict[str, str]:
    """`{dotted path: digest}` of every setting; a list of plain values is one leaf."""
    if isinstance(config, dict):
        found: dict[str, str] = {}
        for name, value in config.items():
            found.update(leaves(value, f"{prefix}{name}."))
        return found
    if isinstance(config, list) and any(isinstance(v, dict | list) for v in config):
        found = {}
        for index, value in enumerate(config):  # layers by name: `model.layers.conv1.out`
            label = value.get("name") if isinstance(value, dict) else None
            found.update(leaves(value, f"{prefix}{label if isinstance(label, str) else index}."))
        return found
    return {prefix.rstrip("."): short(config)}


def file_names(paths: list[str], root: Path) -> list[str]:
    """Data files as the lock names them, the same on every machine: edgebuild's own
    files as `edgebuild:templates/...`, a package's as `package:sklearn/...`, the
    project's relative to it (clones differ in where they live), others absolute."""
    places = _places()
    names = []
    for path in paths:
        for prefix, place in places:
            relative = os.path.relpath(path, place)
            if not relative.startswith(".."):
                names.append(f"{prefix}{Path(relative).as_posix()}")
                break
        else:
            relative = os.path.relpath(path, root)
            names.append(path if relative.startswith("..") else Path(relative).as_posix())
    return names


def _places() -> list[tuple[str, str]]:
    import site

    from edgebuild.core.resources import templates_dir

    return [("edgebuild:templates/", str(templates_dir())),
            *(("package:", place) for place in site.getsitepackages())]


def of_material(material: KeyMaterial, files: list[str], root: Path) -> tuple[Inputs, Environment]:
    """One stage's share of the provenance record."""
    config = dict(material["config"])
    digests = config.pop("files", [])
    file_digests = {name: str(digest)[:SHORT] for name, digest in
                    zip(file_names(files, root), digests if isinstance(digests, list) else [],
                        strict=False)}
    return ({"fields": leaves(config), "files": file_digests},
            {"code": {material["stage"]: material["code"][:SHORT]}, "tools": dict(material["tools"])})


def summarize(build_dirs: dict[str, Path], files: dict[str, dict[str, list[str]]],
              root: Path, previous: Provenance) -> Provenance:
    """The record for the manifests just built (from their state records, which hold the
    key material), keeping `previous` for the others."""
    result: Provenance = {"inputs": dict(previous["inputs"]),
                          "environment": {"code": dict(previous["environment"]["code"]),
                                          "tools": dict(previous["environment"]["tools"])}}
    for name, build_dir in build_dirs.items():
        merged: Inputs = {"fields": {}, "files": {}}
        for stage, paths in files[name].items():
            state = read_state(build_dir, stage)
            if state is None:
                continue
            inputs, environment = of_material(state.material, paths, root)
            merged["fields"].update(inputs["fields"])
            merged["files"].update(inputs["files"])
            result["environment"]["code"].update(environment["code"])
            result["environment"]["tools"].update(environment["tools"])
        result["inputs"][name] = {"fields": dict(sorted(merged["fields"].items())),
                                  "files": dict(sorted(merged["files"].items()))}
    return result


def explain(material: KeyMaterial, files: list[str], root: Path, manifest: str,
            recorded: Provenance | None, locked_upstream: dict[str, str]) -> list[str]:
    """What in `material` differs from what edgebuild.lock recorded: one phrase each."""
    if recorded is None or manifest not in recorded["inputs"]:
        return ["edgebuild.lock records no inputs for this manifest (written by an older "
                "edgebuild); build once without --locked to record them"]
    inputs, environment = of_material(material, files, root)
    lock_inputs, lock_env = recorded["inputs"][manifest], recorded["environment"]
    found = [f"manifest setting {name}" + (" (new)" if name not in lock_inputs["fields"] else "")
             for name, digest in inputs["fields"].items()
             if lock_inputs["fields"].get(name) != digest]
    found += [f"data file {name}" for name, digest in inputs["files"].items()
              if lock_inputs["files"].get(name) != digest]
    found += [f"tool {tool} {version} (lock: {lock_env['tools'].get(tool, 'absent')})"
              for tool, version in environment["tools"].items()
              if lock_env["tools"].get(tool) != version]
    stage = material["stage"]
    if lock_env["code"].get(stage) != environment["code"][stage]:
        found.append(f"edgebuild's code for the {stage} stage (another edgebuild version, "
                     "or local edits)")
    found += [f"the output of upstream stage {up}" for up, digest in material["upstream"].items()
              if locked_upstream.get(up) not in (None, digest)]
    return found or ["something the lock's record does not show (was its key edited by "
                     "hand?)"]


def parse(raw: object) -> Provenance | None:
    """The lock file's record, or None if absent or of another shape (only the messages
    lose detail: keys and digests are checked regardless)."""
    if not isinstance(raw, dict):
        return None
    inputs, environment = raw.get("inputs"), raw.get("environment")
    if not (isinstance(inputs, dict) and isinstance(environment, dict)
            and _string_map(environment.get("code")) and _string_map(environment.get("tools"))):
        return None
    for record in inputs.values():
        if not (isinstance(record, dict) and _string_map(record.get("fields"))
                and _string_map(record.get("files"))):
            return None
    return cast(Provenance, {"inputs": inputs, "environment": environment})


def _string_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
