"""The network description as a whole: its top-level keys, its layers in sequence order
(with data buffers), and what each layer reads (`in_sequences`, `next_sequence`).

Known datasets (`DATASETS`) give the input shape and the class count when nothing else does:

| dataset | sample shape | classes |
|---|---|---|
| MNIST, FashionMNIST | 1 x 28 x 28 | 10 |
| CIFAR10 | 3 x 32 x 32 | 10 |
| CIFAR100 | 3 x 32 x 32 | 100 |
| KWS_20 | 128 x 128 (1-D: 128 channels x 128 samples) | 21 |
| SpeechCom | 1 x 64 x 64 | - |
| FaceID | 3 x 160 x 120 | - |
| vggface2_faceid | 3 x 112 x 112 | - |
| CamVid_s352_c3_reduced | 48 x 88 x 88 (352 x 352 RGB folded 4 x 4) | - |
| SVHN_74 | 3 x 74 x 74 | - |

These are the shapes of the toolchain's own sample inputs (`tests/sample_<dataset>.npy`, what
ai8xize.py loads when no `--sample-input` is given): a description naming such a dataset
implies its input shape. Class counts only where the dataset fixes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import UserError
from edgebuild.targets.max7800x.network.buffers import buffer_layers, data_buffers
from edgebuild.targets.max7800x.network.layerkeys import parse_layer
from edgebuild.targets.max7800x.network.spec import DataBuffer, Reporter, Spec
from edgebuild.targets.max7800x.network.values import as_bool, is_int, parse_processor_map

DATASETS: dict[str, tuple[tuple[int, ...], int | None]] = {
    "mnist": ((1, 28, 28), 10),
    "fashionmnist": ((1, 28, 28), 10),
    "cifar10": ((3, 32, 32), 10),
    "cifar100": ((3, 32, 32), 100),
    "kws20": ((128, 128), 21),
    "speechcom": ((1, 64, 64), None),
    "faceid": ((3, 160, 120), None),
    "vggface2faceid": ((3, 112, 112), None),
    "camvids352c3reduced": ((48, 88, 88), None),
    "svhn74": ((3, 74, 74), None),
}


# The description's top-level keys: lower-case key -> (the key as written, its YAML value;
# `output_map` parsed). Open YAML data.
Top = dict[str, tuple[Any, Any]]

_GLOBAL_KEYS = ("arch", "dataset", "layers", "output_map", "bias", "weights", "data_buffer")
_GLOBAL_UNSUPPORTED = {
    "unload": "a custom `unload` (copying outputs in a chosen shape) has no edgebuild "
              "equivalent; edgebuild unloads the last layer",
    "snoop": "snoop registers have no edgebuild equivalent",
}


def dataset_key(name: Any) -> str:
    """`CIFAR-10`, `cifar10` and `Cifar_10` name one dataset."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower()) if name is not None else ""


def parse(path: Path) -> tuple[yamlsource.Document, Reporter, Top, list[Spec]]:
    """(document, reporter, top-level keys as `{key: (key as written, value)}`, layers in
    the order they run). Problems are collected in the reporter; only a document that has
    no layers to read raises at once."""
    document = yamlsource.load(path)
    report = Reporter(document)
    data = document.data
    if not isinstance(data, dict):
        raise UserError(document.diagnostic((), "a network description is a mapping with "
                                                "`arch`, `dataset` and `layers`"))
    top, buffers = _top_level(report, data)
    layers = top.get("layers", (None, None))[1]
    if not isinstance(layers, list) or not layers:
        report.error(((top["layers"][0],) if "layers" in top else ()),
                     "`layers` must be a non-empty list of layer descriptions")
        report.raise_errors()
    specs = [s for i, raw in enumerate(layers) if (s := parse_layer(report, i, raw))]
    if "output_map" in top:
        value = parse_processor_map(top["output_map"][1])
        if value is None:
            report.error((top["output_map"][0],), f"`output_map` {top['output_map'][1]!r} is "
                         "not a processor map such as 0x0000000000000ff0")
        top["output_map"] = (top["output_map"][0], value)
    _order(report, specs, buffers)
    _check_output_flags(report, specs)
    return document, report, top, specs


def _top_level(report: Reporter, data: dict[Any, Any]) -> tuple[Top, dict[str, DataBuffer]]:
    """The known top-level keys (lower case) and the data buffers; unknown and unsupported
    keys are errors, the toolchain's test data (`bias`, `weights`) is ignored."""
    top: Top = {}
    buffers: dict[str, DataBuffer] = {}
    for written, value in data.items():
        key = str(written).lower()
        if key == "data_buffer":
            buffers = data_buffers(report, written, value)
        if key in _GLOBAL_UNSUPPORTED:
            report.error((written,), f"`{written}`: {_GLOBAL_UNSUPPORTED[key]}")
        elif key in ("bias", "weights"):
            report.warn((written,), f"`{written}` ignored (test data only in the toolchain; "
                        "weights come from the checkpoint)")
        elif key not in _GLOBAL_KEYS:
            report.error((written,), f"unknown key {yamlsource.shown(str(written))} (allowed: "
                         f"{', '.join(k for k in _GLOBAL_KEYS)})")
        else:
            top[key] = (written, value)
    return top, buffers


