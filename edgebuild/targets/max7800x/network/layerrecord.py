"""One hardware layer of a placed manifest as a record of the network description (for
`export`): its operation, pooling and element-wise keys from the manifest layers it
implements, its placement keys from the resolved placement. Keys are written in the
order the toolchain's own descriptions use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from edgebuild.core.errors import UserError
from edgebuild.model.graph import Node
from edgebuild.ops.c import Activated
from edgebuild.ops.operator import ComputeLayer
from edgebuild.ops.pool import pool_window
from edgebuild.targets.max7800x.hwlayer import inputs_of
from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.values import parse_processor_map

if TYPE_CHECKING:
    from edgebuild.manifest import Layer
    from edgebuild.ops.conv import ConvFields
    from edgebuild.ops.conv1d import Conv1d
    from edgebuild.ops.conv2d import Conv2d
    from edgebuild.ops.conv_transpose2d import ConvTranspose2d
    from edgebuild.ops.global_pool import GlobalPool
    from edgebuild.ops.pool import Pool1d, Pool2d, PoolingWindow

# A hardware layer's entry of placement.json (placement.records.LayerPlanJSON) or of a
# document like it: processor maps as ints or hex strings, keys but `name` optional. Open.
Hw = Mapping[str, Any]
# A layer of the network description as written: keys in the toolchain's order, values of
# the key's type (ints, strings, lists, flags). Open.
Record = dict[str, Any]

_ACT_NAMES = {"none": "None", "relu": "ReLU", "abs": "Abs"}


def map_value(value: Any, what: str) -> int:
    """A processor map of the placement (an int or a hex string) as an int."""
    parsed = parse_processor_map(value)
    if parsed is None:
        raise UserError(f"export: {what} {value!r} is not a processor map")
    return parsed


def single(value: int | tuple[int, ...] | list[int]) -> int | list[int]:
    """(3, 3) -> 3, (2, 3) -> [2, 3]: the description writes a square size once."""
    if isinstance(value, tuple | list):
        return value[0] if len(set(value)) == 1 else list(value)
    return value


@dataclass(frozen=True)
class _Members:
    """The manifest layers of one hardware layer, by what they do in it."""

    main: Layer | None  # the layer with weights
    adds: list[Layer]
    concats: list[Layer]
    pools: list[Layer]

    @classmethod
    def of(cls, hw: Hw, members: list[Layer]) -> _Members:
        """Raises when one network layer cannot describe them: at most one operation with
        weights, one add or one concat (not both), and layers the format knows."""
        compute = [m for m in members if vocabulary.computes(m.op)]
        adds = [m for m in members if vocabulary.operation(m.op) == "add"]
        concats = [m for m in members if vocabulary.operation(m.op) == "concat"]
        pools = [m for m in members if vocabulary.operation(m.op) == "pool"]
        unknown = [m.op for m in members if vocabulary.operation(m.op) is None]
        if len(compute) > 1 or len(adds) > 1 or len(concats) > 1 or unknown or (adds and concats):
            raise UserError(f"export: hardware layer {hw['name']!r} combines "
                            f"{[m.op for m in members]}, which one network layer cannot "
                            "describe")
        return cls(compute[0] if compute else None, adds, concats, pools)


def layer_record(hw: Hw, members: list[Layer], nodes: dict[str, Node], owner: dict[str, str],
                 previous: str, position: int, quant: Mapping[str, Mapping[str, Any]]
                 ) -> tuple[Record, str | None]:
    """One network layer; also the manifest layer holding its output (None: a copy)."""
    parts = _Members.of(hw, members)
    main = parts.main
    consumed = {name for m in members for name in inputs_of(m)}
    produced = [m.name for m in members if m.name not in consumed]
    output = produced[-1] if produced else None
    external = _external(hw, members, owner)
    record: Record = {"name": hw["name"]}
    if main is None:
        record["op"] = "none" if (parts.adds or parts.pools or parts.concats) else "passthrough"
    else:
        record["op"] = vocabulary.exported_op(main)
    if main is not None and not vocabulary.fully_connected(main.op):
        # a compute op that does not flatten its input: a convolution
        _convolution_keys(record, hw["name"], cast("Conv1d | Conv2d | ConvTranspose2d", main))
    if main is not None:
        # a compute op's layer record has ComputeLayer's fields; an add's has an activation
        record["activate"] = _ACT_NAMES[cast(ComputeLayer, main).act.value]
    elif parts.adds:
        record["activate"] = _ACT_NAMES[cast(Activated, parts.adds[0]).act.value]
    _pool_keys(record, hw["name"], parts, nodes)
    if main is not None and vocabulary.fully_connected(main.op):
        in_shape = nodes[main.name].in_shapes[0]
        if len(in_shape) > 1 and math.prod(in_shape[1:]) > 1:
            record["flatten"] = True
    if main is not None and getattr(main, "wide", False):
        record["output_width"] = 32
    if external != [previous]:
        record["in_sequences"] = external if len(external) > 1 else external[0]
    _placement_keys(record, hw, position)
    if main is not None and main.name in quant:
        row = quant[main.name]
        record["quantization"] = int(row["bits"])
        record["output_shift"] = int(row["scale_exp"])
    return record, output


def _external(hw: Hw, members: list[Layer], owner: dict[str, str]) -> list[str]:
    """The hardware layers (or "input") the layer reads: the placement's `inputs`, else
    the owners of what its members read from outside it, in order."""
    if hw.get("inputs") is not None:
        return [str(name) for name in hw["inputs"]]
    names = {m.name for m in members}
    external: list[str] = []
    for member in members:
        for name in inputs_of(member):
            source = owner.get(name, name)
            if name not in names and source not in external:
                external.append(source)
    return external


def _convolution_keys(record: Record, name: str,
                      main: Conv1d | Conv2d | ConvTranspose2d) -> None:
    """kernel_size (`KxK` in 2-D), pad, stride, dilation, groups; a transposed convolution
    has the hardware's fixed stride."""
    if main.op in ("conv2d", "conv_transpose2d"):
        kh, kw = (main.kernel, main.kernel) if isinstance(main.kernel, int) else main.kernel
        record["kernel_size"] = f"{kh}x{kw}"
    else:
        record["kernel_size"] = main.kernel
    record["pad"] = single(main.pad)
    if main.op == "conv_transpose2d":
        _check_upsampling(name, main)
    elif single(main.stride) != 1:
        record["stride"] = single(main.stride)
    if single(main.dilation) != 1:
        record["dilation"] = single(main.dilation)
    if main.groups != 1:
        record["groups"] = main.groups


