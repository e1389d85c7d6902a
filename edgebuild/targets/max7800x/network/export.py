"""`export_network`: a manifest and its resolved placement (one entry per hardware layer)
become a network description the toolchain reads; importing it gives the same layers and
placement back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import UserError
from edgebuild.model.graph import Node
from edgebuild.targets.max7800x import profile as devices
from edgebuild.targets.max7800x.hwlayer import inputs_of
from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.channels import map_channels
from edgebuild.targets.max7800x.network.layerrecord import Hw, Record, layer_record, map_value
from edgebuild.targets.max7800x.network.spec import Spec

if TYPE_CHECKING:
    from edgebuild.manifest import Layer, Manifest
    from edgebuild.targets.max7800x.records import Profile

# The opening words of every exported description: the importer knows an export by them (its
# arch is the manifest's name, which no vendor checkpoint need carry).
EXPORT_HEADER = "# Exported by edgebuild from manifest"

# quant.json, or a mapping of its rows by layer name (see export_network). Open JSON.
Quant = Mapping[str, Any]


def export_network(manifest: Manifest, placement: Mapping[str, Any],
                   quant: Quant | None = None) -> str:
    """The network description (toolchain YAML) of `manifest` placed as `placement`.

    `placement["layers"]` lists the hardware layers in order, each with name, members (the
    manifest layers it implements; empty for a synthetic copy layer), op, inputs (hardware
    layer names or "input"), processors and output_processors (ints or hex strings),
    in_offset, out_offset, data_format, write_gap, bias_group, streaming and
    overwrites_input (optional: the layer writes over input it has read). `quant` maps
    compute layer names to `{"bits": b, "scale_exp": s}` (or is a quant.json document);
    they become `quantization` and `output_shift`. Importing the result (with the same input
    shape) gives the same layers and placement back."""
    from edgebuild.model import folding
    from edgebuild.model import graph as graphs

    device = str(getattr(manifest.target.device, "value", manifest.target.device))
    if not device.startswith("max7800"):
        raise UserError(f"export: target.device is {device}; network descriptions are for "
                        "max78000/max78002")
    layers, alias = folding.fold_layers(manifest.model.layers)
    graph, problems = graphs.build(manifest.model.input, layers)
    if problems:
        raise UserError([f"export: {p.message}" for p in problems])
    assert graph is not None  # graphs.build gives a graph whenever it finds no problem
    nodes = {node.name: node for node in graph.nodes}
    hw_layers: list[Hw] = list(placement.get("layers") or [])
    if not hw_layers:
        raise UserError("export: the placement has no layers")
    owner = _owners(hw_layers, layers, alias)
    producers = _buffer_producers(hw_layers, nodes, owner)
    hw_layers = _shifts_first(hw_layers, producers)
    hw_layers = [_given_bias_group(hw, manifest) for hw in hw_layers]
    records = _records(hw_layers, _Model(layers, alias, nodes, owner), producers,
                       _quant_rows(quant), devices.profile(device))
    return _text(manifest, device, hw_layers, records, producers, nodes)


def _given_bias_group(hw: Hw, manifest: Manifest) -> Hw:
    """The layer with `bias_group` only where the manifest's placement gives it (as given:
    a quadrant or a list to choose from). A quadrant edgebuild chose is left out, so the
    toolchain chooses it by its own rule, which edgebuild's placement follows (first-fit
    decreasing): pinning our choice would only hide a disagreement. A placement document
    without `origin` (written by hand) keeps every key it has."""
    if "origin" not in hw:
        return hw
    entry = manifest.placement.get(hw["name"])
    given = None if entry is None else entry.bias_group
    rest = {key: value for key, value in hw.items() if key != "bias_group"}
    return rest if given is None else rest | {"bias_group": given}


@dataclass(frozen=True)
class _Model:
    """The folded manifest model: its layers, the folded-away names (-> what they read
    instead), the graph's nodes by name, and the hardware layer holding each layer."""

    layers: tuple[Layer, ...]
    alias: dict[str, str]
    nodes: dict[str, Node]
    owner: dict[str, str]