def _order(report: Reporter, specs: list[Spec], buffers: dict[str, DataBuffer]) -> None:
    """Sequence numbers (default: previous + 1), then data buffers, then `in_sequences` and
    `next_sequence`: `specs` is sorted in place and each one's `inputs` set."""
    by_seq = _sequences(report, specs)
    if [s.seq for s in specs] != sorted(s.seq for s in specs):
        specs.sort(key=lambda s: s.seq)
    if buffers or any(s.buffer_shift or s.buffer_insert for s in specs):
        specs[:] = buffer_layers(report, specs, buffers)
        kept = {id(s) for s in specs}
        by_seq = {seq: s for seq, s in by_seq.items() if id(s) in kept}
    names = _names(report, specs)
    position = {id(s): p for p, s in enumerate(specs)}
    for p, spec in enumerate(specs):
        if spec.refs is None:
            spec.inputs = [p - 1]
        else:
            spec.inputs = _inputs(report, spec, p, _Lookup(by_seq, names, position))
        if "next_sequence" in spec.raw:
            following = specs[p + 1] if p + 1 < len(specs) else None
            _check_next(report, spec, following, by_seq, names)


def _sequences(report: Reporter, specs: list[Spec]) -> dict[int, Spec]:
    """Each layer's sequence number (`sequence`, default: the previous one + 1), by number;
    a number used twice is an error (the first layer keeps it)."""
    seq = 0
    by_seq: dict[int, Spec] = {}
    for spec in specs:
        if "sequence" in spec.raw:
            if is_int(spec.raw["sequence"]) and spec.raw["sequence"] >= 0:
                seq = spec.raw["sequence"]
            else:
                report.layer_error(spec, "sequence", "`sequence` must be a non-negative integer")
        if seq in by_seq:
            report.layer_error(spec, "sequence", f"sequence {seq} is already used by layer "
                               f"{by_seq[seq].index}")
        spec.seq = seq
        by_seq.setdefault(seq, spec)
        seq += 1
    return by_seq


def _names(report: Reporter, specs: list[Spec]) -> dict[str, Spec]:
    """The layers by `name` (a name used twice is an error; the first layer keeps it)."""
    names: dict[str, Spec] = {}
    for spec in specs:
        if spec.yaml_name is not None:
            if spec.yaml_name in names:
                report.layer_error(spec, "name", f"name {spec.yaml_name!r} is already used by "
                                   f"layer {names[spec.yaml_name].index}")
            names.setdefault(spec.yaml_name, spec)
    return names


@dataclass(frozen=True)
class _Lookup:
    """What an `in_sequences` entry may name: a sequence number or a name, and where that
    layer runs."""

    by_seq: dict[int, Spec]
    names: dict[str, Spec]
    position: dict[int, int]  # id(spec) -> position in run order


def _inputs(report: Reporter, spec: Spec, p: int, lookup: _Lookup) -> list[int]:
    """The positions `in_sequences` names (-1: the model input); each must run earlier,
    since edgebuild runs layers in order."""
    assert spec.refs is not None  # _order resolves the `in_sequences` a layer has
    inputs = []
    for ref in spec.refs:
        target = _resolve(ref, lookup.by_seq, lookup.names)
        if target is None:
            report.layer_error(spec, "in_sequences", f"in_sequences entry {ref!r} names "
                               "no layer (use a layer number, a layer name, -1 or input)")
        elif target != -1 and lookup.position[id(target)] >= p:
            report.layer_error(spec, "in_sequences", f"in_sequences entry {ref!r} is not "
                               "an earlier layer; edgebuild runs layers in order")
        else:
            inputs.append(-1 if target == -1 else lookup.position[id(target)])
    return inputs


def _check_next(report: Reporter, spec: Spec, following: Spec | None,
                by_seq: dict[int, Spec], names: dict[str, Spec]) -> None:
    """`next_sequence` may only say what the sequence order says already (the layer after,
    or `stop` on the last one): edgebuild runs layers in sequence order."""
    ref = spec.raw["next_sequence"]
    stop = isinstance(ref, str) and ref.strip().lower() == "stop"
    target = None if stop else _resolve(ref, by_seq, names)
    if not (stop and following is None or target is not None and target is following):
        report.layer_error(spec, "next_sequence", f"next_sequence {ref!r} changes the "
                           "order in which layers run; edgebuild runs them in sequence "
                           "order (remove the key)")


def _resolve(ref: Any, by_seq: dict[int, Spec], names: dict[str, Spec]) -> Spec | int | None:
    """The layer a reference names (a sequence number, a name, or -1 / `input`: -1)."""
    if is_int(ref):
        return -1 if ref == -1 else by_seq.get(ref)
    if isinstance(ref, str):
        text = ref.strip()
        if text.lower() == "input":
            return -1
        if text in names:
            return names[text]
        if re.fullmatch(r"-?\d+", text):
            return _resolve(int(text), by_seq, names)
    return None


def _check_output_flags(report: Reporter, specs: list[Spec]) -> None:
    """`output: true` only on the last layer: an edgebuild model has one output."""
    for spec in specs[:-1]:
        if as_bool(spec.raw.get("output")):
            report.layer_error(spec, "output", "`output: true` on a layer other than the last: "
                               "edgebuild models have one output, the last layer")