def _check_upsampling(name: str, layer: ConvTranspose2d) -> None:
    """A network description's ConvTranspose2d always upsamples by 2 (output padding 1)."""
    if single(layer.stride) != 2 or single(layer.output_pad) != 1:
        raise UserError(f"export: hardware layer {name!r}: a ConvTranspose2d layer of a network "
                        f"description has stride 2 and output padding 1; {layer.name!r} has "
                        f"stride {layer.stride} and output_pad {layer.output_pad}")


def _pool_keys(record: Record, name: str, parts: _Members, nodes: dict[str, Node]) -> None:
    """The pooling window (the main operation's, else that of the pool layers, which must
    agree; a global pool's is its input map) and the element-wise keys: `pool_first:
    false` when the add is pooled after."""
    main = parts.main
    # the members of the "pool" hardware operation are pool and global pool layers
    pools = parts.pools
    windows = [pool_window(cast("Pool1d | Pool2d | GlobalPool", p), nodes[p.name].in_shapes[0])
               for p in pools]
    # a main operation with a pool is a convolution's (ops.conv.ConvFields: a fused pool)
    window: PoolingWindow | None = (
        cast("ConvFields", main).pool if main is not None
        and getattr(main, "pool", None) is not None else None)
    if window is None and windows:
        window = windows[0]
        if any((w.mode, w.size, w.stride) != (window.mode, window.size, window.stride)
               for w in windows):
            raise UserError(f"export: hardware layer {name!r} pools its operands with "
                            "different windows")
    if window is not None:
        key = "max_pool" if window.mode.value == "max" else "avg_pool"
        record[key] = single(window.size)
        record["pool_stride"] = single(window.stride if window.stride is not None
                                       else window.size)
    if parts.adds:
        record["eltwise"] = "add"
        pooled_first = bool(pools) and all(p.name in inputs_of(parts.adds[0]) for p in pools)
        if window is not None and not pooled_first:
            record["pool_first"] = False


def _placement_keys(record: Record, hw: Hw, position: int) -> None:
    """Processors, offsets, data format (first layer), gaps, bias group, streaming."""
    record["processors"] = map_value(hw["processors"], f"{hw['name']}.processors")
    if hw.get("output_processors") is not None:
        record["output_processors"] = map_value(hw["output_processors"],
                                                f"{hw['name']}.output_processors")
    for key in ("in_offset", "out_offset"):
        if hw.get(key) is not None:
            record[key] = int(hw[key])
    if position == 0 and hw.get("data_format"):
        record["data_format"] = str(hw["data_format"])
    for key in ("write_gap", "read_gap"):
        if hw.get(key):
            record[key] = int(hw[key])
    if hw.get("bias_group") is not None:
        group = hw["bias_group"]
        record["bias_group"] = list(group) if isinstance(group, list | tuple) else int(group)
    if hw.get("streaming"):
        record["streaming"] = True
