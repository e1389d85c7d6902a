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
_OPS = {"conv2d": "conv2d", "conv1d": "conv1d", "convtranspose2d": "conv_transpose2d",
        "none": "none", "passthrough": "none", "linear": "linear", "fc": "linear",
        "mlp": "linear", "add": "add"}
_OPS_UNSUPPORTED = {
    "convtranspose1d": "1-D transposed convolution has no edgebuild equivalent (edgebuild "
                       "has conv_transpose2d)",
    "sub": "element-wise subtraction has no edgebuild equivalent (edgebuild has `add`)",
    "xor": "element-wise XOR has no edgebuild equivalent (edgebuild has `add`)",
    "or": "element-wise OR has no edgebuild equivalent (edgebuild has `add`)",
}
_ACTIVATIONS = {"relu": "relu", "abs": "abs", "none": "none"}


def parse_layer(report: Reporter, index: int, raw: Any) -> Spec | None:
    if not isinstance(raw, dict):
        report.error(("layers", index), f"layer {index}: expected a mapping of keys "
                     f"(processors, op, ...), got {type(raw).__name__}")
        return None
    keys: dict[str, str] = {}
    values: dict[str, Any] = {}
    spec = Spec(index=index, keys=keys, raw=values)
    for written, value in raw.items():
        key = str(written).lower()
        key = _SYNONYMS.get(key, key)
        if key in _LAYER_UNSUPPORTED:
            report.error(("layers", index, written), f"layer {index}: `{written}`: "
                         f"{_LAYER_UNSUPPORTED[key]}")
            continue
        if key in _LAYER_IGNORED:
            report.warn(("layers", index, written), f"layer {index}: `{written}` ignored "
                        f"({_LAYER_IGNORED[key]}; it does not change what is computed)")
            continue
        if key not in _LAYER_KEYS:
            report.error(("layers", index, written), f"layer {index}: unknown key "
                         f"{str(written)!r} (allowed: {', '.join(sorted(_LAYER_KEYS))})")
            continue
        if key in keys:
            report.error(("layers", index, written), f"layer {index}: `{written}` repeats "
                         f"`{keys[key]}` (synonyms)")
            continue
        keys[key] = written
        values[key] = value
    _parse_values(report, spec, values)
    return spec


