"""Data buffers (`data_buffer`, `buffer_shift`, `buffer_insert`): a region of data memory
kept across inferences becomes one edgebuild `buffer` layer.
"""

from __future__ import annotations

from typing import Any, cast

from edgebuild.targets.max7800x.network.spec import DataBuffer, Reporter, Spec
from edgebuild.targets.max7800x.network.values import (
    MAP_BITS,
    is_int,
    parse_offset,
    parse_processor_map,
)

_BUFFER_KEYS = ("name", "processors", "dim", "channels", "offset")


def data_buffers(report: Reporter, written: str, value: Any) -> dict[str, DataBuffer]:
    """The `data_buffer` entries by name, each checked (every problem reported)."""
    items = value if isinstance(value, list) else [value]
    found: dict[str, DataBuffer] = {}
    for i, item in enumerate(items):
        loc = (written, i) if isinstance(value, list) else (written,)
        if not isinstance(item, dict):
            report.error(loc, f"data_buffer {i}: expected a mapping with {', '.join(_BUFFER_KEYS)}")
            continue
        keys = {str(k).lower(): k for k in item}
        for key in sorted(set(keys) - set(_BUFFER_KEYS)):
            report.error((*loc, keys[key]), f"data_buffer {i}: unknown key {keys[key]!r} "
                         f"(allowed: {', '.join(_BUFFER_KEYS)})")
        missing = [key for key in _BUFFER_KEYS if key not in keys]
        if missing:
            report.error(loc, f"data_buffer {i}: missing {', '.join(missing)}")
            continue
        raw = {key: item[keys[key]] for key in _BUFFER_KEYS}
        parsed = {"processors": parse_processor_map(raw["processors"]),
                  "offset": parse_offset(raw["offset"]),
                  "dim": raw["dim"] if is_int(raw["dim"]) and 2 <= raw["dim"] <= 1024 else None,
                  "channels": raw["channels"] if is_int(raw["channels"])
                  and 1 <= raw["channels"] <= MAP_BITS else None}
        allowed = {"processors": "a processor map such as 0xffffffff00000000",
                   "offset": "a byte offset such as 0x7fc4",
                   "dim": "the number of frames kept, 2 to 1024",
                   "channels": f"1 to {MAP_BITS} (one pass)"}
        bad = [key for key, v in parsed.items() if v is None]
        for key in bad:
            report.error((*loc, keys[key]), f"data_buffer {i}: `{keys[key]}` {raw[key]!r} "
                         f"must be {allowed[key]}")
        name = str(raw["name"]).strip()
        if name in found or name.lower() in ("input", "stop"):
            report.error((*loc, keys["name"]), f"data_buffer {i}: name {name!r} is reserved or "
                         "used twice")
        elif not bad:
            values = cast("dict[str, int]", parsed)  # no value is None (`bad` is empty)
            found[name] = DataBuffer(i, name, values["processors"], values["dim"],
                                     values["channels"], values["offset"])
    return found


def buffer_layers(report: Reporter, specs: list[Spec],
                  buffers: dict[str, DataBuffer]) -> list[Spec]:
    """Each data buffer as one edgebuild `buffer` layer, right after the layer with
    `buffer_insert` that writes its newest frame; the `buffer_shift` layer that moves it
    becomes that layer's hardware layer (its placement keys move to it)."""
    shifts = _shifts(report, specs, buffers)
    out: list[Spec] = []
    inserted: set[str] = set()
    for spec in specs:
        if spec.buffer_shift is not None:
            continue
        out.append(spec)
        if spec.buffer_insert is None:
            continue
        target = _inserted_into(report, spec, buffers)
        if target is None:
            continue
        if target.name in inserted:
            report.layer_error(spec, "buffer_insert", f"data buffer {target.name!r} already has "
                               "a layer that inserts into it")
            continue
        inserted.add(target.name)
        out.append(_buffer_spec(report, target, shifts.get(target.name), spec))
    for name, buffer in buffers.items():
        if name not in inserted:
            report.error(("data_buffer",), f"data_buffer {buffer.index} ({name!r}): no layer "
                         "writes into it (`buffer_insert: 1` on the layer that computes each "
                         "frame's features)")
    return out


