"""The contract between stages: every JSON file a stage declares in `Stage.artifacts` must
match its versioned JSON Schema, `schemas/artifacts/<artifact>.v<N>.schema.json`.

The records that write and read these files (their `to_json` / `from_json`) are the
contract in code; the schemas are the same contract for everything else (CI, other
tools, a later edgebuild). A format change adds a new version (`plan.v2`) next to the
old one instead of editing it.

Checked right after a stage's `run`, before its output is published to the cache: a
violation fails the stage, naming the file, the JSON path and the schema rule. A file a
stage declares but did not write is not checked (`placement.json` exists only for
accelerator targets). jsonschema and each schema are loaded lazily, once per process: a
no-op build runs no stage and imports neither.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core import boundedjson
from edgebuild.core.errors import StageFailed
from edgebuild.core.jsontypes import JSON
from edgebuild.core.resources import schemas_dir

if TYPE_CHECKING:  # jsonschema and referencing load on first use (not in a no-op build)
    from jsonschema.protocols import Validator
    from referencing import Registry, Resource

ARTIFACTS = "artifacts"


def schema_path(name: str) -> Path:
    """`plan.v1` -> schemas/artifacts/plan.v1.schema.json."""
    return schemas_dir() / ARTIFACTS / f"{name}.schema.json"


@functools.cache
def schema(name: str) -> dict:
    """One artifact schema, read once per process."""
    return json.loads(schema_path(name).read_text())


@functools.cache
def validator(name: str) -> Validator:
    """The jsonschema validator of one artifact schema, built once per process. A schema
    may refer to another's definitions by file name (`kat.v1.schema.json#/$defs/skipped`),
    resolved against its `$id`; those are read when first needed."""
    import jsonschema

    document = schema(name)
    cls = jsonschema.validators.validator_for(document)
    cls.check_schema(document)
    return cls(document, registry=_registry())


@functools.cache
def _registry() -> Registry[Any]:
    from referencing import Registry

    # referencing's Registry is an attrs class; its `retrieve` field is a documented
    # constructor argument that mypy's attrs support does not see through the generic.
    return Registry(retrieve=_retrieve)  # type: ignore[call-arg]


def _retrieve(uri: str) -> Resource[Any]:
    """`https://edgebuild.dev/schemas/artifacts/<name>.schema.json` -> that schema."""
    from referencing import Resource
    from referencing.exceptions import NoSuchResource

    base, _, file = uri.rpartition("/")
    if not base.endswith(f"/{ARTIFACTS}") or not file.endswith(".schema.json") or \
            not schema_path(file.removesuffix(".schema.json")).is_file():
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs field, as above
    return Resource.from_contents(schema(file.removesuffix(".schema.json")))


def violation(document: JSON, name: str) -> str | None:
    """What is wrong with `document` under schema `name` (the most relevant error), or None."""
    import jsonschema

    error = jsonschema.exceptions.best_match(validator(name).iter_errors(document))
    if error is None:
        return None
    rule = "/".join(str(part) for part in error.absolute_schema_path)
    return f"at {error.json_path}: {error.message} (schema rule {rule})"


def check(stage: str, artifacts: dict[str, str], out: Path) -> None:
    """Fail `stage` when a JSON file it declares in `out` does not match its schema."""
    for filename, name in sorted(artifacts.items()):
        path = out / filename
        if not path.is_file():
            continue
        if not schema_path(name).is_file():
            raise StageFailed(f"stage {stage}: {filename}: no schema {name} "
                              f"({schema_path(name)})")
        try:
            document = boundedjson.read(path)
        except ValueError as exc:
            raise StageFailed(f"stage {stage}: {filename} is not JSON ({exc})") from None
        problem = violation(document, name)
        if problem is not None:
            raise StageFailed(f"stage {stage}: {filename} does not match schema {name} "
                              f"({schema_path(name).name}) {problem}{stale(name)}")


def generated(name: str) -> str | None:
    """The text the code makes of an artifact schema generated from its records (model.v1:
    the layer records of every op), or None for one written by hand: the stage package
    knows which (build.registry.Provider.generated)."""
    from edgebuild.build import registry

    return registry.provider().generated(name)


def stale(name: str) -> str:
    """What to do when schema `name` is generated and its file is not what the code makes
    now (a record changed, an op was added, without regenerating); else ''."""
    text = generated(name)
    if text is None or schema_path(name).read_text() == text:
        return ""
    return (f"; {schema_path(name).name} is stale (the records it is generated from have "
            "changed): in edgebuild's repository, run `python scripts/regen.py schemas`")
