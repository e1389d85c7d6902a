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
from typing import Any

from edgebuild.targets.max7800x.network.built import NAME_LIMIT, Built, first_input, identifier
from edgebuild.targets.max7800x.network.channels import map_channels, processors_needed
from edgebuild.targets.max7800x.network.checkpoint import CheckpointLayer
from edgebuild.targets.max7800x.network.hardware import (
    WEIGHT_OPS,
    HardwareLayer,
    hardware_groups,
    hardware_op,
    placement_entry,
)
from edgebuild.targets.max7800x.network.spec import Reporter, Spec
from edgebuild.targets.max7800x.network.values import is_int, popcount

OUTPUT_SHIFT_RANGE = (-15, 15)  # total device shift output_shift + 8 - weight_bits


class Importer:
    def __init__(self, report: Reporter, top: dict, specs: list[Spec], classes: int | None,
                 checkpoint: list[CheckpointLayer] | None, checkpoint_path: Path | None):
        self.report = report
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
        self.stop_binding = False

    # -- names and bindings --
    def assign_names(self) -> None:
        weight_specs = [p for p, s in enumerate(self.specs) if s.op in WEIGHT_OPS]
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

    # -- channel counts without a checkpoint --
    def map_channels(self, p: int) -> tuple[int | None, str]:
        """Output channels of weight layer `p` from the description's keys (see module doc)."""
        return map_channels(self.specs, p, self.top.get("output_map", (None, None))[1],
                            self.classes)

    # -- layers --
    def build(self, input_shape: tuple[int, ...]) -> Built:
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

    def _emit(self, p: int, layer: dict) -> bool:
        """Append one layer after checking it and inferring its output shape."""
        from pydantic import TypeAdapter, ValidationError

        from edgebuild.ops import OPS, Layer
        from edgebuild.ops.operator import ShapeError

        spec = self.specs[p]
        try:
            record = TypeAdapter(Layer).validate_python(layer)
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(x) for x in error["loc"][1:])
                self.report.layer_error(spec, None, f"gives edgebuild {layer['op']} layer "
                                        f"{layer['name']!r} an invalid {where or 'record'}: "
                                        f"{error['msg'].removeprefix('Value error, ')}")
            return False
        inputs = list(layer.get("inputs") or [self.built.layers[-1]["name"]
                                              if self.built.layers else "input"])
        shapes = [self.built.shapes[name] for name in inputs]
        try:
            if OPS[record.op].arity == "one" and len(shapes) != 1:
                raise ShapeError(f"takes one input, got {len(shapes)}")
            out = tuple(OPS[record.op].out_shape(record, shapes))
            if any(d < 1 for d in out):
                raise ShapeError(f"output shape {list(out)} has an empty dimension")
        except ShapeError as exc:
            described = " + ".join(str(list(s)) for s in shapes)
            self.report.layer_error(spec, None, f"edgebuild {record.op} layer {layer['name']!r} "
                                    f"on input {described}: {exc}")
            return False
        self.built.layers.append(layer)
        self.built.origin.append(p)
        self.built.shapes[layer["name"]] = out
        return True

    def _layer(self, p: int, spec: Spec) -> bool:
        name = self.names[p]
        inputs = [self._input_name(i) for i in spec.inputs]
        if spec.op == "buffer":
            return self._buffer(p, spec, name, inputs)
        if not self._check_input_keys(p, spec, inputs):
            return False
        inputs = self._in_dim(p, spec, name, inputs)
        if inputs is None:
            return False
        operands = inputs
        if spec.eltwise == "add":
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
        dims = 1 if len(self.built.shapes[inputs[0]]) == 2 else 2
        pool_op = "pool1d" if dims == 1 else "pool2d"
        pool = None
        if spec.pool is not None:
            mode, size, stride = spec.pool
            if dims == 1 and (not is_int(size) or not is_int(stride)):
                self.report.layer_error(spec, "max_pool" if mode == "max" else "avg_pool",
                                        "pooling a 1-D input takes single integers")
                return False
            pool = {"mode": mode, "size": size}
            if stride != size:
                pool["stride"] = stride
        # element-wise operands, pooled first unless pool_first: false
        if spec.eltwise == "add":
            if pool is not None and spec.pool_first:
                pooled = []
                for k, operand in enumerate(operands):
                    pname = identifier(f"{name}_pool{k}", self.used)
                    if not self._emit(p, {"name": pname, "op": pool_op, "inputs": [operand],
                                          **pool}):
                        return False
                    pooled.append(pname)
                operands, pool = pooled, None
            last_op = spec.op == "none" and pool is None
            aname = name if last_op else identifier(f"{name}_add", self.used)
            add = {"name": aname, "op": "add", "inputs": operands}
            if spec.op == "none" and spec.act != "none":
                if pool is not None and pool["mode"] != "max":
                    self.report.layer_error(spec, "activate", (
                        "an activation after average pooling of an element-wise sum has no "
                        "edgebuild equivalent (edgebuild's pool layers have no activation)"))
                    return False
                add["act"] = spec.act  # the activation commutes with max pooling
            if not self._emit(p, add):
                return False
            inputs = [aname]
            if last_op:
                return True
            if spec.op == "none":
                return self._emit(p, {"name": name, "op": pool_op, **pool})
        elif len(inputs) > 1:
            last_op = spec.op == "none" and pool is None
            cname = name if last_op else identifier(f"{name}_cat", self.used)
            if not self._emit(p, {"name": cname, "op": "concat", "inputs": inputs}):
                return False
            inputs = [cname]
            if last_op:
                return self._no_act(spec)
        default = [self.built.layers[-1]["name"] if self.built.layers else "input"]
        linked = {} if inputs == default else {"inputs": inputs}
        if spec.op == "none":
            if not self._no_act(spec):
                return False
            if pool is not None:
                return self._emit(p, {"name": name, "op": pool_op, **linked, **pool})
            return self._emit(p, {"name": name, "op": "passthrough", **linked})
        if spec.op == "linear":
            return self._linear(p, spec, name, linked, pool, pool_op)
        return self._conv(p, spec, name, linked, pool, dims)

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
        if spec.act != "none":
            self.report.layer_error(spec, "activate", f"`activate: {spec.raw['activate']}` on a "
                                    "layer without weights has no edgebuild equivalent")
            return False
        return True

    def _check_input_keys(self, p: int, spec: Spec, inputs: list[str]) -> bool:
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
        dim = [spec.in_dim] if is_int(spec.in_dim) else list(spec.in_dim)
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
        default = [self.built.layers[-1]["name"] if self.built.layers else "input"]
        layer = {"name": rname, "op": "reshape", **({} if inputs == default else
                                                      {"inputs": inputs}),
                 "shape": [shape[0], *dim]}
        return [rname] if self._emit(p, layer) else None

    def _out_channels(self, p: int, spec: Spec, kind: str) -> int | None:
        if p in self.bound:
            weight = self.bound[p].weight
            if spec.op == "conv_transpose2d":  # (in, out / groups, kh, kw)
                return weight.shape[1] * spec.groups if weight.ndim == 4 else weight.shape[0]
            return weight.shape[0]
        if self.checkpoint is not None:
            return None  # unbound weight layer: the count mismatch is reported
        channels, source = self.map_channels(p)
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

    def _conv(self, p: int, spec: Spec, name: str, linked: dict, pool: dict | None,
              dims: int) -> bool:
        out = self._out_channels(p, spec, spec.op)
        if out is None:
            return False
        layer: dict[str, Any] = {"name": name, "op": spec.op, **linked, "out": out,
                                 "kernel": spec.kernel}
        if spec.op == "conv_transpose2d":
            return self._conv_transpose(p, spec, layer, pool)
        if spec.stride != 1:
            if pool is not None:
                self.report.layer_error(spec, "stride", "`stride` other than 1 cannot be "
                                        "combined with pooling")
                return False
            layer["stride"] = spec.stride
        if spec.pad:
            layer["pad"] = spec.pad
        if spec.dilation != 1:
            layer["dilation"] = spec.dilation
        if spec.groups != 1:
            layer["groups"] = spec.groups
        if p in self.bound and self.bound[p].bias is None:
            layer["bias"] = False
        if spec.act != "none":
            layer["act"] = spec.act
        if pool is not None:
            layer["pool"] = pool
        if spec.wide:
            layer["wide"] = True
        if spec.op == "conv1d" and self.built.shapes[first_input(linked, self.built)].__len__() != 2:
            self.report.layer_error(spec, "op", "Conv1d needs a 1-D input (channels x length); "
                                    "this input is 2-D (add `in_dim: L` with L = height x "
                                    "width to read it as 1-D)")
            return False
        if not self._emit(p, layer):
            return False
        return self._bind(p, spec, layer)

    def _conv_transpose(self, p: int, spec: Spec, layer: dict, pool: dict | None) -> bool:
        """ConvTranspose2d: stride 2 and output padding 1 are the hardware's (the op's
        defaults), `pad` 1 is the default of both; dilation and groups are not documented
        for it, so they stay edgebuild's 1 unless given (limits.py reports them)."""
        if spec.stride not in (1, 2):
            self.report.layer_error(spec, "stride", (
                f"`stride: {spec.stride}` on a ConvTranspose2d layer: the hardware always "
                "upsamples by 2 (omit the key, or write 1)"))
            return False
        for key, value, default in (("pad", spec.pad, 1), ("dilation", spec.dilation, 1),
                                    ("groups", spec.groups, 1), ("act", spec.act, "none")):
            if value != default:
                layer[key] = value
        if p in self.bound and self.bound[p].bias is None:
            layer["bias"] = False
        if pool is not None:
            layer["pool"] = pool
        if spec.wide:
            layer["wide"] = True
        if not self._emit(p, layer):
            return False
        return self._bind(p, spec, layer)

    def _linear(self, p: int, spec: Spec, name: str, linked: dict, pool: dict | None,
                pool_op: str) -> bool:
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
        flatten = len(shape) > 1
        if flatten and not spec.flatten and math.prod(shape[1:]) != 1:
            self.report.layer_error(spec, "flatten", (
                f"a linear layer on a {list(shape)} input needs `flatten: true`"))
            return False
        out = self._out_channels(p, spec, "linear")
        if out is None:
            return False
        layer: dict[str, Any] = {"name": name, "op": "linear", **linked, "out": out}
        if flatten:
            layer["flatten"] = True
        if p in self.bound and self.bound[p].bias is None:
            layer["bias"] = False
        if spec.act != "none":
            layer["act"] = spec.act
        if spec.wide:
            layer["wide"] = True
        if not self._emit(p, layer):
            return False
        return self._bind(p, spec, layer)

    # -- checking a checkpoint layer against its description --
    def _bind(self, p: int, spec: Spec, layer: dict) -> bool:
        if p not in self.bound:
            if spec.quantization is not None and spec.quantization != 8:
                self.built.weight_bits[layer["name"]] = spec.quantization
            if spec.output_shift is not None and not spec.wide:
                self.built.shifts_ignored.append(layer["name"])
            return True
        if self.stop_binding:
            return False
        ck = self.bound[p]
        w = ck.weight
        in_name = (layer.get("inputs") or [self.built.layers[-2]["name"]
                                           if len(self.built.layers) > 1 else "input"])[0]
        in_shape = self.built.shapes[in_name]
        what = f"is bound to checkpoint layer {ck.name!r} ({ck.key} {list(w.shape)}), but"
        problems = []
        kind = {4: "conv2d", 3: "conv1d", 2: "linear"}.get(w.ndim, f"{w.ndim}-D")
        transposed = layer["op"] == "conv_transpose2d"  # weights (in, out / groups, kh, kw)
        w_in = w.shape[0] if transposed else w.shape[1] * spec.groups
        w_out = w.shape[1] * spec.groups if transposed else w.shape[0]
        if kind != ("conv2d" if transposed else layer["op"]):
            problems.append(f"the description makes it {layer['op']} and the checkpoint "
                            f"layer is {kind}")
        elif kind != "linear":
            kernel = layer["kernel"] if isinstance(layer["kernel"], tuple) else \
                ((layer["kernel"],) * (w.ndim - 2))
            if tuple(w.shape[2:]) != tuple(kernel):
                problems.append(f"its kernel is {'x'.join(map(str, kernel))} in the description "
                                f"and {'x'.join(map(str, w.shape[2:]))} in the checkpoint")
            elif w_in != in_shape[0]:
                problems.append(f"the checkpoint layer takes {w_in} input "
                                f"channels and the description feeds it {in_shape[0]} "
                                f"(from {in_name})")
        elif w.shape[1] != math.prod(in_shape):
            problems.append(f"the checkpoint layer takes {w.shape[1]} inputs and the "
                            f"description feeds it {math.prod(in_shape)} ({list(in_shape)} "
                            f"from {in_name}{', flattened' if len(in_shape) > 1 else ''})")
        if not problems:
            in_c = in_shape[0]
            if popcount(spec.processors) > in_c:
                problems.append(f"its processors {spec.processors:#018x} "
                                f"({popcount(spec.processors)}) expect more than the {in_c} "
                                "input channels the checkpoint gives")
            if spec.output_processors is not None and popcount(spec.output_processors) > w_out:
                problems.append(f"its output_processors {spec.output_processors:#018x} "
                                f"({popcount(spec.output_processors)}) expect more than the "
                                f"{w_out} output channels the checkpoint gives")
            if spec.out_channels is not None and spec.out_channels != w_out:
                problems.append(f"out_channels is {spec.out_channels} and the checkpoint gives "
                                f"{w_out}")
        if problems:
            for problem in problems:
                self.report.layer_error(spec, None, f"{layer['op']} layer {what} {problem}; "
                                        "the description and the checkpoint do not match")
            self.stop_binding = True
            return False
        return self._quantize(p, spec, layer, ck)

    def _quantize(self, p: int, spec: Spec, layer: dict, ck: CheckpointLayer) -> bool:
        import numpy as np

        from edgebuild.core.numerics import weight_limits

        name = layer["name"]
        bits = ck.weight_bits
        if bits is not None and bits not in (1, 2, 4, 8):
            self.report.layer_error(spec, None, f"checkpoint {ck.name}.weight_bits is {bits}; "
                                    "edgebuild imports 1, 2, 4 or 8-bit weights")
            return False
        if spec.quantization is not None:
            if bits is not None and spec.quantization != bits:
                self.report.layer_error(spec, "quantization", (
                    f"`quantization: {spec.quantization}` but the checkpoint's {ck.name} was "
                    f"trained with {bits}-bit weights"))
                return False
            bits = spec.quantization
        if bits is None:
            bits = next(b for b in (1, 2, 4, 8) if _fits(ck.weight, b) or b == 8)
            self.report.layer_warn(spec, None, f"the checkpoint has no {ck.name}.weight_bits; "
                                   f"{bits}-bit weights assumed from their range")
        low, high = weight_limits(bits)
        if ck.weight.min() < low or ck.weight.max() > high:
            self.report.layer_error(spec, None, (
                f"checkpoint weights {ck.key} span [{ck.weight.min()}, {ck.weight.max()}], "
                f"outside the {bits}-bit range [{low}, {high}]"))
            return False
        shift = ck.output_shift if ck.output_shift is not None else 0
        if spec.output_shift is not None and spec.output_shift != shift:
            self.report.layer_warn(spec, "output_shift", (
                f"`output_shift: {spec.output_shift}` overrides the checkpoint's {shift} (as in "
                "the toolchain)"))
            shift = spec.output_shift
        total = shift + 8 - bits
        if not (OUTPUT_SHIFT_RANGE[0] <= total <= OUTPUT_SHIFT_RANGE[1]) and not spec.wide:
            self.report.layer_error(spec, "output_shift" if spec.output_shift is not None else None, (
                f"output shift {shift} with {bits}-bit weights gives a device shift of {total}, "
                f"outside {list(OUTPUT_SHIFT_RANGE)}"))
            return False
        arrays = self.built.weights
        arrays[f"{name}.weight"] = ck.weight.astype(np.int8)
        arrays[f"{name}.scale_exp"] = np.array(shift, dtype=np.int64)
        arrays[f"{name}.bits"] = np.array(bits, dtype=np.int64)
        if ck.bias is not None:
            stored_bits = ck.weight_bits if ck.weight_bits is not None else 8
            bias8 = np.floor_divide(ck.bias, 1 << (stored_bits - 1))
            if bias8.min() < -128 or bias8.max() > 127:
                self.report.layer_error(spec, None, (
                    f"checkpoint bias {ck.bias_key} spans [{bias8.min()}, {bias8.max()}] after "
                    f"division by 2^{stored_bits - 1}; the device stores 8-bit biases "
                    "[-128, 127]"))
                return False
            arrays[f"{name}.bias"] = (bias8 * 128).astype(np.int32)
        return True

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
        default = (1 << processors_needed(channels)) - 1
        entry = self.built.placement[last.name]
        if spec.output_processors is not None and spec.output_processors != value:
            self.report.warn((written,), f"`output_map` {value:#018x} overrides the last layer's "
                             f"output_processors {spec.output_processors:#018x}")
        if value != default or spec.output_processors is not None:
            entry["output_processors"] = value


def _fits(weight, bits: int) -> bool:
    from edgebuild.core.numerics import weight_limits

    low, high = weight_limits(bits)
    return bool(weight.min() >= low and weight.max() <= high)
