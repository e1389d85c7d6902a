"""`edgebuild import-onnx`: a float ONNX model becomes a manifest and the float weights
(`train.init`) the pipeline starts from, so it goes through QAT or post-training
quantization, planning and C generation like a model edgebuild trained.

The manifest takes the weights as they are (`train.epochs: 0`) and computes as the ONNX
model does (`train.clamp_activations: false`); the output layer, a convolution or linear
layer without activation, gets an int32 (`wide`) output, as class scores usually exceed
the int8 range. Every node that cannot be imported is reported at once (its name, type and
why), as a user error. Nothing is overwritten: a file that exists with other content stops
the import before anything is written.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.core.geometry import Shape
from edgebuild.interchange import limits, onnxfile
from edgebuild.interchange.nodes import TRANSLATORS
from edgebuild.interchange.translation import Rejected, Translation, computes, describe
from edgebuild.model.graph import INPUT

if TYPE_CHECKING:
    import onnx
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Translated:
    """The model in edgebuild's vocabulary: the layers (manifest dictionaries, in order),
    their float weights (`<layer>.<tensor>`), the ONNX nodes each comes from."""

    input_shape: Shape
    layers: tuple[dict[str, Any], ...]
    weights: dict[str, NDArray[Any]]
    notes: dict[str, str]
    warnings: tuple[str, ...]
    producer: str
    nodes: int


@dataclass(frozen=True)
class Imported:
    manifest: Path
    weights: Path
    warnings: tuple[str, ...]


def import_onnx(path: Path, manifest: Path, name: str, data: Path | None) -> Imported:
    """Read `path`, write the manifest at `manifest` and its weights beside it
    (`<stem>.float.npz`); `data`: an .npz dataset the manifest names (`format: npz`)."""
    from edgebuild.manifest import Manifest

    translated = translate(onnxfile.read(path))
    weights = manifest.with_name(f"{manifest.stem}.float.npz")
    text = manifest_text(path, name, translated, weights.name,
                         None if data is None else os.path.relpath(data, manifest.parent))
    import yaml

    Manifest.model_validate(yaml.safe_load(text))  # the importer's own output: a bug if not
    write_all({manifest: text.encode(), weights: npz(translated.weights)})
    return Imported(manifest, weights, translated.warnings)


def default_name(path: Path) -> str:
    """A manifest name from the file name: letters, digits and underscores, a letter first."""
    import re

    name = re.sub(r"[^A-Za-z0-9_]", "_", path.stem)[:40] or "model"
    return name if name[0].isalpha() else f"m_{name}"


def check_name(name: str) -> None:
    """`--name` must be a manifest name (core.fields.Identifier)."""
    import re

    from edgebuild.core.fields import C_KEYWORDS, IDENTIFIER_PATTERN

    if not re.match(IDENTIFIER_PATTERN, name) or name in C_KEYWORDS:
        raise UserError(f"--name {name!r}: a manifest name is a letter followed by up to 47 "
                        "letters, digits or underscores, and not a C keyword")


def translate(source: onnxfile.Source) -> Translated:
    """Every node onto layers, or a user error listing every node that cannot be."""
    t = Translation(source)
    problems = [f"node {describe(node)!r}: operator {_kind(node)} is not supported "
                f"(edgebuild imports {', '.join(sorted(TRANSLATORS))})"
                for node in source.nodes if _kind(node) not in TRANSLATORS]
    for node in source.nodes:
        if _kind(node) not in TRANSLATORS or any(
                name not in t.tensors and name not in source.constants
                for name in node.input if name):
            continue  # listed above, or reads what a rejected node left undefined
        problem = _translate(t, node)
        if problem is not None:
            problems.append(f"node {describe(node)!r}: {problem}")
    problems += [] if problems else _output_problems(t)
    if problems:
        raise UserError([Diagnostic(str(source.path), message)
                         for message in _at_most(problems, SHOWN_PROBLEMS)])
    layers = _finish(t)
    names = {layer["name"] for layer in layers}
    return Translated(source.input_shape, layers,
                      {k: v for k, v in t.weights.items() if k.split(".")[0] in names},
                      {layer["name"]: ", ".join(t.notes[layer["name"]]) for layer in layers},
                      tuple(t.warnings), source.producer, len(source.nodes))


# Problems listed at most (the nodes of a model edgebuild cannot import at all could fill
# thousands of lines); the last line counts the rest.
SHOWN_PROBLEMS = 50


def _at_most(problems: list[str], most: int) -> list[str]:
    if len(problems) <= most:
        return problems
    return [*problems[:most], f"... and {len(problems) - most:,} more nodes edgebuild "
                              "cannot import"]


def _translate(t: Translation, node: onnx.NodeProto) -> str | None:
    """Translate one node: None, or why it cannot be. A node whose attributes or inputs
    are not of the kinds its operator takes (a file written by hand, or to break the
    importer) makes a translator fail on them: that is this node's problem too."""
    try:
        TRANSLATORS[node.op_type](t, node)
    except Rejected as exc:
        return str(exc)
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, ArithmeticError) as exc:
        reason = limits.printable(f"{type(exc).__name__}: {exc}", 200)
        return f"its attributes or inputs are not what {node.op_type} takes ({reason})"
    return None