def _shifts(report: Reporter, specs: list[Spec],
            buffers: dict[str, DataBuffer]) -> dict[str, Spec]:
    """The `buffer_shift` layer of each data buffer (by buffer name): a plain passthrough
    that reads that one buffer, one per buffer."""
    shifts: dict[str, Spec] = {}
    for spec in specs:
        if spec.buffer_shift is None:
            continue
        refs = [str(r).strip() for r in spec.refs or ()]
        if len(refs) != 1 or refs[0] not in buffers:
            report.layer_error(spec, "buffer_shift", "a `buffer_shift` layer reads one data "
                               f"buffer: `in_sequences` must name one of "
                               f"{', '.join(buffers) or '(no data_buffer given)'}")
        elif refs[0] in shifts:
            report.layer_error(spec, "buffer_shift", f"data buffer {refs[0]!r} is already "
                               f"shifted by layer {shifts[refs[0]].index}")
        elif spec.op != "none" or spec.eltwise or spec.pool or spec.act != "none":
            report.layer_error(spec, "buffer_shift", "a `buffer_shift` layer is a Passthrough "
                               "without pooling, element-wise operation or activation")
        else:
            shifts[refs[0]] = spec
    return shifts


def _inserted_into(report: Reporter, spec: Spec,
                   buffers: dict[str, DataBuffer]) -> DataBuffer | None:
    """The data buffer whose newest word the layer's out_offset names (or the only one)."""
    if spec.out_offset is not None:
        hits = [b for b in buffers.values() if b.offset + 4 * (b.dim - 1) == spec.out_offset]
    else:
        hits = list(buffers.values()) if len(buffers) == 1 else []
    if len(hits) != 1:
        newest = ", ".join(f"{b.name} at {b.offset + 4 * (b.dim - 1):#06x}"
                           for b in buffers.values()) or "no data_buffer given"
        report.layer_error(spec, "buffer_insert", "`buffer_insert` writes the newest frame of a "
                           "data buffer, so out_offset must be the buffer's last word ("
                           f"{newest})")
        return None
    return hits[0]


def _buffer_spec(report: Reporter, buffer: DataBuffer, shift: Spec | None,
                 producer: Spec) -> Spec:
    """The synthetic spec of an edgebuild `buffer` layer (op "buffer")."""
    spec = Spec(index=shift.index if shift is not None else producer.index, keys={}, raw={})
    spec.op, spec.yaml_name, spec.length = "buffer", buffer.name, buffer.dim
    spec.in_channels = buffer.channels
    spec.processors = buffer.processors
    spec.out_offset = buffer.offset
    if shift is None:
        report.error(("data_buffer",), f"data_buffer {buffer.index} ({buffer.name!r}): no "
                     "layer shifts it (a Passthrough with `buffer_shift: 1` and `in_sequences: "
                     f"{buffer.name}` before the layer that inserts into it)")
        return spec
    spec.keys = shift.keys
    for key, value in (("processors", shift.processors), ("out_offset", shift.out_offset)):
        if value is not None and value != getattr(spec, key):
            report.layer_error(shift, key, f"the shift of data buffer {buffer.name!r} has "
                               f"{key} {value:#x}, but the buffer is at {getattr(spec, key):#x}")
    spec.output_processors = shift.output_processors
    spec.in_offset = shift.in_offset
    if shift.in_dim is not None and shift.in_dim not in (buffer.dim - 1, [buffer.dim - 1, 1]):
        report.layer_error(shift, "in_dim", f"the shift of data buffer {buffer.name!r} moves "
                           f"its last {buffer.dim - 1} words (dim - 1), not {shift.in_dim}")
    return spec
