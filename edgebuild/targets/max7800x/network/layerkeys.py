"""One layer of the network description: its keys (synonyms, unsupported and ignored ones)
and their values, read into a `Spec`.

Defaults are the manual's: Conv2d and ConvTranspose2d 3x3 with pad 1, Conv1d pad 3 (kernel
9, the toolchain's), no activation, pool stride 1, 8-bit output. A ConvTranspose2d layer's
`stride` key, if given, must be 1 (or 2, PyTorch's spelling): the hardware always upsamples
by 2.
"""

from __future__ import annotations

import re
from typing import Any

from edgebuild.core.document import shown
from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.spec import Reporter, Spec
from edgebuild.targets.max7800x.network.values import (
    as_bool,
    is_int,
    pair_or_int,
    parse_offset,
    parse_processor_map,
)

_LAYER_KEYS = (
    "name", "sequence", "next_sequence", "processors", "output_processors", "in_offset",
    "out_offset", "output_width", "data_format", "op", "eltwise", "dilation", "groups",
    "pool_first", "operands", "activate", "quantization", "output_shift", "kernel_size",
    "stride", "pad", "max_pool", "avg_pool", "pool_stride", "in_channels", "in_dim",
    "in_sequences", "out_channels", "streaming", "flatten", "write_gap", "read_gap",
    "bias_group", "output", "buffer_shift", "buffer_insert",
)
_SYNONYMS = {"operation": "op", "operator": "op", "convolution": "op",
             "activation": "activate", "conv_groups": "groups"}
_LAYER_UNSUPPORTED = {
    "in_skip": "skipping input rows has no edgebuild equivalent",
    "in_channel_skip": "skipping input channels has no edgebuild equivalent",
    "bypass": "bypassing a layer's weights has no edgebuild equivalent",
    "snoop_sequence": "snoop sequences have no edgebuild equivalent",
    "simulated_sequence": "simulated sequences have no edgebuild equivalent",
    "pool_dilation": "dilated pooling has no edgebuild equivalent",
    "output_pad": "`output_pad` is not a documented key: transposed convolutions always use "
                  "the hardware's output padding 1 (remove the key)",
}
_LAYER_IGNORED = {  # performance knobs that do not change what is computed
    "calcx4": "a kernel-memory arrangement option", "readahead": "a data read option",
    "tcalc": "a timing option",
}
_OPS_UNSUPPORTED = {
    "convtranspose1d": "1-D transposed convolution has no edgebuild equivalent (edgebuild "
                       "has conv_transpose2d)",
    "sub": "element-wise subtraction has no edgebuild equivalent (edgebuild has `add`)",
    "xor": "element-wise XOR has no edgebuild equivalent (edgebuild has `add`)",
    "or": "element-wise OR has no edgebuild equivalent (edgebuild has `add`)",
}
_ACTIVATIONS = {"relu": "relu", "abs": "abs", "none": "none"}


def parse_layer(report: Reporter, index: int, raw: Any) -> Spec | None:
    """Layer `index` as a `Spec`; every problem is reported (None: not a mapping at all)."""
    if not isinstance(raw, dict):
        report.error(("layers", index), f"layer {index}: expected a mapping of keys "
                     f"(processors, op, ...), got {type(raw).__name__}")
        return None
    spec = Spec(index=index, keys={}, raw={})
    for written, value in raw.items():
        key = str(written).lower()
        key = _SYNONYMS.get(key, key)
        if _accepted(report, spec, key, written):
            spec.keys[key] = written
            spec.raw[key] = value
    for parse in _VALUE_PARSERS:  # in this order: later keys read what earlier ones set
        parse(report, spec, spec.raw)
    return spec


def _accepted(report: Reporter, spec: Spec, key: str, written: Any) -> bool:
    """Whether a key is read: unsupported, unknown and repeated keys are errors, keys that
    do not change what is computed are ignored with a warning."""
    index = spec.index
    if key in _LAYER_UNSUPPORTED:
        report.error(("layers", index, written), f"layer {index}: `{written}`: "
                     f"{_LAYER_UNSUPPORTED[key]}")
        return False
    if key in _LAYER_IGNORED:
        report.warn(("layers", index, written), f"layer {index}: `{written}` ignored "
                    f"({_LAYER_IGNORED[key]}; it does not change what is computed)")
        return False
    if key not in _LAYER_KEYS:
        report.error(("layers", index, written), f"layer {index}: unknown key "
                     f"{shown(str(written))} (allowed: {', '.join(sorted(_LAYER_KEYS))})")
        return False
    if key in spec.keys:
        report.error(("layers", index, written), f"layer {index}: `{written}` repeats "
                     f"`{spec.keys[key]}` (synonyms)")
        return False
    return True


