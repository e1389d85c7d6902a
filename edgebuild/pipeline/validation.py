"""From a manifest file to a checked, typed manifest — or every problem at once.

Three passes, each reporting `FILE:LINE:COL: field.path: message`: the YAML itself
(syntax, duplicate keys, alias bombs), the schema (pydantic: unknown keys with a
"did you mean", types, ranges), then cross-field rules: layer wiring and shapes first (the
rest needs them), then all at once the QAT overrides, the dataset's sample shape and class
count against the model, imported weights (integer `model.weights`, float `train.init`),
the known answer, the device's rules, on-device
training and the memory budgets (every `target.memory` size the plan stage will need,
known from the architecture before any training: memory.budget).
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.data import FORMATS
from edgebuild.data.dataset import DataFileError, Probe, framed_shape
from edgebuild.manifest import Manifest, wording
from edgebuild.model import graph as graphs
from edgebuild.ops.operator import LayerBase


@dataclass(frozen=True)
class Checked:
    """A manifest that passed every check, with what the checks computed."""

    path: Path
    document: yamlsource.Document
    manifest: Manifest
    graph: graphs.Graph
    probe: Probe | None  # None: no dataset (an imported model checked by its known answer)

    @property
    def base(self) -> Path:
        return self.path.parent


def load(path: Path, display: str | None = None) -> Checked:
    document = yamlsource.load(path, display)
    manifest = parse(document)
    graph = _graph(document, manifest)
    base = Path(path).parent
    problems = _overrides(document, manifest)
    probe = None
    if manifest.dataset is not None:
        probe, found = _dataset(document, manifest, base, graph)
        problems += found
    problems += _sources(document, manifest, base, graph)
    if problems:
        raise UserError(problems)
    return Checked(Path(path), document, manifest, graph, probe)


def _sources(document: yamlsource.Document, manifest: Manifest, base: Path,
             graph: graphs.Graph) -> list[Diagnostic]:
    """Imported weights, the known answer, the target device's rules, on-device training
    and the memory budgets."""
    from edgebuild.memory import budget
    from edgebuild.model import folding, imported, knownanswer, policy
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.targets import numbers
    from edgebuild.targets.max7800x import layout as accelerator

    problems = []
    if manifest.dataset is None and manifest.model.weights is None:
        problems.append(document.diagnostic(("dataset",), (
            "required field is missing (only a model with pre-quantized `model.weights` can "
            "do without a dataset)")))
    if manifest.dataset is None and manifest.model.weights is not None and manifest.kat is None:
        problems.append(document.diagnostic(("kat",), (
            "a model without a dataset needs a known answer to be checked against: "
            "kat: {input: sample.npy, expected: output.npy}")))
    problems += _init(document, manifest, base, graph)
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = None
    if manifest.model.weights is not None:
        folded_graph, _ = graphs.build(manifest.model.input, layers)
        bits, found = imported.check(base / manifest.model.weights, layers, folded_graph,
                                     numbers.device_numbers(manifest.target.device.value))
        problems += [document.diagnostic(("model", "weights", *suffix), message)
                     for suffix, message in found]
    if manifest.kat is not None:
        try:
            knownanswer.read(base, manifest.kat,
                             graphs.sample_shape(manifest.model.input, manifest.model.layers),
                             tuple(graph.output.out_shape))
        except knownanswer.KatFileError as exc:
            problems.append(document.diagnostic(("kat",), str(exc)))
    if bits is None:
        bits = {name: p.weight_bits for name, p in policy.resolve(manifest.qat, layers).items()}
    problems += [document.diagnostic(path, message)
                 for path, message in accelerator.problems(manifest, layers, bits)]
    problems += [document.diagnostic(path, message)
                 for path, message in ondevice.problems(manifest, layers)]
    if manifest.ondevice is not None and manifest.ondevice.weights is not None and not problems:
        problems += _wof(document, manifest, base, layers)
    return problems + [document.diagnostic(path, message)
                       for path, message in budget.problems(manifest, layers)]


def _init(document: yamlsource.Document, manifest: Manifest, base: Path,
          graph: graphs.Graph) -> list[Diagnostic]:
    """Float weights to start from (`train.init`): a readable file that fits the layers;
    `epochs: 0` needs them (nothing else makes a float model)."""
    from edgebuild.model import initial

    train = manifest.train
    if manifest.model.weights is not None:
        return [] if train.init is None else [document.diagnostic(("train", "init"), (
            "the model has pre-quantized `model.weights` and is not trained; remove one of "
            "the two"))]
    if train.init is not None:
        return [document.diagnostic(("train", "init"), message) for message in
                initial.check(base / train.init, manifest.model.layers, graph)]
    if train.epochs == 0:
        return [document.diagnostic(("train", "epochs"), (
            "0 epochs train nothing: give the float weights to take as they are in "
            "`train.init` (e.g. from `edgebuild import-onnx`), or train at least one epoch"))]
    return []


def _wof(document: yamlsource.Document, manifest: Manifest, base: Path,
         layers: tuple[LayerBase, ...]) -> list[Diagnostic]:
    """The starting weights file must match the trainable tensors (magic, version, layout)."""
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.ondevice import wof

    assert manifest.ondevice is not None and manifest.ondevice.weights is not None  # see caller
    resolved = ondevice.resolve(manifest.ondevice, layers, tuple(manifest.model.input),
                                manifest.target.memory.l1)
    try:
        wof.read(base / manifest.ondevice.weights, resolved.graph.parameters())
    except UserError as exc:
        return [document.diagnostic(("ondevice", "weights"), f"{manifest.ondevice.weights}: "
                                                              f"{d.message}")
                for d in exc.diagnostics]
    return []


def parse(document: yamlsource.Document) -> Manifest:
    if not isinstance(document.data, dict):
        raise UserError(document.diagnostic((), "a manifest is a mapping of sections "
                                                "(name, dataset, model, ...)"))
    try:
        return Manifest.model_validate(document.data)
    except ValidationError as exc:
        raise UserError(_schema_diagnostics(document, exc)) from None


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
    text = f"unknown key {key!r}"
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


def _graph(document: yamlsource.Document, manifest: Manifest) -> graphs.Graph:
    graph, problems = graphs.build(manifest.model.input, manifest.model.layers)
    if problems:
        raise UserError([document.diagnostic(
            ("model", "layers", p.index, *((p.field,) if p.field else ())), p.message)
            for p in problems])
    assert graph is not None  # graphs.build gives a graph whenever it finds no problem
    return graph


def _overrides(document: yamlsource.Document, manifest: Manifest) -> list[Diagnostic]:
    from edgebuild.ops import OPS

    ops = "/".join(op.name for op in OPS.values() if op.computes)
    compute = {layer.name for layer in manifest.model.layers if OPS[layer.op].computes}
    return [document.diagnostic(("qat", "overrides", name), (
        f"override names no {ops} layer; layers with weights: "
        f"{', '.join(sorted(compute))}")) for name in manifest.qat.overrides if name not in compute]


def _sample_mismatch(shape: tuple[int, ...], expected: tuple[int, ...], manifest: Manifest) -> str:
    """Why the dataset's samples do not fit the model, and what to set."""
    assert manifest.dataset is not None  # called for a manifest with a dataset only
    frames = graphs.frames(manifest.model.layers)
    have = f"the dataset's samples have shape {list(shape)}"
    if manifest.dataset.frames is not None and frames == 1:
        return (f"{have} (clips of dataset.frames={manifest.dataset.frames}) but the model has no "
                "buffer layer to read clips; remove dataset.frames or add a buffer")
    if frames == 1:
        return f"{have} but model.input is {list(manifest.model.input)}; set model.input: {list(shape)}"
    if len(shape) == len(expected) and shape[0] == frames:
        return (f"{have}: clips of {frames} frames of {list(shape[1:])}, but model.input is "
                f"{list(manifest.model.input)}; set model.input: {list(shape[1:])}")
    return (f"{have}, but the model's buffer needs clips of {frames} frames of "
            f"{list(manifest.model.input)}, i.e. {list(expected)}; set dataset.frames: {frames} to "
            "cut each sample's last axis into frames, or give clip-shaped samples")


def _dataset(document: yamlsource.Document, manifest: Manifest, base: Path,
             graph: graphs.Graph) -> tuple[Probe | None, list[Diagnostic]]:
    """(the dataset's probe, its problems: unreadable, or samples or classes that do not fit
    the model)."""
    spec = manifest.dataset
    assert spec is not None  # called for a manifest with a dataset only
    try:
        probe = FORMATS[spec.format].probe(spec, base)
    except DataFileError as exc:
        return None, [document.diagnostic(("dataset",), str(exc))]
    try:
        shape = framed_shape(probe.sample_shape, spec.frames)
    except DataFileError as exc:
        return None, [document.diagnostic(("dataset", "frames"), str(exc))]
    problems = []
    expected = graphs.sample_shape(manifest.model.input, manifest.model.layers)
    if shape != expected:
        problems.append(document.diagnostic(("model", "input"), _sample_mismatch(
            shape, expected, manifest)))
    outputs = math.prod(graph.output.out_shape)
    if outputs != probe.classes:
        problems.append(document.diagnostic(("model", "layers", len(graph.nodes) - 1), (
            f"the last layer has {outputs} outputs but the dataset has {probe.classes} classes")))
    return probe, problems