def _kind(node: onnx.NodeProto) -> str:
    kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
    return limits.printable(kind)


def _output_problems(t: Translation) -> list[str]:
    layer = t.tensors.get(t.source.output)
    if layer is None or layer == INPUT:
        return [f"the output {limits.printable(t.source.output)!r} is not computed by any "
                "layer edgebuild imports"]
    return []


def _finish(t: Translation) -> tuple[dict[str, Any], ...]:
    """The layers the output needs, in order, each naming its inputs only when they are
    not the layer before it; the output layer `wide` when it computes without activation;
    every layer validated as its op's record."""
    from pydantic import ValidationError

    from edgebuild.ops import OPS

    needed = _needed(t.layers, t.tensors[t.source.output])
    most = _most_layers()
    if len(needed) > most:
        raise UserError(Diagnostic(str(t.source.path), (
            f"the model has {len(needed):,} layers; a manifest holds at most {most} (a model "
            "a microcontroller runs has tens)")))
    if len(needed) < len(t.layers):
        t.warnings.append(f"{len(t.layers) - len(needed)} layer(s) not reaching the output "
                          "were left out")
    previous, layers = INPUT, []
    for layer in needed:
        layers.append(_concise(layer, previous))
        previous = layer["name"]
    last = layers[-1]
    if computes(last) and last.get("act", "none") == "none":
        last["wide"] = True
    problems = []
    for layer in layers:
        try:
            OPS[layer["op"]].params.model_validate(layer)
        except ValidationError as exc:
            problems += [f"layer {layer['name']} ({t.notes[layer['name']][0]}): "
                         f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    if problems:
        raise UserError([Diagnostic(str(t.source.path), message) for message in problems])
    return tuple(layers)


def _most_layers() -> int:
    """How many layers a manifest holds (manifest.Model.layers' maximum length)."""
    from annotated_types import MaxLen

    from edgebuild.manifest import Model

    return next(rule.max_length for rule in Model.model_fields["layers"].metadata
                if isinstance(rule, MaxLen))


def _concise(layer: dict[str, Any], previous: str) -> dict[str, Any]:
    """The layer as a person writes it: `inputs` only when not the layer before, fields at
    their defaults left out (a convolution's kernel kept)."""
    from edgebuild.ops import OPS

    fields = OPS[layer["op"]].params.model_fields
    return {key: value for key, value in layer.items()
            if key in ("name", "op", "kernel") or (key == "inputs" and value != [previous])
            or (key not in ("inputs",) and key in fields and fields[key].default != value)}


def _needed(layers: list[dict[str, Any]], output: str) -> list[dict[str, Any]]:
    """The layers the output layer reads, directly or not, and itself, in order."""
    by_name = {layer["name"]: layer for layer in layers}
    needed, todo = set(), [output]
    while todo:
        name = todo.pop()
        if name in needed or name == INPUT:
            continue
        needed.add(name)
        todo += by_name[name]["inputs"]
    return [layer for layer in layers if layer["name"] in needed]


def _flow(value: Any) -> str:
    """One-line YAML (a layer, a list)."""
    import yaml

    return str(yaml.safe_dump(value, default_flow_style=True, sort_keys=False,
                              width=1 << 20)).strip().removesuffix("...").strip()


# An imported network computes on the inputs it was trained with: the data is taken as
# it is (method none: q = round(128 x), saturated to [-1, 127/128]), never re-mapped by the
# default minmax, which showed a model trained on [0, 1] its inputs as 2x-1 (10.6 % where
# PyTorch had 67.6 %). The ONNX file does not say what range that was: the note says how
# to state it, and the train stage warns when the float model scores near chance.
NORMALIZE = {"method": "none"}
NORMALIZE_NOTE = [
    "# Inputs: the network sees the dataset's values as they are (normalize: method none),",
    "# as the values it was trained on. If it was trained on values scaled otherwise, say",
    "# how: normalize: {method: scale, scale: S, offset: O} gives it (x - O) / S. The int8",
    "# input range is [-1, 127/128]: values outside it saturate (the data stage warns)."]


def manifest_text(path: Path, name: str, model: Translated, weights: str,
                  data: str | None) -> str:
    """The manifest, commented: where it came from, what each layer was in the file."""
    lines = [f"# Imported from {limits.printable(path.name)} ({model.producer}) by "
             "`edgebuild import-onnx`: "
             f"{model.nodes} nodes, {len(model.layers)} layers.",
             f"# The float weights are {weights} (train.init), taken as they are (epochs: 0);",
             "# quantization and the C project follow as for a model edgebuild trained.",
             f"name: {name}"]
    lines += NORMALIZE_NOTE
    if data is None:
        lines += ["# dataset: the data to quantize and evaluate with, e.g.",
                  "#   {format: npz, path: data.npz, normalize: {method: none}}",
                  "#   (keys: x and y, or x_train/y_train/x_test/y_test; classes: names)"]
    else:
        lines.append(f"dataset: {_flow({'format': 'npz', 'path': data, 'normalize': NORMALIZE})}")
    lines += ["model:", f"  input: {_flow(list(model.input_shape))}", "  layers:"]
    lines += [f"    - {_flow(layer)}  # {model.notes[layer['name']]}" for layer in model.layers]
    lines += ["train:",
              f"  init: {weights}",
              "  epochs: 0  # the imported weights as they are; more epochs fine-tune them",
              "  clamp_activations: false  # as the ONNX model computes (true: train for the "
              "int8 range)",
              "qat: {enabled: true}  # false: post-training quantization of the weights as "
              "they are", ""]
    return "\n".join(lines)


def npz(weights: dict[str, NDArray[Any]]) -> bytes:
    """The deterministic .npz of core.arrays.save."""
    from edgebuild.core import arrays

    buffer = io.BytesIO()
    arrays.save(buffer, **weights)  # type: ignore[arg-type]  # zipfile writes any binary file
    return buffer.getvalue()


def write_all(outputs: dict[Path, bytes]) -> None:
    """Every file, or none: an existing file with other content is never overwritten."""
    clashes = [path for path, data in outputs.items()
               if path.exists() and (not path.is_file() or path.read_bytes() != data)]
    if clashes:
        raise UserError([Diagnostic(str(path), "exists with other content; not overwritten "
                                               "(delete it, or choose another -o)")
                         for path in clashes])
    for path, data in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_bytes(data)
        temp.replace(path)
