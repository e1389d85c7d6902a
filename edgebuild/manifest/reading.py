"""Reading a manifest's data into its records: every schema problem, in edgebuild's voice.

pydantic reports where a value broke a rule as a path through its own types (union tags
included) and in its own words; a manifest's author needs the YAML line, the field as
written, what was given and what is allowed (manifest.wording), a "did you mean" for a
typo and the section a misplaced key belongs in.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.manifest import Manifest, wording


@dataclass(frozen=True)
class Reading:
    """A document read against the schema. When some top-level sections break it,
    `manifest` is read without them (their defaults), so that the checks that read only
    sound sections still run in the same round; None when nothing sound is left."""

    manifest: Manifest | None
    problems: list[Diagnostic]
    broken: frozenset[str]  # top-level keys with schema problems


def parse(document: yamlsource.Document) -> Manifest:
    """The manifest, or every schema problem (a UserError)."""
    reading = read(document)
    if reading.problems:
        raise UserError(reading.problems)
    assert reading.manifest is not None  # read gives a manifest whenever nothing is wrong
    return reading.manifest


def read(document: yamlsource.Document) -> Reading:
    if not isinstance(document.data, dict):
        raise UserError(document.diagnostic((), "a manifest is a mapping of sections "
                                                "(name, dataset, model, ...)"))
    try:
        return Reading(Manifest.model_validate(document.data), [], frozenset())
    except ValidationError as exc:
        locs = [_data_loc(document.data, error["loc"]) for error in exc.errors()]
        broken = frozenset(str(loc[0]) if loc else "" for loc in locs)
        return Reading(_without(document.data, broken), _schema_diagnostics(document, exc),
                       broken)


def _without(data: dict[str, Any], broken: frozenset[str]) -> Manifest | None:
    """The manifest read with its broken sections left at their defaults."""
    if "" in broken or "model" in broken:
        return None
    kept = {key: value for key, value in data.items() if key not in broken}
    if "name" in broken:
        kept["name"] = "manifest"  # a placeholder: no check reads the name
    try:
        return Manifest.model_validate(kept)
    except ValidationError:
        return None


def _schema_diagnostics(document: yamlsource.Document, exc: ValidationError) -> list[Diagnostic]:
    grouped: dict[yamlsource.Loc, list[str]] = {}
    errors = exc.errors()
    for error in errors:
        if _echo(error, errors):
            continue
        loc = _data_loc(document.data, error["loc"])
        grouped.setdefault(loc, [])
        message = _message(error)
        if message not in grouped[loc]:
            grouped[loc].append(message)
    return [document.diagnostic(loc, " or ".join(messages))
            for loc, messages in sorted(grouped.items(), key=lambda kv: document.locate(kv[0]))]


def _echo(error: ErrorDetails, errors: list[ErrorDetails]) -> bool:
    """A list's "too short after validation" only repeats that some item was invalid:
    the item's own error says which and why."""
    loc = error["loc"]
    return "after validation" in error["msg"] and any(
        other["loc"][:len(loc)] == loc and len(other["loc"]) > len(loc) for other in errors)


def _data_loc(data: Any, loc: tuple[int | str, ...]) -> yamlsource.Loc:
    """Drop the union-member tags pydantic inserts (`conv2d`, `int`, ...) to get a data path."""
    out: list[int | str] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and part in node:  # noqa: SIM114 - mypy narrows part per branch
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif isinstance(node, dict) and loc[-1] == part:
            pass  # a missing or extra key: keep it in the path
        else:
            continue
        out.append(part)
    return tuple(out)


def _message(error: ErrorDetails) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "extra_forbidden":
        return _unknown_key(loc)
    if kind == "missing":
        return "required field is missing"
    text = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind == "union_tag_invalid":
        ctx = error.get("ctx", {})
        return f"unknown {ctx.get('discriminator', 'tag')} {ctx.get('tag')!r}; allowed: " \
               f"{ctx.get('expected_tags')}"
    return wording.phrase(kind, text, error.get("ctx"), error.get("input"))


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    key = str(loc[-1])
    allowed = _allowed_keys(loc[:-1])
    hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    text = f"unknown key {key!r}" if len(key) <= 40 else f"unknown key {key[:37]!r}..."
    homes = [] if hint else _homes(key, loc[:-1])
    if hint:
        text += f"; did you mean {hint[0]!r}?"
    elif homes:
        text += f" here; it belongs in {' or '.join(homes)}"
    return text + (f" (allowed: {', '.join(allowed)})" if allowed else "")


def _homes(key: str, here: tuple[int | str, ...]) -> list[str]:
    """The sections that do have `key`, for a key at the top or in a section (a
    misplaced `train.weight_bits` -> `qat.weight_bits`)."""
    if len(here) > 1:
        return []
    homes = []
    for section, field in Manifest.model_fields.items():
        model = _as_model(field.annotation)
        if model is not None and key in model.model_fields and (section,) != tuple(here):
            homes.append(f"{field.alias or section}.{key}")
    return homes


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    annotation: Any = Manifest
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    model = _as_model(annotation)
    if model is None:
        return []
    return [field.alias or name for name, field in model.model_fields.items()]


def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> tuple[Any, ...]:
    annotation = _strip(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(_strip(a) for a in typing.get_args(annotation))
    return (annotation,)


def _as_model(annotation: Any) -> type[BaseModel] | None:
    models = [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
    return models[0] if len(models) == 1 else None


def _step(annotation: Any, part: Any) -> Any:
    """The annotation one loc element further down (union tags select a member)."""
    members = _members(annotation)
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            if member.__name__ == part or _tag(member) == part:
                return member
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel) and part in member.model_fields:
            return member.model_fields[part].annotation
        origin = typing.get_origin(member)
        if origin in (list, tuple) and isinstance(part, int):
            return typing.get_args(member)[0]
        if origin is dict:
            return typing.get_args(member)[1]
    return None


def _tag(model: type[BaseModel]) -> Any:
    for name in ("op", "format", "type"):
        field = model.model_fields.get(name)
        if field is not None and typing.get_origin(field.annotation) is typing.Literal:
            return typing.get_args(field.annotation)[0]
    return None