def _parse_values(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    bad = report.layer_error

    if "name" in v:
        if isinstance(v["name"], str | int) and str(v["name"]).strip():
            spec.yaml_name = str(v["name"]).strip()
            if spec.yaml_name.lower() in ("input", "stop"):
                bad(spec, "name", f"name {spec.yaml_name!r} is reserved (input, stop)")
        else:
            bad(spec, "name", "`name` must be a string")
    if "op" in v:
        text = str(v["op"]).strip().lower() if v["op"] is not None else "none"
        if text in _OPS_UNSUPPORTED:
            bad(spec, "op", f"operation {v['op']!r}: {_OPS_UNSUPPORTED[text]}")
        elif text not in _OPS:
            bad(spec, "op", f"unknown operation {v['op']!r} (allowed: Conv1d, Conv2d, "
                f"ConvTranspose2d, None, Passthrough, Linear, FC, MLP, Add, Sub, Xor, Or; "
                "edgebuild imports all but Sub, Xor and Or)")
        elif _OPS[text] == "add":
            spec.op, spec.eltwise = "none", "add"
        else:
            spec.op = _OPS[text]
    else:
        report.layer_warn(spec, None, "no `op`; Conv2d assumed (as the toolchain does)")
    if "eltwise" in v:
        text = str(v["eltwise"]).strip().lower()
        if text == "add":
            spec.eltwise = "add"
        elif text in ("sub", "xor", "or"):
            bad(spec, "eltwise", f"eltwise {v['eltwise']!r}: {_OPS_UNSUPPORTED[text]}")
        else:
            bad(spec, "eltwise", f"unknown eltwise {v['eltwise']!r} (allowed: add, sub, xor, "
                "or; edgebuild imports add)")
    if "activate" in v:
        text = str(v["activate"]).strip().lower() if v["activate"] is not None else "none"
        if text in _ACTIVATIONS:
            spec.act = _ACTIVATIONS[text]
        else:
            bad(spec, "activate", f"unknown activation {v['activate']!r} (allowed: ReLU, Abs, "
                "None)")
    for key in ("max_pool", "avg_pool"):
        if key in v:
            size = pair_or_int(v[key])
            if size is None:
                bad(spec, key, f"`{key}` must be a positive integer or [H, W], got {v[key]!r}")
            elif spec.pool is not None:
                bad(spec, key, "`max_pool` and `avg_pool` cannot both be given")
            else:
                spec.pool = ("max" if key == "max_pool" else "avg", size, None)
    if "pool_stride" in v:
        stride = pair_or_int(v["pool_stride"])
        if stride is None:
            bad(spec, "pool_stride", f"`pool_stride` must be a positive integer or [H, W], "
                f"got {v['pool_stride']!r}")
        elif spec.pool is None:
            report.layer_warn(spec, "pool_stride", "`pool_stride` without pooling is ignored")
        else:
            spec.pool = (spec.pool[0], spec.pool[1], stride)
    elif spec.pool is not None:
        spec.pool = (spec.pool[0], spec.pool[1], 1)
        report.layer_warn(spec, "max_pool" if spec.pool[0] == "max" else "avg_pool",
                          "pooling without `pool_stride` uses the toolchain's default stride 1")
    if "pool_first" in v:
        flag = as_bool(v["pool_first"])
        if flag is None:
            bad(spec, "pool_first", "`pool_first` must be true or false")
        else:
            spec.pool_first = flag
    for key in ("flatten", "streaming"):
        if key in v:
            flag = as_bool(v[key])
            if flag is None:
                bad(spec, key, f"`{key}` must be true or false")
            else:
                setattr(spec, key, flag)
    if "output_width" in v:
        if v["output_width"] in (8, 32) and is_int(v["output_width"]):
            spec.wide = v["output_width"] == 32
        else:
            bad(spec, "output_width", f"`output_width` must be 8 or 32, got {v['output_width']!r}")
    for key in ("processors", "output_processors"):
        if key in v:
            value = parse_processor_map(v[key])
            if value is None:
                bad(spec, key, f"`{key}` {v[key]!r} is not a processor map: a 64-bit hex "
                    "number with at least one bit set, such as 0x0000.0000.0000.0ff0")
            setattr(spec, key, value)
    if "processors" not in v:
        bad(spec, None, "`processors` is missing (every layer names the processors that read "
            "its input, e.g. processors: 0x0000000000000001)")
    for key in ("in_offset", "out_offset"):
        if key in v:
            value = parse_offset(v[key])
            if value is None:
                bad(spec, key, f"`{key}` must be a byte offset such as 0x2000, got {v[key]!r}")
            setattr(spec, key, value)
    if "data_format" in v:
        text = str(v["data_format"]).strip().lower()
        formats = {"hwc": "HWC", "little": "HWC", "chw": "CHW", "big": "CHW"}
        if text not in formats:
            bad(spec, "data_format", f"`data_format` must be HWC (little) or CHW (big), got "
                f"{v['data_format']!r}")
        elif spec.index != 0:
            report.layer_warn(spec, "data_format", "`data_format` only applies to the first "
                              "layer; ignored")
        else:
            spec.data_format = formats[text]
    for key, low, high in (("write_gap", 0, 64), ("read_gap", 0, 64), ("groups", 1, 65536),
                           ("operands", 2, 16),
                           ("in_channels", 1, 65536), ("out_channels", 1, 65536),
                           ("stride", 1, 64), ("pad", 0, 64)):
        if key not in v:
            continue
        value = v[key]
        if key == "stride" and isinstance(value, list) and len(value) == 2 \
                and value[0] == value[1]:
            value = value[0]
        if not is_int(value) or not low <= value <= high:
            bad(spec, key, f"`{key}` must be an integer from {low} to {high}, got {v[key]!r}")
            continue
        setattr(spec, key, value)
    if "dilation" in v:
        value = pair_or_int(v["dilation"])
        if value is None:
            bad(spec, "dilation", f"`dilation` must be a positive integer, got {v['dilation']!r}")
        else:
            spec.dilation = value
    if "bias_group" in v:
        value = v["bias_group"]
        if is_int(value) and value >= 0:
            spec.bias_group = value
        elif isinstance(value, list) and value and all(is_int(g) and g >= 0 for g in value):
            spec.bias_group = list(value)
        else:
            bad(spec, "bias_group", f"`bias_group` must be a quadrant number or a list of them, "
                f"got {value!r}")
    if "quantization" in v:
        value = v["quantization"]
        if isinstance(value, str) and value.strip().lower() in ("bin", "binary"):
            bad(spec, "quantization", "binary (-1/+1) weights have no edgebuild equivalent "
                "(edgebuild weights are 1, 2, 4 or 8-bit two's complement)")
        elif is_int(value) and value in (1, 2, 4, 8):
            spec.quantization = value
        else:
            bad(spec, "quantization", f"`quantization` must be 1, 2, 4 or 8, got {value!r}")
    if "output_shift" in v:
        if is_int(v["output_shift"]) and -22 <= v["output_shift"] <= 15:
            spec.output_shift = v["output_shift"]
        else:
            bad(spec, "output_shift", f"`output_shift` must be an integer from -15 to 15 (8-bit "
                f"weights), got {v['output_shift']!r}")
    if "in_sequences" in v:
        value = v["in_sequences"]
        spec.refs = list(value) if isinstance(value, list) else [value]
        if not spec.refs:
            bad(spec, "in_sequences", "`in_sequences` is empty")
    if "in_dim" in v:
        value = v["in_dim"]
        if is_int(value) or isinstance(value, list) and 1 <= len(value) <= 2 \
                and all(is_int(x) for x in value):
            spec.in_dim = value
        else:
            bad(spec, "in_dim", f"`in_dim` must be an integer or [H, W], got {value!r}")
    if "output" in v and as_bool(v["output"]) is None:
        bad(spec, "output", "`output` must be true or false")
    for key in ("buffer_shift", "buffer_insert"):
        if key in v:
            if v[key] == 1 and is_int(v[key]):
                setattr(spec, key, 1)
            else:
                bad(spec, key, f"`{key}: {v[key]!r}`: edgebuild's buffer moves by one frame per "
                    f"inference, so `{key}` must be 1")
    _parse_kernel(report, spec, v)


def _parse_kernel(report: Reporter, spec: Spec, v: dict[str, Any]) -> None:
    bad = report.layer_error
    value = v.get("kernel_size")
    if spec.op in ("conv2d", "conv_transpose2d"):
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
                bad(spec, "kernel_size", f"`kernel_size` for {what} is written 3x3 or 1x1, got "
                    f"{value!r}")
        if spec.pad is None:
            spec.pad = 1
    elif spec.op == "conv1d":
        spec.kernel = 9  # the toolchain's 1-D default
        if value is not None:
            text = str(value).strip().lower()
            match = re.fullmatch(r"(\d+)(?:\s*x\s*1)?", text)
            if match and 1 <= int(match.group(1)) <= 64:
                spec.kernel = int(match.group(1))
            else:
                bad(spec, "kernel_size", f"`kernel_size` for Conv1d is an integer (1 to 9), got "
                    f"{value!r}")
        if spec.pad is None:
            spec.pad = 3
    else:
        if value is not None and str(value).strip().lower() not in ("1", "1x1"):
            what = "a linear layer" if spec.op == "linear" else "a layer without convolution"
            bad(spec, "kernel_size", f"`kernel_size` {value!r} does not apply to {what}")
        if spec.pad:
            what = "a linear layer" if spec.op == "linear" else "a passthrough layer"
            bad(spec, "pad", f"`pad: {spec.pad}` is not allowed on {what} (only 0)")
        for key in ("dilation", "groups", "stride"):
            if key in v and v[key] not in (1, [1, 1]):
                bad(spec, key, f"`{key}` needs a convolution (this layer is "
                    f"{'linear' if spec.op == 'linear' else 'a passthrough'})")
        spec.pad = 0