def _owners(hw_layers: list[Hw], layers: tuple[Layer, ...], alias: dict[str, str]
            ) -> dict[str, str]:
    """Each manifest layer (and "input") -> the hardware layer that holds its output."""
    owner: dict[str, str] = {"input": "input"}
    for hw in hw_layers:
        for member in hw.get("members") or ():
            owner[member] = hw["name"]
            owner[alias.get(member, member)] = hw["name"]
    for name, target in alias.items():  # a folded-away layer's readers read its source
        owner.setdefault(name, owner.get(target, target))
    for layer in layers:  # a reshape the device reads through (mapping): its source's owner
        if layer.op == "reshape" and layer.name not in owner:
            owner[layer.name] = owner.get(inputs_of(layer)[0], inputs_of(layer)[0])
    return owner


def _records(hw_layers: list[Hw], model: _Model, producers: dict[str, str],
             rows: dict[str, Mapping[str, Any]], profile: Profile) -> list[Record]:
    """One record per hardware layer, in order, with `out_channels` where needed."""
    by_name = {layer.name: layer for layer in model.layers}
    taken = {hw["name"] for hw in hw_layers}
    records: list[Record] = []
    outputs: list[str | None] = []
    previous = "input"
    for position, hw in enumerate(hw_layers):
        members = [by_name[model.alias.get(m, m)] for m in hw.get("members") or ()
                   if model.alias.get(m, m) in by_name]
        members = list({m.name: m for m in members}.values())
        record, output = layer_record(hw, members, model.nodes, model.owner, previous,
                                      position, rows)
        _in_dim(record, members, by_name, model.nodes)
        _buffer_keys(record, hw, members, producers, taken, model.nodes)
        records.append(record)
        outputs.append(output)
        previous = record["name"]
    _out_channels(records, model.nodes, outputs, profile)
    return records


def _text(manifest: Manifest, device: str, hw_layers: list[Hw], records: list[Record],
          producers: dict[str, str], nodes: dict[str, Node]) -> str:
    """The description's text: a header saying how to import it back, the data buffers,
    one commented record per layer."""
    dataset = manifest.dataset.format if manifest.dataset is not None else "none"
    overwriting = [hw["name"] for hw in hw_layers if hw.get("overwrites_input")]
    lines = [
        "---",
        f"{EXPORT_HEADER} {manifest.name!r} for {device}.",
        f"# Input shape: {list(manifest.model.input)} (channels first); import with "
        f"`edgebuild import-ai8x --input {','.join(map(str, manifest.model.input))} "
        f"--device {device}`.",
        f"# With the checkpoint beside it (edgebuild build writes both): `ai8xize.py "
        f"--config-file network.yaml --checkpoint-file checkpoint-q.pth.tar "
        f"--device {device.upper()} ...`.",
        *([f"# {', '.join(overwriting)} write over input they have read (checked by "
           "edgebuild): run ai8xize.py with --overlap-data."] if overwriting else []),
        "",
        f"arch: {manifest.name}",
        f"dataset: {getattr(dataset, 'value', dataset)}",
        "",
        *_data_buffer_lines(hw_layers, producers, nodes),
        "layers:",
    ]
    for position, (record, hw) in enumerate(zip(records, hw_layers, strict=True)):
        members = ", ".join(hw.get("members") or ()) or "synthetic copy"
        lines.append(f"  # Layer {position}: {members}")
        for i, (key, value) in enumerate(record.items()):
            lines.append(("  - " if i == 0 else "    ") + f"{key}: {_value_text(key, value)}")
    return "\n".join(lines) + "\n"


def _quant_rows(quant: Quant | None) -> dict[str, Mapping[str, Any]]:
    """`{name: {"bits", "scale_exp"}}` from either that mapping or a quant.json document
    (`{"layers": [{"name", "bits", "scale_exp", ...}]}`)."""
    if not quant:
        return {}
    if isinstance(quant.get("layers"), list):
        return {row["name"]: row for row in quant["layers"] if isinstance(row, dict)}
    return {name: row for name, row in quant.items() if isinstance(row, dict)}


def _buffer_producers(hw_layers: list[Hw], nodes: dict[str, Node], owner: dict[str, str]
                      ) -> dict[str, str]:
    """Each buffer's hardware layer -> the hardware layer that inserts its newest frame."""
    found = {}
    for hw in hw_layers:
        if hw.get("op") == "buffer":
            source = nodes[hw["name"]].inputs[0]
            found[hw["name"]] = owner.get(source, source)
    return found


