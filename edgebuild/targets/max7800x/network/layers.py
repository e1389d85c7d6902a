"""Edgebuild layers from the network description's layers, checked against the checkpoint
when there is one.

Mapping of one network layer (a "hardware layer") onto edgebuild layers:

| network description | edgebuild |
|---|---|
| `conv2d` / `conv1d` (+ `max_pool`/`avg_pool`) | conv2d / conv1d with a fused `pool` |
| `convtranspose2d` | conv_transpose2d (stride 2, output_pad 1: the hardware's fixed upsampling) |
| `in_dim` that differs from the input's shape | `reshape` (`<name>_reshape`) of the input, same channels |
| conv + `eltwise: add` over `in_sequences` | `add` (`<name>_add`), then the conv; with pooling and the default `pool_first: true` every operand is pooled first (`<name>_pool<k>`) |
| conv with several `in_sequences` | `concat` (`<name>_cat`), then the conv |
| `mlp` / `linear` / `fc` | linear (`flatten: true` when its input is not flat; `output_width: 32` = `wide`) |
| `none` / `passthrough` | passthrough; with pooling a pool1d/pool2d layer; with several `in_sequences` a concat (then the pool); with `eltwise: add` (or `op: add`) an add |

`pool_first: false` (add, then pool) is an add followed by the conv with a fused pool. A
reshape runs in the hardware layer that reads it (no data moves: each channel keeps its
values in order). An
`add` without activation that only feeds the conv2d right after it runs in-flight in it (one
hardware layer, named after the conv); a concat or a pool in front of the main operation is a
hardware layer of its own. Each hardware layer's `placement` entry is keyed by the edgebuild
layer that writes its output; a network layer cut into several hardware layers gives its
processors to all of them, its `in_offset` (and `data_format`) to the first and its output
keys (`out_offset`, `output_processors`, `write_gap`, `bias_group`) to the last.
Without a checkpoint, `quantization` becomes a `qat.overrides` weight width and layers keep
edgebuild's default `bias: true`; with one, `bias` follows the checkpoint.

Layer names come from the checkpoint's modules (`conv1.op.weight` -> `conv1`), else the
description's `name`, else `l<index>`. Channel counts come from the checkpoint's weights
(verified against every layer: kernel, input channels, processor counts, flatten sizes);
without a checkpoint from the processor maps and `in_channels`/`out_channels` keys (one
channel per processor: layers that run in several passes need those keys or the checkpoint).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.binding import Binder
from edgebuild.targets.max7800x.network.built import (
    NAME_LIMIT,
    Built,
    emit,
    first_input,
    identifier,
    previous,
)
from edgebuild.targets.max7800x.network.channels import map_channels
from edgebuild.targets.max7800x.network.checkpoint import CheckpointLayer
from edgebuild.targets.max7800x.network.compute import (
    conv_keys,
    conv_transpose_keys,
    linear_layer,
    linear_reads,
)
from edgebuild.targets.max7800x.network.hardware import (
    HardwareLayer,
    LayerDocument,
    hardware_groups,
    hardware_op,
    placement_entry,
)
from edgebuild.targets.max7800x.network.spec import Reporter, Spec
from edgebuild.targets.max7800x.network.values import is_int

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.network.description import Top
    from edgebuild.targets.max7800x.records import Profile

# A pooling window as layer YAML data ({"mode", "size", "stride"}: a fused `pool` or a pool
# layer's keys), part of a LayerDocument.
PoolDocument = dict[str, Any]


class Importer:
    """Builds the edgebuild layers of every network layer, in order; a layer whose input
    failed is skipped (its problem is already reported)."""

    def __init__(self, report: Reporter, top: Top, specs: list[Spec], classes: int | None,
                 checkpoint: list[CheckpointLayer] | None, checkpoint_path: Path | None,
                 profile: Profile):
        self.report = report
        self.profile = profile  # the device's (records.Profile)
        self.top = top
        self.specs = specs
        self.classes = classes
        self.checkpoint = checkpoint
        self.checkpoint_path = checkpoint_path
        self.built = Built()
        self.used: set[str] = {"input"}
        self.names: list[str] = []  # primary (output) name per spec position
        self.failed: set[int] = set()
        self.bound: dict[int, CheckpointLayer] = {}
        self.binder = Binder(report, self.built, self.bound, profile.numbers.total_shift)

    # -- names and bindings --
    def assign_names(self) -> None:
        """Bind the layers with weights to the checkpoint's, in order, and name every
        layer (see the module docstring)."""
        weight_specs = [p for p, s in enumerate(self.specs) if vocabulary.computes(s.op)]
        if self.checkpoint is not None:
            if len(weight_specs) != len(self.checkpoint):
                described = ", ".join(str(self.specs[p].index) for p in weight_specs)
                self.report.error(("layers",), (
                    f"the network description has {len(weight_specs)} layers with weights "
                    f"(layers {described or 'none'}) but the checkpoint {self.checkpoint_path} "
                    f"has {len(self.checkpoint)} ({', '.join(c.name for c in self.checkpoint)}): "
                    "the description and the checkpoint do not match (a layer missing or extra?)"))
            for p, layer in zip(weight_specs, self.checkpoint, strict=False):
                self.bound[p] = layer
        for p, spec in enumerate(self.specs):
            if p in self.bound:
                base = self.bound[p].name
            elif spec.yaml_name is not None:
                base = spec.yaml_name
            else:
                base = f"l{spec.index}"
            self.names.append(identifier(base, self.used, NAME_LIMIT - 6))

    def _input_name(self, p: int) -> str:
        return "input" if p == -1 else self.names[p]

    # -- layers --
    def build(self, input_shape: tuple[int, ...]) -> Built:
        """Every network layer's edgebuild layers, hardware layers and placement entries."""
        self.built.shapes["input"] = tuple(input_shape)
        for p, spec in enumerate(self.specs):
            if any(i in self.failed for i in spec.inputs if i >= 0):
                self.failed.add(p)
                continue
            start = len(self.built.layers)
            ok = self._layer(p, spec)
            if not ok:
                self.failed.add(p)
                del self.built.layers[start:]
                del self.built.origin[start:]
                continue
            groups = hardware_groups(self.built.layers[start:])
            for g, group in enumerate(groups):
                name = group[-1]["name"]
                self.built.hardware.append(HardwareLayer(
                    spec.index, name, hardware_op(group), tuple(layer["name"] for layer in group)))
                self.built.placement[name] = placement_entry(spec, g == 0, g == len(groups) - 1)
        self._output_map()
        return self.built

    def _emit(self, p: int, layer: LayerDocument) -> bool:
        return emit(self.built, self.report, self.specs[p], p, layer)

    def _layer(self, p: int, spec: Spec) -> bool:
        """One network layer: the layers in front of its main operation (a reshape for
        `in_dim`, the operands' pools, an add or a concat), then the operation."""
        name = self.names[p]
        inputs: list[str] | None  # None once `in_dim` failed
        inputs = [self._input_name(i) for i in spec.inputs]
        if spec.op == "buffer":
            return self._buffer(p, spec, name, inputs)
        if not self._check_input_keys(p, spec, inputs):
            return False
        inputs = self._in_dim(p, spec, name, inputs)
        if inputs is None or not self._keys_fit(spec, inputs):
            return False
        dims = 1 if len(self.built.shapes[inputs[0]]) == 2 else 2
        pool_op = "pool1d" if dims == 1 else "pool2d"
        ok, pool = self._window(spec, dims)
        if not ok:
            return False
        done = None
        if spec.eltwise == "add":
            done, inputs, pool = self._add(p, spec, name, inputs, pool, pool_op)
        elif len(inputs) > 1:
            done, inputs = self._concat(p, spec, name, inputs, pool)
        if done is not None:
            return done
        return self._main(p, spec, name, inputs, pool, pool_op)

    def _keys_fit(self, spec: Spec, inputs: list[str]) -> bool:
        """Keys that need another key or another kind of layer."""
        if spec.eltwise == "add":
            if not self._add_fits(spec, inputs):
                return False
        elif spec.operands is not None:
            self.report.layer_error(spec, "operands", "`operands` needs an element-wise "
                                    "operation")
            return False
        if not spec.pool_first and not (spec.eltwise and spec.pool):
            self.report.layer_error(spec, "pool_first", "`pool_first: false` needs both pooling "
                                    "and an element-wise operation")
            return False
        if spec.op in ("none",) and spec.wide:
            self.report.layer_error(spec, "output_width", "`output_width: 32` needs a "
                                    "convolution or linear layer")
            return False
        if spec.op == "none" and (spec.quantization is not None or spec.output_shift is not None):
            key = "quantization" if spec.quantization is not None else "output_shift"
            self.report.layer_error(spec, key, f"`{key}` needs a layer with weights")
            return False
        return True

    def _add_fits(self, spec: Spec, inputs: list[str]) -> bool:
        """An element-wise add adds the layers `in_sequences` names, in a layer without
        weights or in front of a convolution."""
        if len(inputs) < 2:
            self.report.layer_error(spec, "eltwise", "an element-wise add needs its operands "
                                    "in `in_sequences` (two or more layers); operands "
                                    "interleaved in one layer's output have no edgebuild "
                                    "equivalent")
            return False
        if spec.operands is not None and spec.operands != len(inputs):
            self.report.layer_error(spec, "operands", f"`operands: {spec.operands}` but "
                                    f"in_sequences names {len(inputs)} layers; edgebuild "
                                    "adds exactly the layers named in in_sequences")
            return False
        if spec.op == "linear":
            self.report.layer_error(spec, "eltwise", "an element-wise add fused into a "
                                    "linear layer has no edgebuild equivalent (use a separate "
                                    "`op: add` layer)")
            return False
        return True

    def _window(self, spec: Spec, dims: int) -> tuple[bool, PoolDocument | None]:
        """(ok, the pooling record or None); 1-D data pools with single integers."""
        if spec.pool is None:
            return True, None
        mode, size, stride = spec.pool
        if dims == 1 and (not is_int(size) or not is_int(stride)):
            self.report.layer_error(spec, "max_pool" if mode == "max" else "avg_pool",
                                    "pooling a 1-D input takes single integers")
            return False, None
        pool: PoolDocument = {"mode": mode, "size": size}
        if stride != size:
            pool["stride"] = stride
        return True, pool

    def _add(self, p: int, spec: Spec, name: str, operands: list[str],
             pool: PoolDocument | None, pool_op: str
             ) -> tuple[bool | None, list[str], PoolDocument | None]:
        """The element-wise add, its operands pooled first unless `pool_first: false`:
        (True/False when the network layer is complete or failed, else None; the main
        operation's inputs; the pooling left for it)."""
        if pool is not None and spec.pool_first:
            pooled = self._pool_operands(p, name, operands, pool, pool_op)
            if pooled is None:
                return False, operands, pool
            operands, pool = pooled, None
        last_op = spec.op == "none" and pool is None
        aname = name if last_op else identifier(f"{name}_add", self.used)
        add: LayerDocument = {"name": aname, "op": "add", "inputs": operands}
        if spec.op == "none" and spec.act != "none":
            if pool is not None and pool["mode"] != "max":
                self.report.layer_error(spec, "activate", (
                    "an activation after average pooling of an element-wise sum has no "
                    "edgebuild equivalent (edgebuild's pool layers have no activation)"))
                return False, operands, pool
            add["act"] = spec.act  # the activation commutes with max pooling
        if not self._emit(p, add):
            return False, operands, pool
        if last_op:
            return True, [aname], pool
        if spec.op == "none":
            assert pool is not None  # not last_op
            return self._emit(p, {"name": name, "op": pool_op, **pool}), [aname], pool
        return None, [aname], pool

    def _pool_operands(self, p: int, name: str, operands: list[str], pool: PoolDocument,
                       pool_op: str) -> list[str] | None:
        """One pool layer per operand (`<name>_pool<k>`); None when one fails."""
        pooled = []
        for k, operand in enumerate(operands):
            pname = identifier(f"{name}_pool{k}", self.used)
            if not self._emit(p, {"name": pname, "op": pool_op, "inputs": [operand], **pool}):
                return None
            pooled.append(pname)
        return pooled

    def _concat(self, p: int, spec: Spec, name: str, inputs: list[str],
                pool: PoolDocument | None) -> tuple[bool | None, list[str]]:
        """The concatenation of several inputs: (True/False when the network layer is
        complete or failed, else None; the main operation's inputs)."""
        last_op = spec.op == "none" and pool is None
        cname = name if last_op else identifier(f"{name}_cat", self.used)
        if not self._emit(p, {"name": cname, "op": "concat", "inputs": inputs}):
            return False, inputs
        if last_op:
            return self._no_act(spec), [cname]
        return None, [cname]

    def _main(self, p: int, spec: Spec, name: str, inputs: list[str],
              pool: PoolDocument | None, pool_op: str) -> bool:
        """The network layer's main operation, named after it."""
        linked: dict[str, Any] = {} if inputs == [previous(self.built)] else {"inputs": inputs}
        if spec.op == "none":
            if not self._no_act(spec):
                return False
            if pool is not None:
                return self._emit(p, {"name": name, "op": pool_op, **linked, **pool})
            return self._emit(p, {"name": name, "op": "passthrough", **linked})
        if spec.op == "linear":
            return self._linear(p, spec, name, linked, pool, pool_op)
        return self._conv(p, spec, name, linked, pool)

    def _buffer(self, p: int, spec: Spec, name: str, inputs: list[str]) -> bool:
        """A data buffer: its producer's per-frame output (C channels, one value each)."""
        shape = self.built.shapes[inputs[0]]
        if shape[0] != spec.in_channels:
            self.report.layer_error(spec, None, f"data buffer {name!r} has {spec.in_channels} "
                                    f"channels, but {inputs[0]!r}, which inserts into it, writes "
                                    f"{shape[0]}")
            return False
        return self._emit(p, {"name": name, "op": "buffer", "length": spec.length})

    def _no_act(self, spec: Spec) -> bool:
        """Only a layer with weights (or an add) applies an activation."""
        if spec.act != "none":
            self.report.layer_error(spec, "activate", f"`activate: {spec.raw['activate']}` on a "
                                    "layer without weights has no edgebuild equivalent")
            return False
        return True

    def _check_input_keys(self, p: int, spec: Spec, inputs: list[str]) -> bool:
        """`in_channels` may only repeat what the inputs give: data is never reinterpreted."""
        shapes = [self.built.shapes[name] for name in inputs]
        channels = sum(s[0] for s in shapes) if not spec.eltwise else shapes[0][0]
        ok = True
        if spec.in_channels is not None and spec.in_channels != channels:
            self.report.layer_error(spec, "in_channels", (
                f"`in_channels: {spec.in_channels}` overrides the {channels} channels its input "
                f"{' + '.join(inputs)} has; edgebuild cannot reinterpret data (remove the key, or "
                "fix the channel counts)"))
            ok = False
        return ok

    def _in_dim(self, p: int, spec: Spec, name: str, inputs: list[str]) -> list[str] | None:
        """The layer's inputs after `in_dim`: a reshape layer when it changes the shape."""
        if spec.in_dim is None:
            return inputs
        shape = self.built.shapes[inputs[0]]
        dim = list(spec.in_dim) if isinstance(spec.in_dim, list) else [spec.in_dim]
        if len(dim) == 2 and dim[1] == 1 and (spec.op == "conv1d" or len(shape) == 2):
            dim = dim[:1]  # [L, 1] is the manual's other spelling of a 1-D length L
        if dim == list(shape[1:]):
            return inputs
        if len(inputs) > 1:
            self.report.layer_error(spec, "in_dim", (
                f"`in_dim: {spec.in_dim}` on a layer with several inputs has no edgebuild "
                "equivalent (reshape each input in a layer of its own)"))
            return None
        if math.prod(dim) != math.prod(shape[1:]):
            self.report.layer_error(spec, "in_dim", (
                f"`in_dim: {spec.in_dim}` has {math.prod(dim)} values per channel, but the "
                f"{list(shape)} input of this layer has {math.prod(shape[1:])} (in_dim changes "
                "only how height x width or length are read, never the count)"))
            return None
        rname = identifier(f"{name}_reshape", self.used)
        layer: LayerDocument = {"name": rname, "op": "reshape",
                                **({} if inputs == [previous(self.built)] else {"inputs": inputs}),
                                "shape": [shape[0], *dim]}
        return [rname] if self._emit(p, layer) else None

    # -- layers with weights --
    def _out_channels(self, p: int, spec: Spec, kind: str) -> int | None:
        """From the checkpoint's weights, else from the description (see `channels`)."""
        if p in self.bound:
            weight = self.bound[p].weight
            if spec.op == "conv_transpose2d":  # (in, out / groups, kh, kw)
                return weight.shape[1] * spec.groups if weight.ndim == 4 else weight.shape[0]
            return weight.shape[0]
        if self.checkpoint is not None:
            return None  # unbound weight layer: the count mismatch is reported
        output_map = self.top.get("output_map", (None, None))[1]
        channels, source = map_channels(self.specs, p, output_map, self.classes, self.profile)
        if channels is None:
            self.report.layer_error(spec, None, (
                f"the output channel count of this {kind} layer is unknown: pass the checkpoint "
                "(--checkpoint), or add `out_channels: N` to the layer"))
            return None
        if source == "processors":
            self.built.from_maps.append(self.names[p])
        elif source == "dataset":
            self.report.layer_warn(spec, None, (
                f"{channels} output channels taken from the dataset's class count; pass the "
                "checkpoint to confirm"))
        return channels

    def _no_bias(self, p: int) -> bool:
        """A layer bound to a checkpoint layer without bias has none."""
        return p in self.bound and self.bound[p].bias is None

    def _conv(self, p: int, spec: Spec, name: str, linked: dict[str, Any],
              pool: PoolDocument | None) -> bool:
        """A convolution (1-D, 2-D or transposed), bound to its checkpoint layer."""
        out = self._out_channels(p, spec, spec.op)
        if out is None:
            return False
        layer: LayerDocument = {"name": name, "op": spec.op, **linked, "out": out,
                                "kernel": spec.kernel}
        if spec.op == "conv_transpose2d":
            ok = conv_transpose_keys(self.report, spec, layer, pool, self._no_bias(p))
        else:
            in_shape = self.built.shapes[first_input(linked, self.built)]
            ok = conv_keys(self.report, spec, layer, pool, self._no_bias(p), in_shape)
        return ok and self._emit(p, layer) and self.binder.bind(p, spec, layer)

    def _linear(self, p: int, spec: Spec, name: str, linked: dict[str, Any],
                pool: PoolDocument | None, pool_op: str) -> bool:
        """A linear layer; pooling in front of it is a pool layer (`<name>_pool`)."""
        if pool is not None:
            if spec.flatten:
                self.report.layer_error(spec, "flatten", "`flatten` cannot be combined with "
                                        "pooling in one layer")
                return False
            pname = identifier(f"{name}_pool", self.used)
            if not self._emit(p, {"name": pname, "op": pool_op, **linked, **pool}):
                return False
            linked = {}
        shape = self.built.shapes[first_input(linked, self.built)]
        if not linear_reads(self.report, spec, shape):
            return False
        out = self._out_channels(p, spec, "linear")
        if out is None:
            return False
        layer = linear_layer(spec, name, linked, shape, out, self._no_bias(p))
        return self._emit(p, layer) and self.binder.bind(p, spec, layer)

    def _output_map(self) -> None:
        """The global output_map: the last layer's output processors (unless that is the
        default, or the layer sets its own)."""
        written, value = self.top.get("output_map", (None, None))
        if value is None or not self.built.hardware:
            return
        last = self.built.hardware[-1]
        spec = self.specs[-1]
        if last.index != spec.index:
            return
        channels = self.built.shapes[last.name][0]
        default = (1 << self.profile.processors_needed(channels)) - 1
        entry = self.built.placement[last.name]
        if spec.output_processors is not None and spec.output_processors != value:
            self.report.warn((written,), f"`output_map` {value:#018x} overrides the last layer's "
                             f"output_processors {spec.output_processors:#018x}")
        if value != default or spec.output_processors is not None:
            entry["output_processors"] = value