def _name(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`name`, by which `in_sequences` may refer to the layer (input and stop are words
    those references use)."""
    if "name" not in v:
        return
    if isinstance(v["name"], str | int) and str(v["name"]).strip():
        spec.yaml_name = str(v["name"]).strip()
        if spec.yaml_name.lower() in ("input", "stop"):
            report.layer_error(spec, "name", f"name {spec.yaml_name!r} is reserved (input, "
                               "stop)")
    else:
        report.layer_error(spec, "name", "`name` must be a string")


def _op(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`op`: `Add` is a layer without convolution that adds its inputs (`eltwise: add`)."""
    if "op" not in v:
        report.layer_warn(spec, None, "no `op`; Conv2d assumed (as the toolchain does)")
        return
    text = str(v["op"]).strip().lower() if v["op"] is not None else "none"
    if text in _OPS_UNSUPPORTED:
        report.layer_error(spec, "op", f"operation {v['op']!r}: {_OPS_UNSUPPORTED[text]}")
    elif text not in vocabulary.description_ops():
        report.layer_error(spec, "op", f"unknown operation {v['op']!r} (allowed: Conv1d, "
                           "Conv2d, ConvTranspose2d, None, Passthrough, Linear, FC, MLP, Add, "
                           "Sub, Xor, Or; edgebuild imports all but Sub, Xor and Or)")
    else:
        op, eltwise = vocabulary.imported_op(text)
        spec.op = op
        if eltwise is not None:
            spec.eltwise = eltwise


def _eltwise(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`eltwise`: edgebuild has an element-wise add, no sub, xor or or."""
    if "eltwise" not in v:
        return
    text = str(v["eltwise"]).strip().lower()
    if text == "add":
        spec.eltwise = "add"
    elif text in ("sub", "xor", "or"):
        report.layer_error(spec, "eltwise", f"eltwise {v['eltwise']!r}: "
                           f"{_OPS_UNSUPPORTED[text]}")
    else:
        report.layer_error(spec, "eltwise", f"unknown eltwise {v['eltwise']!r} (allowed: add, "
                           "sub, xor, or; edgebuild imports add)")


def _activation(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`activate` (or `activation`): ReLU, Abs or None."""
    if "activate" not in v:
        return
    text = str(v["activate"]).strip().lower() if v["activate"] is not None else "none"
    if text in _ACTIVATIONS:
        spec.act = _ACTIVATIONS[text]
    else:
        report.layer_error(spec, "activate", f"unknown activation {v['activate']!r} (allowed: "
                           "ReLU, Abs, None)")


def _pool(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`max_pool` or `avg_pool` (one of them): the window; its stride comes next."""
    for key in ("max_pool", "avg_pool"):
        if key not in v:
            continue
        size = pair_or_int(v[key])
        if size is None:
            report.layer_error(spec, key, f"`{key}` must be a positive integer or [H, W], got "
                               f"{v[key]!r}")
        elif spec.pool is not None:
            report.layer_error(spec, key, "`max_pool` and `avg_pool` cannot both be given")
        else:
            spec.pool = ("max" if key == "max_pool" else "avg", size, None)


def _pool_stride(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`pool_stride`; without it a pooling layer uses the toolchain's default stride 1 (not
    the window size, as PyTorch would), so that is said."""
    if "pool_stride" in v:
        stride = pair_or_int(v["pool_stride"])
        if stride is None:
            report.layer_error(spec, "pool_stride", "`pool_stride` must be a positive integer "
                               f"or [H, W], got {v['pool_stride']!r}")
        elif spec.pool is None:
            report.layer_warn(spec, "pool_stride", "`pool_stride` without pooling is ignored")
        else:
            spec.pool = (spec.pool[0], spec.pool[1], stride)
    elif spec.pool is not None:
        spec.pool = (spec.pool[0], spec.pool[1], 1)
        report.layer_warn(spec, "max_pool" if spec.pool[0] == "max" else "avg_pool",
                          "pooling without `pool_stride` uses the toolchain's default stride 1")


def _flags(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """The true/false keys (1 and 0 as the toolchain also reads them)."""
    for key in ("pool_first", "flatten", "streaming"):
        if key in v:
            flag = as_bool(v[key])
            if flag is None:
                report.layer_error(spec, key, f"`{key}` must be true or false")
            else:
                setattr(spec, key, flag)


def _output_width(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`output_width: 32` is edgebuild's `wide` output (no shift, no activation)."""
    if "output_width" not in v:
        return
    if v["output_width"] in (8, 32) and is_int(v["output_width"]):
        spec.wide = v["output_width"] == 32
    else:
        report.layer_error(spec, "output_width", "`output_width` must be 8 or 32, got "
                           f"{v['output_width']!r}")


def _processor_maps(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`processors` (required) and `output_processors`."""
    for key in ("processors", "output_processors"):
        if key in v:
            value = parse_processor_map(v[key])
            if value is None:
                report.layer_error(spec, key, f"`{key}` {v[key]!r} is not a processor map: a "
                                   "64-bit hex number with at least one bit set, such as "
                                   "0x0000.0000.0000.0ff0")
            setattr(spec, key, value)
    if "processors" not in v:
        report.layer_error(spec, None, "`processors` is missing (every layer names the "
                           "processors that read its input, e.g. processors: "
                           "0x0000000000000001)")


def _offsets(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`in_offset` and `out_offset`: byte offsets into the data memory instances."""
    for key in ("in_offset", "out_offset"):
        if key in v:
            value = parse_offset(v[key])
            if value is None:
                report.layer_error(spec, key, f"`{key}` must be a byte offset such as 0x2000, "
                                   f"got {v[key]!r}")
            setattr(spec, key, value)


_FORMATS = {"hwc": "HWC", "little": "HWC", "chw": "CHW", "big": "CHW"}


def _data_format(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`data_format` only means something for the model input, so only on the first layer."""
    if "data_format" not in v:
        return
    text = str(v["data_format"]).strip().lower()
    if text not in _FORMATS:
        report.layer_error(spec, "data_format", "`data_format` must be HWC (little) or CHW "
                           f"(big), got {v['data_format']!r}")
    elif spec.index != 0:
        report.layer_warn(spec, "data_format", "`data_format` only applies to the first "
                          "layer; ignored")
    else:
        spec.data_format = _FORMATS[text]


_INTEGERS = (("write_gap", 0, 64), ("read_gap", 0, 64), ("groups", 1, 65536),
             ("operands", 2, 16), ("in_channels", 1, 65536), ("out_channels", 1, 65536),
             ("stride", 1, 64), ("pad", 0, 64))


def _integers(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """The integer keys, each within the bounds of `_INTEGERS` (a square stride may be
    written [s, s])."""
    for key, low, high in _INTEGERS:
        if key not in v:
            continue
        value = v[key]
        if key == "stride" and isinstance(value, list) and len(value) == 2 \
                and value[0] == value[1]:
            value = value[0]
        if not is_int(value) or not low <= value <= high:
            report.layer_error(spec, key, f"`{key}` must be an integer from {low} to {high}, "
                               f"got {v[key]!r}")
            continue
        setattr(spec, key, value)


def _dilation(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`dilation`: one value or [H, W]."""
    if "dilation" not in v:
        return
    value = pair_or_int(v["dilation"])
    if value is None:
        report.layer_error(spec, "dilation", "`dilation` must be a positive integer, got "
                           f"{v['dilation']!r}")
    else:
        spec.dilation = value


def _bias_group(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`bias_group`: the quadrant(s) whose bias memory may hold the layer's bias."""
    if "bias_group" not in v:
        return
    value = v["bias_group"]
    if is_int(value) and value >= 0:
        spec.bias_group = value
    elif isinstance(value, list) and value and all(is_int(g) and g >= 0 for g in value):
        spec.bias_group = list(value)
    else:
        report.layer_error(spec, "bias_group", "`bias_group` must be a quadrant number or a "
                           f"list of them, got {value!r}")


def _quantization(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`quantization`: the weight width; binary weights have no edgebuild equivalent."""
    if "quantization" not in v:
        return
    value = v["quantization"]
    if isinstance(value, str) and value.strip().lower() in ("bin", "binary"):
        report.layer_error(spec, "quantization", "binary (-1/+1) weights have no edgebuild "
                           "equivalent (edgebuild weights are 1, 2, 4 or 8-bit two's "
                           "complement)")
    elif is_int(value) and value in (1, 2, 4, 8):
        spec.quantization = value
    else:
        report.layer_error(spec, "quantization", "`quantization` must be 1, 2, 4 or 8, got "
                           f"{value!r}")


def _output_shift(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`output_shift`, within what some weight width allows (-22 with 1-bit weights up
    to 15 with 8-bit ones, for a total shift of [-15, 15]); the device's own range is
    checked once the device and the weight width are known (binding)."""
    if "output_shift" not in v:
        return
    if is_int(v["output_shift"]) and -22 <= v["output_shift"] <= 15:
        spec.output_shift = v["output_shift"]
    else:
        report.layer_error(spec, "output_shift", "`output_shift` must be an integer from -15 "
                           f"to 15 (8-bit weights), got {v['output_shift']!r}")


def _references(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`in_sequences` as written (resolved once every layer is read) and `in_dim`."""
    if "in_sequences" in v:
        value = v["in_sequences"]
        spec.refs = list(value) if isinstance(value, list) else [value]
        if not spec.refs:
            report.layer_error(spec, "in_sequences", "`in_sequences` is empty")
    if "in_dim" in v:
        value = v["in_dim"]
        if is_int(value) or isinstance(value, list) and 1 <= len(value) <= 2 \
                and all(is_int(x) for x in value):
            spec.in_dim = value
        else:
            report.layer_error(spec, "in_dim", f"`in_dim` must be an integer or [H, W], got "
                               f"{value!r}")


def _output_and_buffer(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`output` (checked once the last layer is known) and the data buffer keys."""
    if "output" in v and as_bool(v["output"]) is None:
        report.layer_error(spec, "output", "`output` must be true or false")
    for key in ("buffer_shift", "buffer_insert"):
        if key in v:
            if v[key] == 1 and is_int(v[key]):
                setattr(spec, key, 1)
            else:
                report.layer_error(spec, key, f"`{key}: {v[key]!r}`: edgebuild's buffer moves "
                                   f"by one frame per inference, so `{key}` must be 1")


def _kernel(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """`kernel_size` and the default `pad`, which depend on the operation."""
    if spec.op in ("conv2d", "conv_transpose2d"):
        _kernel_2d(report, spec, v.get("kernel_size"))
    elif spec.op == "conv1d":
        _kernel_1d(report, spec, v.get("kernel_size"))
    else:
        _no_kernel(report, spec, v)


def _kernel_2d(report: Reporter, spec: Spec, value: Any) -> None:
    """3x3 unless given as `HxW`, one size or [H, W]; pad 1 unless given."""
    spec.kernel = 3
    if value is not None:
        text = str(value).strip().lower()
        match = re.fullmatch(r"(\d+)\s*x\s*(\d+)", text)
        if match:
            kh, kw = int(match.group(1)), int(match.group(2))
            spec.kernel = kh if kh == kw else (kh, kw)
        elif pair_or_int(value) is not None:
            spec.kernel = pair_or_int(value)
        else:
            what = "Conv2d" if spec.op == "conv2d" else "ConvTranspose2d"
            report.layer_error(spec, "kernel_size", f"`kernel_size` for {what} is written 3x3 "
                               f"or 1x1, got {value!r}")
    if spec.pad is None:
        spec.pad = 1


def _kernel_1d(report: Reporter, spec: Spec, value: Any) -> None:
    """9 (the toolchain's 1-D default) unless given as `K` or `Kx1`; pad 3 unless given."""
    spec.kernel = 9
    if value is not None:
        text = str(value).strip().lower()
        match = re.fullmatch(r"(\d+)(?:\s*x\s*1)?", text)
        if match and 1 <= int(match.group(1)) <= 64:
            spec.kernel = int(match.group(1))
        else:
            report.layer_error(spec, "kernel_size", "`kernel_size` for Conv1d is an integer "
                               f"(1 to 9), got {value!r}")
    if spec.pad is None:
        spec.pad = 3


def _no_kernel(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    """A linear or passthrough layer: convolution keys only at their neutral values."""
    value = v.get("kernel_size")
    if value is not None and str(value).strip().lower() not in ("1", "1x1"):
        what = "a linear layer" if spec.op == "linear" else "a layer without convolution"
        report.layer_error(spec, "kernel_size", f"`kernel_size` {value!r} does not apply to "
                           f"{what}")
    if spec.pad:
        what = "a linear layer" if spec.op == "linear" else "a passthrough layer"
        report.layer_error(spec, "pad", f"`pad: {spec.pad}` is not allowed on {what} (only 0)")
    for key in ("dilation", "groups", "stride"):
        if key in v and v[key] not in (1, [1, 1]):
            report.layer_error(spec, key, f"`{key}` needs a convolution (this layer is "
                               f"{'linear' if spec.op == 'linear' else 'a passthrough'})")
    spec.pad = 0


_VALUE_PARSERS = (_name, _op, _eltwise, _activation, _pool, _pool_stride, _flags, _output_width,
                  _processor_maps, _offsets, _data_format, _integers, _dilation, _bias_group,
                  _quantization, _output_shift, _references, _output_and_buffer, _kernel)