def _shifts_first(hw_layers: list[Hw], producers: dict[str, str]) -> list[Hw]:
    """The hardware order: a buffer's shift runs right before the layer that inserts the
    newest frame (its input), which would otherwise be shifted out at once."""
    shift_of = {producer: buffer for buffer, producer in producers.items()}
    by_name = {hw["name"]: hw for hw in hw_layers}
    ordered = []
    for hw in hw_layers:
        if hw["name"] in producers:
            continue
        if hw["name"] in shift_of:
            ordered.append(by_name[shift_of[hw["name"]]])
        ordered.append(hw)
    return ordered


def _data_buffer_lines(hw_layers: list[Hw], producers: dict[str, str],
                       nodes: dict[str, Node]) -> list[str]:
    """The `data_buffer` section: one region per buffer, named after the buffer."""
    lines = []
    for hw in hw_layers:
        if hw["name"] not in producers:
            continue
        channels, length = nodes[hw["name"]].out_shape
        processors = map_value(hw["processors"], f"{hw['name']}.processors")
        lines += [f"  - processors: 0x{processors:016x}", f"    dim: {length}",
                  f"    channels: {channels}", f"    offset: 0x{int(hw['out_offset']):04x}",
                  f"    name: {hw['name']}"]
    return ["data_buffer:", *lines, ""] if lines else []


def _buffer_keys(record: Record, hw: Hw, members: list[Layer], producers: dict[str, str],
                 taken: set[str], nodes: dict[str, Node]) -> None:
    """A buffer's hardware layer is its shift (a passthrough of words 1..length-1 one word
    down); the layer it reads inserts the newest frame; its readers read all `length` words."""
    if hw["name"] in producers:
        channels, length = nodes[hw["name"]].out_shape
        shift = f"{hw['name']}_shift"
        while shift in taken:
            shift += "_"
        record.pop("in_sequences", None)
        record.update({"name": shift, "in_sequences": hw["name"], "in_channels": channels,
                       "in_dim": length - 1, "buffer_shift": 1})
        return
    if hw["name"] in producers.values():
        record["buffer_insert"] = 1
    read = [name for m in members for name in inputs_of(m) if name in producers]
    if read and "in_dim" not in record:
        channels, length = nodes[read[0]].out_shape
        record["in_channels"] = channels
        record["in_dim"] = length


def _value_text(key: str, value: Any) -> str:
    """A record value as the toolchain writes it (maps in 64-bit hex, offsets in hex)."""
    if key in ("processors", "output_processors"):
        return f"0x{value:016x}"
    if key in ("in_offset", "out_offset"):
        return f"0x{value:04x}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _in_dim(record: Record, members: list[Layer], by_name: dict[str, Layer],
            nodes: dict[str, Node]) -> None:
    """`in_dim` for a layer that reads a reshape (the reshape itself is no network layer):
    [H, W] for 2-D data, L for 1-D."""
    for member in members:
        if member.op == "reshape":
            continue
        if any(by_name[name].op == "reshape" for name in inputs_of(member) if name in by_name):
            dims = list(nodes[member.name].in_shapes[0][1:])
            record["in_dim"] = dims[0] if len(dims) == 1 else dims
            return


def _out_channels(records: list[Record], nodes: dict[str, Node], outputs: list[str | None],
                  profile: Profile) -> None:
    """Add `out_channels` where the importer would not read the count from processor maps."""
    index = {record["name"]: i for i, record in enumerate(records)}
    specs = []
    for i, record in enumerate(records):
        spec = Spec(index=i, keys={}, raw={})
        spec.op, _ = vocabulary.imported_op(record["op"])
        spec.processors = record["processors"]
        spec.output_processors = record.get("output_processors")
        spec.groups = record.get("groups", 1)
        spec.eltwise = record.get("eltwise")
        spec.wide = record.get("output_width") == 32
        refs = record.get("in_sequences")
        refs = [i - 1] if refs is None else (refs if isinstance(refs, list) else [refs])
        spec.inputs = [-1 if r in ("input", -1) else index.get(r, i - 1) if isinstance(r, str)
                       else r for r in refs]
        specs.append(spec)
    for i, record in enumerate(records):
        output = outputs[i]
        if not vocabulary.computes(vocabulary.imported_op(record["op"])[0]) \
                or output not in nodes:
            continue
        actual = nodes[output].out_shape[0]
        guess, _ = map_channels(specs, i, None, None, profile)
        if guess != actual:
            record["out_channels"] = actual
            specs[i].out_channels = actual
