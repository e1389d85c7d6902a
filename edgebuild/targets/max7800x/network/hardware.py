"""Hardware layers: how the edgebuild layers made from one network layer are cut into
hardware layers, and each one's `placement` entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.spec import Spec

# A manifest layer as YAML data (`{"name": ..., "op": ..., ...}`), as the import builds it:
# open, its keys and their values are the op's (built.emit checks it against the op's record).
LayerDocument = dict[str, Any]


@dataclass(frozen=True)
class HardwareLayer:
    """One layer of the network description and the edgebuild layers that implement it
    (the last member produces its output and carries its name and placement)."""

    index: int
    name: str
    op: str  # conv2d, conv1d, conv_transpose2d, linear, passthrough, pool, add, concat
    members: tuple[str, ...]


def hardware_op(layers: list[LayerDocument]) -> str:
    """The hardware operation of a group: its layer with weights', else its last layer's."""
    ops = [layer["op"] for layer in layers]
    main = next((op for op in ops if vocabulary.computes(op)), ops[-1])
    return vocabulary.operation(main) or main


def hardware_groups(layers: list[LayerDocument]) -> list[list[LayerDocument]]:
    """The edgebuild layers of one network layer, cut into hardware layers: an `add` without
    activation runs in-flight in the conv2d right after it that reads it, the layer after
    an `in_dim` reshape reads through it, and a layer that can read a concatenation reads
    the concat in front of it directly (see edgebuild.targets.max7800x.mapping); every
    other layer (a pool of each operand, the pool before a linear layer) is a hardware
    layer of its own."""
    groups: list[list[LayerDocument]] = []
    for layer in layers:
        previous = groups[-1][-1] if groups else None
        reads_previous = previous is not None and \
            (layer.get("inputs") or [previous["name"]]) == [previous["name"]]
        before = None if previous is None else vocabulary.operation(previous["op"])
        inflight = previous is not None and before == "add" and "act" not in previous \
            and vocabulary.inflight(layer["op"])
        concat = before == "concat" and vocabulary.reads_concat(layer["op"])
        reads_through = previous is not None and vocabulary.view(previous["op"]) == "in_dim"
        if reads_previous and (inflight or concat or reads_through):
            groups[-1].append(layer)
        else:
            groups.append([layer])
    return groups


_INPUT_KEYS = ("in_offset", "data_format", "read_gap")
_OUTPUT_KEYS = ("output_processors", "out_offset", "write_gap", "bias_group")


def placement_entry(spec: Spec, first: bool = True, last: bool = True) -> dict[str, Any]:
    """The placement entry of one hardware layer of a network layer: a network layer cut
    into several hardware layers gives its processors to all, its input offset (and data
    format) to the first and its output keys to the last."""
    entry: dict[str, Any] = {}
    for key in ("processors", *(_INPUT_KEYS if first else ()), *(_OUTPUT_KEYS if last else ())):
        value = getattr(spec, key)
        if value is not None:
            entry[key] = value
    if spec.streaming:
        entry["streaming"] = True
    return entry
