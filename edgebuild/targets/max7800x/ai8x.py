"""Import and export MAX78000/MAX78002 network descriptions (the ai8x-synthesis YAML format).

`import_network` reads a network description ("sidecar" YAML: one record per hardware layer
with its operation, pooling, processors and data memory offsets), optionally the quantized
ai8x-training checkpoint, a sample input and the toolchain's known answer, and writes an
edgebuild manifest: `model.layers` (what is computed), `placement` (where it runs),
`model.weights` (the checkpoint's integer weights as `weights.npz`) and `kat`.

`export_network` goes the other way: a manifest plus its resolved placement (one entry per
hardware layer) becomes a network description the toolchain reads.

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

Input shape: the `input_shape` argument, else the sample's shape, else the dataset named in
the file (checked against the checkpoint's first layer when there is one). Known datasets
(`DATASETS`):

| dataset | sample shape | classes |
|---|---|---|
| MNIST, FashionMNIST | 1 x 28 x 28 | 10 |
| CIFAR10 | 3 x 32 x 32 | 10 |
| CIFAR100 | 3 x 32 x 32 | 100 |
| KWS_20 | 128 x 128 (1-D: 128 channels x 128 samples) | 21 |

The class count names the outputs of a last linear (or 32-bit output) layer when nothing
else does (with a warning).

Defaults are the manual's: Conv2d and ConvTranspose2d 3x3 with pad 1, Conv1d pad 3 (kernel
9, the toolchain's), no activation, pool stride 1, 8-bit output. A ConvTranspose2d layer's
`stride` key, if given, must be 1 (or 2, PyTorch's spelling): the hardware always upsamples
by 2. Its checkpoint weights keep PyTorch's (in, out, 3, 3) layout, as edgebuild's.

Checkpoint arithmetic (see the manual's "Number Format" and the toolchain's checkpoint
reader): weights are stored as integers; a layer's bias b is used as
`floor(b / 2**(weight_bits - 1))` (an int8) times 128 in the accumulator; the layer's
`output_shift` is edgebuild's weight scale exponent (device total shift
`output_shift + 8 - weight_bits`, edgebuild shift `scale_exp - (bits - 1)`: the same scaling).
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.core.fields import C_KEYWORDS
from edgebuild.targets.max7800x.hwlayer import CONCAT_READERS

DATASETS: dict[str, tuple[tuple[int, ...], int]] = {
    "mnist": ((1, 28, 28), 10),
    "fashionmnist": ((1, 28, 28), 10),
    "cifar10": ((3, 32, 32), 10),
    "cifar100": ((3, 32, 32), 100),
    "kws20": ((128, 128), 21),
}

PROCESSORS = 64
MAX_PASSES = 16
OUTPUT_SHIFT_RANGE = (-15, 15)  # total device shift output_shift + 8 - weight_bits
WEIGHT_OPS = ("conv1d", "conv2d", "conv_transpose2d", "linear")
NAME_LIMIT = 48

# ---- the network description's vocabulary ----------------------------------------------

_GLOBAL_KEYS = ("arch", "dataset", "layers", "output_map", "bias", "weights", "data_buffer")
_GLOBAL_UNSUPPORTED = {
    "unload": "a custom `unload` (copying outputs in a chosen shape) has no edgebuild "
              "equivalent; edgebuild unloads the last layer",
    "snoop": "snoop registers have no edgebuild equivalent",
}
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
_HEX = re.compile(r"^(0x)?[0-9a-f][0-9a-f._]*$", re.IGNORECASE)


@dataclass(frozen=True)
class HardwareLayer:
    """One layer of the network description and the edgebuild layers that implement it
    (the last member produces its output and carries its name and placement)."""

    index: int
    name: str
    op: str  # conv2d, conv1d, conv_transpose2d, linear, passthrough, pool, add, concat
    members: tuple[str, ...]


@dataclass
class ImportResult:
    manifest: Path
    weights: Path | None
    kat_input: Path | None
    kat_expected: Path | None
    warnings: list[str]
    hardware_layers: list[HardwareLayer]
    kat_matches: bool | None = None  # the integer reference reproduces the known answer


@dataclass
class _Spec:
    """One layer of the network description, normalized (keys lower case, synonyms merged,
    values parsed); `keys` maps each normalized key to the key as written (for positions)."""

    index: int
    keys: dict[str, str]
    raw: dict[str, Any]
    seq: int = 0
    yaml_name: str | None = None
    op: str = "conv2d"
    eltwise: str | None = None
    kernel: Any = None
    pad: int | None = None
    stride: int = 1
    dilation: Any = 1
    groups: int = 1
    pool: tuple[str, Any, Any] | None = None  # mode, size, stride
    pool_first: bool = True
    act: str = "none"
    flatten: bool = False
    wide: bool = False
    refs: list[Any] | None = None
    inputs: list[int] = field(default_factory=list)  # spec positions; -1 = the model input
    operands: int | None = None
    processors: int | None = None
    output_processors: int | None = None
    in_offset: int | None = None
    out_offset: int | None = None
    data_format: str | None = None
    write_gap: int | None = None
    read_gap: int | None = None
    bias_group: Any = None
    streaming: bool = False
    in_channels: int | None = None
    out_channels: int | None = None
    in_dim: Any = None
    quantization: int | None = None
    output_shift: int | None = None
    buffer_shift: int | None = None  # shifts a data buffer (the buffer layer's hardware layer)
    buffer_insert: int | None = None  # writes its output into a data buffer's newest word
    length: int | None = None  # op "buffer" (made from a data_buffer entry): frames kept


@dataclass(frozen=True)
class _DataBuffer:
    """One `data_buffer` entry: `dim` words per channel at `offset`, on `processors`."""

    index: int
    name: str
    processors: int
    dim: int
    channels: int
    offset: int


class _Reporter:
    """Collects every problem of the network description (errors and warnings)."""

    def __init__(self, document: yamlsource.Document):
        self.document = document
        self.errors: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []

    def _diag(self, loc: tuple, message: str) -> Diagnostic:
        return self.document.diagnostic(loc, message)

    def error(self, loc: tuple, message: str) -> None:
        self.errors.append(self._diag(loc, message))

    def warn(self, loc: tuple, message: str) -> None:
        self.warnings.append(self._diag(loc, message))

    def layer_error(self, spec: _Spec, key: str | None, message: str) -> None:
        self.error(_loc(spec, key), f"layer {spec.index}: {message}")

    def layer_warn(self, spec: _Spec, key: str | None, message: str) -> None:
        self.warn(_loc(spec, key), f"layer {spec.index}: {message}")

    def raise_errors(self) -> None:
        if self.errors:
            ordered = sorted(self.errors, key=lambda d: (d.line or 0, d.col or 0))
            raise UserError(ordered)


def _loc(spec: _Spec, key: str | None) -> tuple:
    if key is None:
        return ("layers", spec.index)
    return ("layers", spec.index, spec.keys.get(key, key))


# ---- small value parsers (each returns None after reporting) -----------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_processor_map(value: Any) -> int | None:
    """A 64-bit processor map: an int or a hex string (dots, underscores, `0x` ignored)."""
    if isinstance(value, str):
        text = value.strip()
        if not _HEX.match(text):
            return None
        value = int(text.lower().removeprefix("0x").replace(".", "").replace("_", ""), 16)
    if _is_int(value) and 0 < value < 1 << PROCESSORS:
        return value
    return None


def _offset(value: Any) -> int | None:
    if isinstance(value, str) and _HEX.match(value.strip()):
        value = int(value.strip().lower().removeprefix("0x").replace(".", "").replace("_", ""), 16)
    return value if _is_int(value) and 0 <= value <= 1 << 24 else None


def _pair_or_int(value: Any) -> Any:
    """2 -> 2, [2, 2] -> 2, [2, 3] -> (2, 3); None when it is neither."""
    if _is_int(value) and value >= 1:
        return value
    if isinstance(value, list) and len(value) == 2 and all(_is_int(v) and v >= 1 for v in value):
        return value[0] if value[0] == value[1] else (value[0], value[1])
    return None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return None


def popcount(value: int | None) -> int:
    return 0 if value is None else bin(value).count("1")


def processors_needed(channels: int) -> int:
    """Processors the toolchain uses for `channels` (multi-pass above 64 channels: the
    channels per pass, rounded up to a multiple of 4)."""
    if channels <= PROCESSORS:
        return channels
    passes = math.ceil(channels / PROCESSORS)
    per_pass = math.ceil(channels / passes)
    return (per_pass + 3) // 4 * 4


def _dataset_key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower()) if name is not None else ""


# ---- parsing the description ---------------------------------------------------------------

def _parse_layer(report: _Reporter, index: int, raw: Any) -> _Spec | None:
    if not isinstance(raw, dict):
        report.error(("layers", index), f"layer {index}: expected a mapping of keys "
                     f"(processors, op, ...), got {type(raw).__name__}")
        return None
    keys: dict[str, str] = {}
    values: dict[str, Any] = {}
    spec = _Spec(index=index, keys=keys, raw=values)
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


def _parse_values(report: _Reporter, spec: _Spec, v: dict[str, Any]) -> None:
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
            size = _pair_or_int(v[key])
            if size is None:
                bad(spec, key, f"`{key}` must be a positive integer or [H, W], got {v[key]!r}")
            elif spec.pool is not None:
                bad(spec, key, "`max_pool` and `avg_pool` cannot both be given")
            else:
                spec.pool = ("max" if key == "max_pool" else "avg", size, None)
    if "pool_stride" in v:
        stride = _pair_or_int(v["pool_stride"])
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
        flag = _bool(v["pool_first"])
        if flag is None:
            bad(spec, "pool_first", "`pool_first` must be true or false")
        else:
            spec.pool_first = flag
    for key in ("flatten", "streaming"):
        if key in v:
            flag = _bool(v[key])
            if flag is None:
                bad(spec, key, f"`{key}` must be true or false")
            else:
                setattr(spec, key, flag)
    if "output_width" in v:
        if v["output_width"] in (8, 32) and _is_int(v["output_width"]):
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
            value = _offset(v[key])
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
        if not _is_int(value) or not low <= value <= high:
            bad(spec, key, f"`{key}` must be an integer from {low} to {high}, got {v[key]!r}")
            continue
        setattr(spec, key, value)
    if "dilation" in v:
        value = _pair_or_int(v["dilation"])
        if value is None:
            bad(spec, "dilation", f"`dilation` must be a positive integer, got {v['dilation']!r}")
        else:
            spec.dilation = value
    if "bias_group" in v:
        value = v["bias_group"]
        if _is_int(value) and value >= 0:
            spec.bias_group = value
        elif isinstance(value, list) and value and all(_is_int(g) and g >= 0 for g in value):
            spec.bias_group = list(value)
        else:
            bad(spec, "bias_group", f"`bias_group` must be a quadrant number or a list of them, "
                f"got {value!r}")
    if "quantization" in v:
        value = v["quantization"]
        if isinstance(value, str) and value.strip().lower() in ("bin", "binary"):
            bad(spec, "quantization", "binary (-1/+1) weights have no edgebuild equivalent "
                "(edgebuild weights are 1, 2, 4 or 8-bit two's complement)")
        elif _is_int(value) and value in (1, 2, 4, 8):
            spec.quantization = value
        else:
            bad(spec, "quantization", f"`quantization` must be 1, 2, 4 or 8, got {value!r}")
    if "output_shift" in v:
        if _is_int(v["output_shift"]) and -22 <= v["output_shift"] <= 15:
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
        if _is_int(value) or isinstance(value, list) and 1 <= len(value) <= 2 \
                and all(_is_int(x) for x in value):
            spec.in_dim = value
        else:
            bad(spec, "in_dim", f"`in_dim` must be an integer or [H, W], got {value!r}")
    if "output" in v and _bool(v["output"]) is None:
        bad(spec, "output", "`output` must be true or false")
    for key in ("buffer_shift", "buffer_insert"):
        if key in v:
            if v[key] == 1 and _is_int(v[key]):
                setattr(spec, key, 1)
            else:
                bad(spec, key, f"`{key}: {v[key]!r}`: edgebuild's buffer moves by one frame per "
                    f"inference, so `{key}` must be 1")
    _parse_kernel(report, spec, v)


def _parse_kernel(report: _Reporter, spec: _Spec, v: dict[str, Any]) -> None:
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
            elif _pair_or_int(value) is not None:
                spec.kernel = _pair_or_int(value)
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


def _parse(path: Path) -> tuple[yamlsource.Document, _Reporter, dict, list[_Spec]]:
    document = yamlsource.load(path)
    report = _Reporter(document)
    data = document.data
    if not isinstance(data, dict):
        raise UserError(document.diagnostic((), "a network description is a mapping with "
                                                "`arch`, `dataset` and `layers`"))
    top: dict[str, Any] = {}
    buffers: dict[str, _DataBuffer] = {}
    for written, value in data.items():
        key = str(written).lower()
        if key == "data_buffer":
            buffers = _data_buffers(report, written, value)
        if key in _GLOBAL_UNSUPPORTED:
            report.error((written,), f"`{written}`: {_GLOBAL_UNSUPPORTED[key]}")
        elif key in ("bias", "weights"):
            report.warn((written,), f"`{written}` ignored (test data only in the toolchain; "
                        "weights come from the checkpoint)")
        elif key not in _GLOBAL_KEYS:
            report.error((written,), f"unknown key {str(written)!r} (allowed: "
                         f"{', '.join(k for k in _GLOBAL_KEYS)})")
        else:
            top[key] = (written, value)
    layers = top.get("layers", (None, None))[1]
    if not isinstance(layers, list) or not layers:
        report.error(((top["layers"][0],) if "layers" in top else ()),
                     "`layers` must be a non-empty list of layer descriptions")
        report.raise_errors()
    specs = [s for i, raw in enumerate(layers) if (s := _parse_layer(report, i, raw))]
    if "output_map" in top:
        value = parse_processor_map(top["output_map"][1])
        if value is None:
            report.error((top["output_map"][0],), f"`output_map` {top['output_map'][1]!r} is "
                         "not a processor map such as 0x0000000000000ff0")
        top["output_map"] = (top["output_map"][0], value)
    _order(report, specs, buffers)
    _check_output_flags(report, specs)
    return document, report, top, specs


_BUFFER_KEYS = ("name", "processors", "dim", "channels", "offset")


def _data_buffers(report: _Reporter, written: str, value: Any) -> dict[str, _DataBuffer]:
    """The `data_buffer` entries by name, each checked (every problem reported)."""
    items = value if isinstance(value, list) else [value]
    found: dict[str, _DataBuffer] = {}
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
                  "offset": _offset(raw["offset"]),
                  "dim": raw["dim"] if _is_int(raw["dim"]) and 2 <= raw["dim"] <= 1024 else None,
                  "channels": raw["channels"] if _is_int(raw["channels"])
                  and 1 <= raw["channels"] <= PROCESSORS else None}
        allowed = {"processors": "a processor map such as 0xffffffff00000000",
                   "offset": "a byte offset such as 0x7fc4",
                   "dim": "the number of frames kept, 2 to 1024",
                   "channels": f"1 to {PROCESSORS} (one pass)"}
        bad = [key for key, v in parsed.items() if v is None]
        for key in bad:
            report.error((*loc, keys[key]), f"data_buffer {i}: `{keys[key]}` {raw[key]!r} "
                         f"must be {allowed[key]}")
        name = str(raw["name"]).strip()
        if name in found or name.lower() in ("input", "stop"):
            report.error((*loc, keys["name"]), f"data_buffer {i}: name {name!r} is reserved or "
                         "used twice")
        elif not bad:
            found[name] = _DataBuffer(i, name, parsed["processors"], parsed["dim"],
                                      parsed["channels"], parsed["offset"])
    return found


def _buffer_layers(report: _Reporter, specs: list[_Spec],
                   buffers: dict[str, _DataBuffer]) -> list[_Spec]:
    """Each data buffer as one edgebuild `buffer` layer, right after the layer with
    `buffer_insert` that writes its newest frame; the `buffer_shift` layer that moves it
    becomes that layer's hardware layer (its placement keys move to it)."""
    shifts: dict[str, _Spec] = {}
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
    out: list[_Spec] = []
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


def _inserted_into(report: _Reporter, spec: _Spec,
                   buffers: dict[str, _DataBuffer]) -> _DataBuffer | None:
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


def _buffer_spec(report: _Reporter, buffer: _DataBuffer, shift: _Spec | None,
                 producer: _Spec) -> _Spec:
    """The synthetic spec of an edgebuild `buffer` layer (op "buffer")."""
    spec = _Spec(index=shift.index if shift is not None else producer.index, keys={}, raw={})
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


def _order(report: _Reporter, specs: list[_Spec], buffers: dict[str, _DataBuffer] | None = None
           ) -> None:
    """Sequence numbers (default: previous + 1), then data buffers, then `in_sequences` and
    `next_sequence`."""
    buffers = buffers or {}
    seq = 0
    by_seq: dict[int, _Spec] = {}
    for spec in specs:
        if "sequence" in spec.raw:
            if _is_int(spec.raw["sequence"]) and spec.raw["sequence"] >= 0:
                seq = spec.raw["sequence"]
            else:
                report.layer_error(spec, "sequence", "`sequence` must be a non-negative integer")
        if seq in by_seq:
            report.layer_error(spec, "sequence", f"sequence {seq} is already used by layer "
                               f"{by_seq[seq].index}")
        spec.seq = seq
        by_seq.setdefault(seq, spec)
        seq += 1
    if [s.seq for s in specs] != sorted(s.seq for s in specs):
        specs.sort(key=lambda s: s.seq)
    if buffers or any(s.buffer_shift or s.buffer_insert for s in specs):
        specs[:] = _buffer_layers(report, specs, buffers)
        kept = {id(s) for s in specs}
        by_seq = {seq: s for seq, s in by_seq.items() if id(s) in kept}
    position = {id(s): p for p, s in enumerate(specs)}
    names: dict[str, _Spec] = {}
    for spec in specs:
        if spec.yaml_name is not None:
            if spec.yaml_name in names:
                report.layer_error(spec, "name", f"name {spec.yaml_name!r} is already used by "
                                   f"layer {names[spec.yaml_name].index}")
            names.setdefault(spec.yaml_name, spec)
    for p, spec in enumerate(specs):
        if spec.refs is None:
            spec.inputs = [p - 1]
        else:
            spec.inputs = []
            for ref in spec.refs:
                target = _resolve(ref, by_seq, names)
                if target is None:
                    report.layer_error(spec, "in_sequences", f"in_sequences entry {ref!r} names "
                                       "no layer (use a layer number, a layer name, -1 or input)")
                elif target != -1 and position[id(target)] >= p:
                    report.layer_error(spec, "in_sequences", f"in_sequences entry {ref!r} is not "
                                       "an earlier layer; edgebuild runs layers in order")
                else:
                    spec.inputs.append(-1 if target == -1 else position[id(target)])
        if "next_sequence" in spec.raw:
            ref = spec.raw["next_sequence"]
            following = specs[p + 1] if p + 1 < len(specs) else None
            stop = isinstance(ref, str) and ref.strip().lower() == "stop"
            target = None if stop else _resolve(ref, by_seq, names)
            if not (stop and following is None or target is not None and target is following):
                report.layer_error(spec, "next_sequence", f"next_sequence {ref!r} changes the "
                                   "order in which layers run; edgebuild runs them in sequence "
                                   "order (remove the key)")


def _resolve(ref: Any, by_seq: dict[int, _Spec], names: dict[str, _Spec]) -> _Spec | int | None:
    if _is_int(ref):
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


# ---- the checkpoint ---------------------------------------------------------------------

@dataclass(frozen=True)
class _CheckpointLayer:
    name: str  # module name, e.g. conv1
    key: str  # e.g. conv1.op.weight
    weight: Any  # numpy int64
    bias: Any | None  # numpy int64 (raw stored value) or None
    bias_key: str | None
    output_shift: int | None
    weight_bits: int | None


def _load_checkpoint(path: Path) -> tuple[dict, str | None]:
    """torch.load with weights_only=True: tensors, plain data and the optimizer classes
    ai8x-training pickles (as class references; no code runs)."""
    import pickle

    import torch

    display = str(path)
    if not path.is_file():
        raise UserError(Diagnostic(display, "checkpoint file not found"))
    allowed = [getattr(torch.optim, name) for name in (
        "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam")
        if hasattr(torch.optim, name)]
    try:
        with torch.serialization.safe_globals(allowed):
            data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        hint = next((line.strip() for line in first if "GLOBAL" in line), first[0] if first else "")
        hint = hint.rstrip(". ")
        raise UserError(Diagnostic(display, f"the checkpoint cannot be loaded safely: {hint}. "
                                            "edgebuild loads tensors, plain data and optimizer "
                                            "classes only; re-save the checkpoint with just "
                                            "`state_dict` and `arch`")) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise UserError(Diagnostic(display, f"not a PyTorch checkpoint: {exc}")) from None
    if isinstance(data, dict) and "state_dict" in data:
        state, arch = data["state_dict"], data.get("arch")
    elif isinstance(data, dict) and data and all(torch.is_tensor(t) for t in data.values()):
        state, arch = data, None
    else:
        raise UserError(Diagnostic(display, "the checkpoint has no `state_dict`"))
    if not isinstance(state, dict):
        raise UserError(Diagnostic(display, "the checkpoint's `state_dict` is not a mapping"))
    return state, arch if isinstance(arch, str) else None


def _checkpoint_layers(path: Path, state: dict) -> list[_CheckpointLayer]:
    import numpy as np
    import torch

    display = str(path)
    problems: list[Diagnostic] = []
    layers = []
    for key, tensor in state.items():
        if not isinstance(key, str) or not key.endswith(".weight") or not torch.is_tensor(tensor):
            continue
        module = key[: -len(".weight")]
        if tensor.dim() < 2:
            problems.append(Diagnostic(display, f"{key} has shape {list(tensor.shape)}: a "
                                                "batchnorm layer? fuse batchnorm into the "
                                                "convolutions before synthesis (the checkpoint "
                                                "must be the quantized one)"))
            continue
        layer = module.rsplit(".", 1)[0] if "." in module else module
        weight = tensor.detach().to(torch.float64).numpy()
        if not np.all(np.isfinite(weight)) or not np.array_equal(weight, np.round(weight)):
            problems.append(Diagnostic(display, f"{key} holds non-integer weights: this is not a "
                                                "quantized checkpoint (run the toolchain's "
                                                "quantize.py, or use the QAT `-q` checkpoint)"))
            continue
        bias_key = f"{module}.bias"
        bias = state.get(bias_key)
        if bias is not None:
            bias = bias.detach().to(torch.float64).numpy()
            if not np.array_equal(bias, np.round(bias)):
                problems.append(Diagnostic(display, f"{bias_key} holds non-integer values: this "
                                                    "is not a quantized checkpoint"))
                continue
            bias = bias.astype(np.int64)
        layers.append(_CheckpointLayer(
            layer, key, weight.astype(np.int64), bias, bias_key if bias is not None else None,
            _scalar(state.get(f"{layer}.output_shift")), _scalar(state.get(f"{layer}.weight_bits"))))
    if problems:
        raise UserError(problems)
    if not layers:
        raise UserError(Diagnostic(display, "the checkpoint's state_dict holds no layer weights "
                                            "(keys such as conv1.op.weight)"))
    return layers


def _scalar(tensor: Any) -> int | None:
    if tensor is None:
        return None
    values = tensor.detach().flatten().tolist()
    return int(round(values[0])) if len(values) == 1 else None


# ---- names -------------------------------------------------------------------------------

def identifier(text: str, used: set[str], limit: int = NAME_LIMIT) -> str:
    """A valid, unused edgebuild layer name made from `text`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "l"
    if not name[0].isalpha():
        name = "l" + name
    name = name[:limit]
    if name in C_KEYWORDS or name == "input":
        name = name[: limit - 1] + "_"
    base, n = name, 2
    while name in used:
        suffix = f"_{n}"
        name = base[: limit - len(suffix)] + suffix
        n += 1
    used.add(name)
    return name


# ---- building the edgebuild model ------------------------------------------------------------

@dataclass
class _Built:
    layers: list[dict] = field(default_factory=list)
    origin: list[int] = field(default_factory=list)  # spec position of every layer
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    hardware: list[HardwareLayer] = field(default_factory=list)
    placement: dict[str, dict] = field(default_factory=dict)
    weights: dict[str, Any] = field(default_factory=dict)
    from_maps: list[str] = field(default_factory=list)  # layers whose channels came from maps
    weight_bits: dict[str, int] = field(default_factory=dict)  # `quantization`, no checkpoint
    shifts_ignored: list[str] = field(default_factory=list)  # `output_shift`, no checkpoint


class _Importer:
    def __init__(self, report: _Reporter, top: dict, specs: list[_Spec], classes: int | None,
                 checkpoint: list[_CheckpointLayer] | None, checkpoint_path: Path | None):
        self.report = report
        self.top = top
        self.specs = specs
        self.classes = classes
        self.checkpoint = checkpoint
        self.checkpoint_path = checkpoint_path
        self.built = _Built()
        self.used: set[str] = {"input"}
        self.names: list[str] = []  # primary (output) name per spec position
        self.failed: set[int] = set()
        self.bound: dict[int, _CheckpointLayer] = {}
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
    def build(self, input_shape: tuple[int, ...]) -> _Built:
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
                    spec.index, name, _hw_op(group), tuple(layer["name"] for layer in group)))
                self.built.placement[name] = _placement(spec, g == 0, g == len(groups) - 1)
        self._output_map()
        return self.built

    def _emit(self, p: int, layer: dict) -> bool:
        """Append one layer after checking it and inferring its output shape."""
        from pydantic import TypeAdapter, ValidationError

        from edgebuild.core.geometry import ShapeError
        from edgebuild.ops import OPS, Layer

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

    def _layer(self, p: int, spec: _Spec) -> bool:
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
            if dims == 1 and (not _is_int(size) or not _is_int(stride)):
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

    def _buffer(self, p: int, spec: _Spec, name: str, inputs: list[str]) -> bool:
        """A data buffer: its producer's per-frame output (C channels, one value each)."""
        shape = self.built.shapes[inputs[0]]
        if shape[0] != spec.in_channels:
            self.report.layer_error(spec, None, f"data buffer {name!r} has {spec.in_channels} "
                                    f"channels, but {inputs[0]!r}, which inserts into it, writes "
                                    f"{shape[0]}")
            return False
        return self._emit(p, {"name": name, "op": "buffer", "length": spec.length})

    def _no_act(self, spec: _Spec) -> bool:
        if spec.act != "none":
            self.report.layer_error(spec, "activate", f"`activate: {spec.raw['activate']}` on a "
                                    "layer without weights has no edgebuild equivalent")
            return False
        return True

    def _check_input_keys(self, p: int, spec: _Spec, inputs: list[str]) -> bool:
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

    def _in_dim(self, p: int, spec: _Spec, name: str, inputs: list[str]) -> list[str] | None:
        """The layer's inputs after `in_dim`: a reshape layer when it changes the shape."""
        if spec.in_dim is None:
            return inputs
        shape = self.built.shapes[inputs[0]]
        dim = [spec.in_dim] if _is_int(spec.in_dim) else list(spec.in_dim)
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

    def _out_channels(self, p: int, spec: _Spec, kind: str) -> int | None:
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

    def _conv(self, p: int, spec: _Spec, name: str, linked: dict, pool: dict | None,
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
        if spec.op == "conv1d" and self.built.shapes[_first(linked, self.built)].__len__() != 2:
            self.report.layer_error(spec, "op", "Conv1d needs a 1-D input (channels x length); "
                                    "this input is 2-D (add `in_dim: L` with L = height x "
                                    "width to read it as 1-D)")
            return False
        if not self._emit(p, layer):
            return False
        return self._bind(p, spec, layer)

    def _conv_transpose(self, p: int, spec: _Spec, layer: dict, pool: dict | None) -> bool:
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

    def _linear(self, p: int, spec: _Spec, name: str, linked: dict, pool: dict | None,
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
        shape = self.built.shapes[_first(linked, self.built)]
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
    def _bind(self, p: int, spec: _Spec, layer: dict) -> bool:
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

    def _quantize(self, p: int, spec: _Spec, layer: dict, ck: _CheckpointLayer) -> bool:
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


def _first(linked: dict, built: _Built) -> str:
    return (linked.get("inputs") or [built.layers[-1]["name"] if built.layers else "input"])[0]


def _fits(weight, bits: int) -> bool:
    from edgebuild.core.numerics import weight_limits

    low, high = weight_limits(bits)
    return bool(weight.min() >= low and weight.max() <= high)


def _hw_op(layers: list[dict]) -> str:
    ops = [layer["op"] for layer in layers]
    for compute in WEIGHT_OPS:
        if compute in ops:
            return compute
    last = ops[-1]
    return {"pool1d": "pool", "pool2d": "pool"}.get(last, last)


def hardware_groups(layers: list[dict]) -> list[list[dict]]:
    """The edgebuild layers of one network layer, cut into hardware layers: an `add` without
    activation runs in-flight in the conv2d right after it that reads it, the layer after
    an `in_dim` reshape reads through it, and a layer that can read a concatenation reads
    the concat in front of it directly (see edgebuild.targets.max7800x.hwlayer); every other layer (a pool of
    each operand, the pool before a linear layer) is a hardware layer of its own."""
    groups: list[list[dict]] = []
    for layer in layers:
        previous = groups[-1][-1] if groups else None
        reads_previous = previous is not None and \
            (layer.get("inputs") or [previous["name"]]) == [previous["name"]]
        inflight = previous is not None and previous["op"] == "add" and "act" not in previous \
            and layer["op"] == "conv2d"
        concat = previous is not None and previous["op"] == "concat" \
            and layer["op"] in CONCAT_READERS
        if reads_previous and (inflight or concat or previous["op"] == "reshape"):
            groups[-1].append(layer)
        else:
            groups.append([layer])
    return groups


_INPUT_KEYS = ("in_offset", "data_format", "read_gap")
_OUTPUT_KEYS = ("output_processors", "out_offset", "write_gap", "bias_group")


def _placement(spec: _Spec, first: bool = True, last: bool = True) -> dict:
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


def map_channels(specs: list[_Spec], p: int, output_map: int | None,
                 classes: int | None) -> tuple[int | None, str]:
    """Output channels of layer `p` from the description alone: (count, source).

    Exact sources first (`out_channels`, depthwise `groups`, a consumer's `in_channels` or
    depthwise `groups`), then the processor maps (one channel per processor: the largest of
    the layer's output_processors and its consumers' processors), then for the last layer
    the global output_map and, when it is a classifier (linear, or a 32-bit output), the
    dataset's class count."""
    spec = specs[p]
    if spec.out_channels is not None:
        return spec.out_channels, "out_channels"
    if spec.groups > 1:
        return spec.groups, "groups"
    consumers = [c for c in specs[p + 1:] if p in c.inputs]
    for consumer in consumers:
        if consumer.in_channels is not None and (len(consumer.inputs) == 1 or consumer.eltwise):
            return consumer.in_channels, "in_channels"
        if consumer.groups > 1 and (len(consumer.inputs) == 1 or consumer.eltwise):
            return consumer.groups, "groups"
    bounds = [popcount(spec.output_processors)] if spec.output_processors is not None else []
    bounds += [popcount(c.processors) for c in consumers
               if c.processors is not None and (len(c.inputs) == 1 or c.eltwise)]
    last = p == len(specs) - 1
    if last and output_map is not None and spec.output_processors is None:
        bounds.append(popcount(output_map))
    classifier = last and classes is not None and (spec.op == "linear" or spec.wide)
    if bounds:
        count = max(bounds)
        if classifier and processors_needed(classes) == count:
            return classes, "dataset"
        return count, "processors"
    if classifier:
        return classes, "dataset"
    return None, ""


# ---- the manifest text -------------------------------------------------------------------

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "none", "y", "n"}


def _scalar_text(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if key in ("processors", "output_processors"):
            return f"0x{value:016x}"
        if key in ("in_offset", "out_offset"):
            return f"0x{value:04x}"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED_WORDS:
        return text
    import json

    return json.dumps(text)


def flow(value: Any, key: str = "") -> str:
    """YAML flow text of plain data (mappings keep their order)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v, k)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v, key) for v in value) + "]"
    return _scalar_text(value, key)


def _manifest_text(manifest: dict, header: list[str], notes: dict[str, str]) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    lines.append(f"name: {manifest['name']}")
    model = manifest["model"]
    lines.append("model:")
    lines.append(f"  input: {flow(list(model['input']))}")
    if "weights" in model:
        lines.append(f"  weights: {_scalar_text(model['weights'])}")
    lines.append("  layers:")
    for layer in model["layers"]:
        note = notes.get(layer["name"])
        lines.append(f"    - {flow(layer)}" + (f"  # {note}" if note else ""))
    if manifest.get("qat"):
        lines.append("qat:")
        lines.append("  overrides:  # the description's `quantization` (weight bits)")
        for name, entry in manifest["qat"]["overrides"].items():
            lines.append(f"    {name}: {flow(entry)}")
    lines.append("target:")
    lines.append(f"  device: {manifest['target']['device']}")
    if manifest.get("placement"):
        lines.append("placement:")
        for name, entry in manifest["placement"].items():
            lines.append(f"  {name}: {flow(entry)}")
    if manifest.get("kat"):
        lines.append(f"kat: {flow(manifest['kat'])}")
    return "\n".join(lines) + "\n"


# ---- the public entry points ---------------------------------------------------------------

def _device(device: str | None, arch: str | None, path: Path) -> tuple[str, str | None]:
    from edgebuild.targets.max7800x.profile import DEVICE_NAMES

    if device is not None:
        text = device.strip().lower()
        if text not in DEVICE_NAMES:
            raise UserError(f"--device {device!r}: a network description runs on "
                            f"{' or '.join(DEVICE_NAMES)}")
        return text, None
    for source in (arch or "", path.stem):
        lowered = source.lower()
        if lowered.startswith("ai87"):
            return "max78002", f"device max78002 from {source!r} (ai87 = MAX78002)"
        if lowered.startswith("ai85"):
            return "max78000", None
    return "max78000", None


def _input_shape(input_shape, sample_array, checkpoint, top, report, path) -> tuple[int, ...]:
    if input_shape is not None:
        shape = tuple(int(d) for d in input_shape)
        if not 1 <= len(shape) <= 3 or any(d < 1 for d in shape):
            raise UserError(f"--input {list(input_shape)}: give C,L or C,H,W (positive integers)")
        return shape
    if sample_array is not None:  # one sample (C, H, W) / (C, L), or a batch of images
        return tuple(sample_array.shape[1:] if sample_array.ndim == 4 else sample_array.shape)
    written, dataset = top.get("dataset", (None, None))
    known = DATASETS.get(_dataset_key(dataset))
    if known is not None:
        shape = known[0]
        if checkpoint is not None and checkpoint[0].weight.shape[1] != shape[0] \
                and checkpoint[0].weight.ndim > 2:
            raise UserError(report.document.diagnostic((written,), (
                f"dataset {dataset} has {shape[0]}-channel samples but the checkpoint's first "
                f"layer takes {checkpoint[0].weight.shape[1]} channels; pass --input C,H,W")))
        report.warn((written,), f"input shape {list(shape)} from the dataset {dataset}")
        return shape
    raise UserError(report.document.diagnostic((written,) if written else (), (
        f"the input shape is unknown (dataset {dataset!r} is not one of "
        f"{', '.join(sorted(DATASETS))}); pass --input C,H,W (or C,L), or a --sample")))


def _load_npy(path: Path, what: str):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UserError(Diagnostic(str(path), f"{what} file not found")) from None
    except (ValueError, OSError) as exc:
        raise UserError(Diagnostic(str(path), f"{what} is not a .npy array: {exc}")) from None


def _check_sample(path: Path, array, shape: tuple[int, ...]) -> None:
    import numpy as np

    problems = []
    if tuple(array.shape) != shape and tuple(array.shape[1:]) != shape:
        problems.append(f"has shape {list(array.shape)}; the model input is {list(shape)} (one "
                        "sample, or a batch of them)")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
            and np.array_equal(array, np.round(array))):
        problems.append(f"holds {array.dtype} values; expected integers")
    elif array.size and (array.min() < -128 or array.max() > 127):
        problems.append(f"spans [{array.min()}, {array.max()}]; inputs are int8 values "
                        "[-128, 127]")
    if problems:
        raise UserError([Diagnostic(str(path), f"sample {p}") for p in problems])


def import_network(network_yaml: Path, *, checkpoint: Path | None = None,
                   sample: Path | None = None, expected: Path | None = None,
                   device: str | None = None, name: str | None = None,
                   input_shape: tuple | None = None, out_dir: Path = Path(".")) -> ImportResult:
    """Write `out_dir/<name>.yaml` (and `<name>/weights.npz`, the KAT files) from a network
    description; every problem of the description is reported at once as a `UserError`."""
    from pydantic import ValidationError

    from edgebuild.core.fields import _identifier
    from edgebuild.manifest import Manifest
    from edgebuild.model import folding
    from edgebuild.model import graph as graphs

    network_yaml, out_dir = Path(network_yaml), Path(out_dir)
    document, report, top, specs = _parse(network_yaml)
    arch = top.get("arch", (None, None))[1]
    if "arch" not in top:
        report.warn((), "no `arch` (the toolchain requires it)")
    if expected is not None and sample is None:
        raise UserError("--expected needs --sample (the known answer belongs to a sample input)")
    sample_array = _load_npy(sample, "sample") if sample is not None else None
    expected_array = _load_npy(expected, "expected output") if expected is not None else None

    ck_layers = None
    if checkpoint is not None:
        state, ck_arch = _load_checkpoint(Path(checkpoint))
        ck_layers = _checkpoint_layers(Path(checkpoint), state)
        if arch is not None and ck_arch is not None and str(arch).lower() != ck_arch.lower():
            if str(arch).startswith("edgebuild_"):  # exported by edgebuild: a made-up arch
                report.warn((top["arch"][0],), (
                    f"arch {arch!r} (an edgebuild export) is not the checkpoint's {ck_arch!r}; "
                    "the layers are checked against the checkpoint instead"))
            else:
                report.error((top["arch"][0],), (
                    f"arch {arch!r} does not match the checkpoint's arch {ck_arch!r}: the "
                    "description and the checkpoint belong to different networks"))
    report.raise_errors()

    device_name, device_note = _device(device, None if arch is None else str(arch), network_yaml)
    if device_note:
        report.warnings.append(Diagnostic(str(network_yaml), device_note))
    shape = _input_shape(input_shape, sample_array, ck_layers, top, report, network_yaml)
    if sample_array is not None:
        _check_sample(Path(sample), sample_array, shape)
    classes = DATASETS.get(_dataset_key(top.get("dataset", (None, None))[1]), (None, None))[1]

    importer = _Importer(report, top, specs, classes, ck_layers,
                         Path(checkpoint) if checkpoint is not None else None)
    importer.assign_names()
    built = importer.build(shape)
    report.raise_errors()
    if ck_layers is None:
        report.warnings.append(Diagnostic(str(network_yaml), (
            "no checkpoint: the manifest has no weights; add a `dataset:` section so edgebuild "
            "can train it (or import again with --checkpoint)")))
    if built.shifts_ignored:
        report.warnings.append(Diagnostic(str(network_yaml), (
            f"output_shift ignored for {', '.join(built.shifts_ignored)}: without a checkpoint "
            "edgebuild chooses every layer's shift when it quantizes the trained model")))
    if built.from_maps:
        report.warnings.append(Diagnostic(str(network_yaml), (
            "without a checkpoint, output channels come from processor maps (one channel per "
            f"processor) for {', '.join(built.from_maps)}; a layer that runs in several passes "
            "has more: pass --checkpoint or add out_channels")))

    if name is not None:
        manifest_name = name
    else:
        manifest_name = re.sub(r"\W", "_", str(arch if arch is not None else network_yaml.stem))
    try:
        _identifier(manifest_name)
    except ValueError as exc:
        raise UserError(f"manifest name (--name): {exc}") from None
    manifest: dict[str, Any] = {
        "name": manifest_name,
        "model": {"input": list(shape), "layers": built.layers},
        **({"qat": {"overrides": {layer: {"weight_bits": bits}
                                  for layer, bits in built.weight_bits.items()}}}
           if built.weight_bits else {}),
        "target": {"device": device_name},
        "placement": {k: v for k, v in built.placement.items() if v},
    }
    files = out_dir / manifest_name
    weights_path = kat_input = kat_expected = None
    if ck_layers is not None:
        manifest["model"]["weights"] = f"{manifest_name}/weights.npz"
        weights_path = files / "weights.npz"
    if sample is not None:
        kat_input = files / f"input{Path(sample).suffix or '.npy'}"
        manifest["kat"] = {"input": f"{manifest_name}/{kat_input.name}"}
        if expected is not None:
            kat_expected = files / f"expected{Path(expected).suffix or '.npy'}"
            manifest["kat"]["expected"] = f"{manifest_name}/{kat_expected.name}"

    try:
        checked = Manifest.model_validate(manifest)
    except ValidationError as exc:
        raise UserError(_manifest_problems(report, specs, built, exc)) from None
    graph, problems = graphs.build(checked.model.input, checked.model.layers)
    if problems:
        raise UserError([report._diag(("layers", specs[built.origin[p.index]].index),
                                      f"layer {specs[built.origin[p.index]].index}: {p.message}")
                         for p in problems])
    if expected_array is not None:
        out = graph.output.out_shape
        if expected_array.size % math.prod(out):
            raise UserError(Diagnostic(str(expected), (
                f"expected output has shape {list(expected_array.shape)} but the last layer "
                f"outputs {list(out)}")))

    kat_matches = None
    if ck_layers is not None and sample_array is not None and expected_array is not None:
        kat_matches = _kat_check(checked, built.weights, sample_array, expected_array, folding)
        if not kat_matches:
            report.warnings.append(Diagnostic(str(expected), (
                "the integer reference of the imported model does not reproduce the expected "
                "output (different arithmetic, e.g. average pooling, or a mismatched sample?)")))

    def source(path) -> str:  # relative to the manifest, so the text does not name this machine
        try:
            return os.path.relpath(Path(path).resolve(), out_dir.resolve())
        except ValueError:  # another drive
            return str(path)

    header = [
        "Imported by `edgebuild import-ai8x` from the MAX7800x network description "
        f"{source(network_yaml)}",
        *([f"weights: {source(checkpoint)} (quantized checkpoint) -> "
           f"{manifest_name}/weights.npz"]
          if checkpoint is not None else ["no checkpoint: channel counts from processor maps; "
                                          "add a `dataset:` section to train the model"]),
        *([f"known answer: {source(sample)}" + (f" -> {source(expected)}" if expected else "")]
          if sample is not None else []),
        f"arch: {arch}, dataset: {top.get('dataset', (None, None))[1]}, input {list(shape)}",
        "placement: one entry per hardware layer, keyed by the layer that writes its output",
    ]
    notes = {}
    for hw in built.hardware:
        line = report.document.locate(("layers", hw.index))[0]
        notes[hw.name] = f"layer {hw.index}" + (f" (line {line})" if line else "")
    text = _manifest_text(manifest, header, notes)

    manifest_path = out_dir / f"{manifest_name}.yaml"
    outputs: dict[Path, bytes] = {manifest_path: text.encode("utf-8")}
    if weights_path is not None:
        outputs[weights_path] = _npz_bytes(built.weights)
    if kat_input is not None:
        outputs[kat_input] = Path(sample).read_bytes()
    if kat_expected is not None:
        outputs[kat_expected] = Path(expected).read_bytes()
    _write_all(outputs)
    return ImportResult(manifest_path, weights_path, kat_input, kat_expected,
                        [d.render() for d in report.warnings], built.hardware, kat_matches)


def _npz_bytes(weights: dict) -> bytes:
    """The deterministic .npz of `edgebuild.core.arrays.save`; if that writer turns the 0-d
    `bits`/`scale_exp` entries into shape (1,) (np.ascontiguousarray returns ndim >= 1), the
    same format written here with the shapes kept."""
    import zipfile

    import numpy as np

    from edgebuild.core import arrays

    buffer = io.BytesIO()
    arrays.save(buffer, **weights)
    with np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False) as data:
        if all(data[name].shape == np.shape(weights[name]) for name in weights):
            return buffer.getvalue()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(weights):
            entry = io.BytesIO()
            array = np.asarray(weights[name])
            np.lib.format.write_array(entry, array if array.flags.c_contiguous
                                      else np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=arrays.FIXED_TIME)
            info.external_attr = 0o644 << 16
            archive.writestr(info, entry.getvalue())
    return buffer.getvalue()


def _write_all(outputs: dict[Path, bytes]) -> None:
    """Write every file, or none: an existing file with other content is never overwritten
    (delete it, or import under another name or directory)."""
    clashes = [path for path, data in outputs.items()
               if path.exists() and (not path.is_file() or path.read_bytes() != data)]
    if clashes:
        raise UserError([Diagnostic(str(path), "exists with other content; not overwritten "
                                               "(delete it, or choose another --name or -o)")
                         for path in clashes])
    for path, data in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            temp = path.with_name(f".{path.name}.tmp")
            temp.write_bytes(data)
            temp.replace(path)


def _check_output_flags(report: _Reporter, specs: list[_Spec]) -> None:
    for spec in specs[:-1]:
        if _bool(spec.raw.get("output")):
            report.layer_error(spec, "output", "`output: true` on a layer other than the last: "
                               "edgebuild models have one output, the last layer")


def _manifest_problems(report: _Reporter, specs: list[_Spec], built: _Built, exc) -> list:
    out = []
    for error in exc.errors():
        loc = error["loc"]
        message = error["msg"].removeprefix("Value error, ")
        if len(loc) >= 3 and loc[:2] == ("model", "layers") and isinstance(loc[2], int):
            spec = specs[built.origin[loc[2]]]
            out.append(report._diag(("layers", spec.index), f"layer {spec.index}: "
                                    f"{'.'.join(map(str, loc[3:]))}: {message}"))
        elif loc and loc[0] == "placement" and len(loc) > 1:
            spec = next((specs[built.origin[i]] for i, layer in enumerate(built.layers)
                         if layer["name"] == loc[1]), None)
            where = ("layers", spec.index) if spec else ()
            out.append(report._diag(where, f"{'.'.join(map(str, loc[2:]))}: {message}"))
        else:
            out.append(Diagnostic(report.document.path, f"{'.'.join(map(str, loc))}: {message}"))
    return out


def _kat_check(manifest, weights: dict, sample, expected, folding) -> bool:
    import numpy as np

    from edgebuild.model.quantized import QuantizedModel, run_reference
    from edgebuild.ops.operator import QuantParams

    layers, _ = folding.fold_layers(manifest.model.layers)
    params = {}
    for layer in layers:
        if f"{layer.name}.weight" in weights:
            bias = weights.get(f"{layer.name}.bias")
            params[layer.name] = QuantParams(
                weights[f"{layer.name}.weight"].astype(np.int64),
                None if bias is None else bias.astype(np.int64),
                int(weights[f"{layer.name}.scale_exp"]), int(weights[f"{layer.name}.bits"]))
    try:  # the device's rule (MAX7800x: half up, average pooling truncates)
        from edgebuild.targets.numbers import rounding_mode

        rounding = rounding_mode(manifest)
    except (ImportError, AttributeError):
        rounding = "half_up"
    model = QuantizedModel(tuple(manifest.model.input), layers, params, rounding)
    batch = sample if sample.ndim > len(manifest.model.input) else sample[None]
    out = run_reference(model, batch.astype(np.int64))
    return bool(np.array_equal(out.reshape(-1), np.asarray(expected).reshape(-1)))


# ---- export ------------------------------------------------------------------------------------

_ACT_NAMES = {"none": "None", "relu": "ReLU", "abs": "Abs"}


def _quant_rows(quant: dict | None) -> dict[str, dict]:
    """`{name: {"bits", "scale_exp"}}` from either that mapping or a quant.json document
    (`{"layers": [{"name", "bits", "scale_exp", ...}]}`)."""
    if not quant:
        return {}
    if isinstance(quant.get("layers"), list):
        return {row["name"]: row for row in quant["layers"] if isinstance(row, dict)}
    return {name: row for name, row in quant.items() if isinstance(row, dict)}


def _map_value(value: Any, what: str) -> int:
    parsed = parse_processor_map(value)
    if parsed is None:
        raise UserError(f"export: {what} {value!r} is not a processor map")
    return parsed


def export_network(manifest, placement: dict, quant: dict | None = None) -> str:
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
    nodes = {node.name: node for node in graph.nodes}
    by_name = {layer.name: layer for layer in layers}
    hw_layers = list(placement.get("layers") or [])
    if not hw_layers:
        raise UserError("export: the placement has no layers")
    owner: dict[str, str] = {"input": "input"}
    for hw in hw_layers:
        for member in hw.get("members") or ():
            owner[member] = hw["name"]
            owner[alias.get(member, member)] = hw["name"]
    for name, target in alias.items():  # a folded-away layer's readers read its source
        owner.setdefault(name, owner.get(target, target))
    for layer in layers:  # a reshape the device reads through (hwlayer): its source's owner
        if layer.op == "reshape" and layer.name not in owner:
            owner[layer.name] = owner.get(layer.inputs[0], layer.inputs[0])
    rows = _quant_rows(quant)
    producers = _buffer_producers(hw_layers, nodes, owner)
    hw_layers = _shifts_first(hw_layers, producers)
    taken = {hw["name"] for hw in hw_layers}
    records, outputs = [], []
    previous = "input"
    for position, hw in enumerate(hw_layers):
        members = [by_name[alias.get(m, m)] for m in hw.get("members") or ()
                   if alias.get(m, m) in by_name]
        members = list({m.name: m for m in members}.values())
        record, output = _export_layer(hw, members, nodes, owner, previous, position, rows)
        _export_in_dim(record, members, by_name, nodes)
        _export_buffer(record, hw, members, producers, taken, nodes)
        records.append(record)
        outputs.append(output)
        previous = record["name"]
    _export_channels(records, nodes, outputs)
    dataset = manifest.dataset.format if manifest.dataset is not None else "none"
    overwriting = [hw["name"] for hw in hw_layers if hw.get("overwrites_input")]
    lines = [
        "---",
        f"# Exported by edgebuild from manifest {manifest.name!r} for {device}.",
        f"# Input shape: {list(manifest.model.input)} (channels first); import with "
        f"`edgebuild import-ai8x --input {','.join(map(str, manifest.model.input))} "
        f"--device {device}`.",
        *([f"# {', '.join(overwriting)} write over input they have read (checked by "
           "edgebuild): run ai8xize.py with --overlap-data."] if overwriting else []),
        "",
        f"arch: edgebuild_{manifest.name}",
        f"dataset: {getattr(dataset, 'value', dataset)}",
        "",
        *_data_buffer_lines(hw_layers, producers, nodes),
        "layers:",
    ]
    for position, (record, hw) in enumerate(zip(records, hw_layers, strict=True)):
        members = ", ".join(hw.get("members") or ()) or "synthetic copy"
        lines.append(f"  # Layer {position}: {members}")
        for i, (key, value) in enumerate(record.items()):
            lines.append(("  - " if i == 0 else "    ") + f"{key}: {_export_value(key, value)}")
    return "\n".join(lines) + "\n"


def _buffer_producers(hw_layers: list[dict], nodes: dict, owner: dict) -> dict[str, str]:
    """Each buffer's hardware layer -> the hardware layer that inserts its newest frame."""
    found = {}
    for hw in hw_layers:
        if hw.get("op") == "buffer":
            source = nodes[hw["name"]].inputs[0]
            found[hw["name"]] = owner.get(source, source)
    return found


def _shifts_first(hw_layers: list[dict], producers: dict[str, str]) -> list[dict]:
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


def _data_buffer_lines(hw_layers: list[dict], producers: dict[str, str],
                       nodes: dict) -> list[str]:
    """The `data_buffer` section: one region per buffer, named after the buffer."""
    lines = []
    for hw in hw_layers:
        if hw["name"] not in producers:
            continue
        channels, length = nodes[hw["name"]].out_shape
        processors = _map_value(hw["processors"], f"{hw['name']}.processors")
        lines += [f"  - processors: 0x{processors:016x}", f"    dim: {length}",
                  f"    channels: {channels}", f"    offset: 0x{int(hw['out_offset']):04x}",
                  f"    name: {hw['name']}"]
    return ["data_buffer:", *lines, ""] if lines else []


def _export_buffer(record: dict, hw: dict, members: list, producers: dict[str, str],
                   taken: set[str], nodes: dict) -> None:
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
    read = [name for m in members for name in m.inputs if name in producers]
    if read and "in_dim" not in record:
        channels, length = nodes[read[0]].out_shape
        record["in_channels"] = channels
        record["in_dim"] = length


def _export_value(key: str, value: Any) -> str:
    if key in ("processors", "output_processors"):
        return f"0x{value:016x}"
    if key in ("in_offset", "out_offset"):
        return f"0x{value:04x}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _single(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return value[0] if len(set(value)) == 1 else list(value)
    return value


def _export_layer(hw: dict, members: list, nodes: dict, owner: dict, previous: str,
                  position: int, quant: dict) -> tuple[dict, str | None]:
    """One network layer; also the manifest layer holding its output (None: a copy)."""
    names = {m.name for m in members}
    compute = [m for m in members if m.op in WEIGHT_OPS]
    adds = [m for m in members if m.op == "add"]
    concats = [m for m in members if m.op == "concat"]
    pools = [m for m in members if m.op in ("pool1d", "pool2d")]
    allowed = (*WEIGHT_OPS, "add", "concat", "pool1d", "pool2d", "passthrough", "flatten",
               "reshape", "buffer")
    unknown = [m.op for m in members if m.op not in allowed]
    if len(compute) > 1 or len(adds) > 1 or len(concats) > 1 or unknown or (adds and concats):
        raise UserError(f"export: hardware layer {hw['name']!r} combines "
                        f"{[m.op for m in members]}, which one network layer cannot describe")
    consumed = {name for m in members for name in m.inputs}
    produced = [m.name for m in members if m.name not in consumed]
    output = produced[-1] if produced else None
    if hw.get("inputs") is not None:
        external = [str(name) for name in hw["inputs"]]
    else:
        external = []
        for member in members:
            for name in member.inputs:
                source = owner.get(name, name)
                if name not in names and source not in external:
                    external.append(source)
    record: dict[str, Any] = {"name": hw["name"]}
    main = compute[0] if compute else None
    if main is None:
        record["op"] = "none" if (adds or pools or concats) else "passthrough"
    else:
        record["op"] = {"conv2d": "conv2d", "conv1d": "conv1d", "linear": "mlp",
                        "conv_transpose2d": "convtranspose2d"}[main.op]
    if main is not None and main.op != "linear":
        if main.op in ("conv2d", "conv_transpose2d"):
            kh, kw = (main.kernel, main.kernel) if isinstance(main.kernel, int) else main.kernel
            record["kernel_size"] = f"{kh}x{kw}"
        else:
            record["kernel_size"] = main.kernel
        record["pad"] = _single(main.pad)
        if main.op == "conv_transpose2d":
            _check_upsampling(hw["name"], main)
        elif _single(main.stride) != 1:
            record["stride"] = _single(main.stride)
        if _single(main.dilation) != 1:
            record["dilation"] = _single(main.dilation)
        if main.groups != 1:
            record["groups"] = main.groups
    if main is not None:
        record["activate"] = _ACT_NAMES[main.act.value]
    elif adds:
        record["activate"] = _ACT_NAMES[adds[0].act.value]
    window = main.pool if main is not None and getattr(main, "pool", None) is not None else None
    if window is None and pools:
        window = pools[0]
        if any((p.mode, p.size, p.stride) != (window.mode, window.size, window.stride)
               for p in pools):
            raise UserError(f"export: hardware layer {hw['name']!r} pools its operands with "
                            "different windows")
    if window is not None:
        key = "max_pool" if window.mode.value == "max" else "avg_pool"
        record[key] = _single(window.size)
        record["pool_stride"] = _single(window.stride if window.stride is not None
                                        else window.size)
    if adds:
        record["eltwise"] = "add"
        pooled_first = bool(pools) and all(p.name in adds[0].inputs for p in pools)
        if window is not None and not pooled_first:
            record["pool_first"] = False
    if main is not None and main.op == "linear":
        in_shape = nodes[main.name].in_shapes[0]
        if len(in_shape) > 1 and math.prod(in_shape[1:]) > 1:
            record["flatten"] = True
    if main is not None and getattr(main, "wide", False):
        record["output_width"] = 32
    if external != [previous]:
        record["in_sequences"] = external if len(external) > 1 else external[0]
    record["processors"] = _map_value(hw["processors"], f"{hw['name']}.processors")
    if hw.get("output_processors") is not None:
        record["output_processors"] = _map_value(hw["output_processors"],
                                                 f"{hw['name']}.output_processors")
    for key in ("in_offset", "out_offset"):
        if hw.get(key) is not None:
            record[key] = int(hw[key])
    if position == 0 and hw.get("data_format"):
        record["data_format"] = str(hw["data_format"])
    if hw.get("write_gap"):
        record["write_gap"] = int(hw["write_gap"])
    if hw.get("read_gap"):
        record["read_gap"] = int(hw["read_gap"])
    if hw.get("bias_group") is not None:
        group = hw["bias_group"]
        record["bias_group"] = list(group) if isinstance(group, list | tuple) else int(group)
    if hw.get("streaming"):
        record["streaming"] = True
    if main is not None and main.name in quant:
        row = quant[main.name]
        record["quantization"] = int(row["bits"])
        record["output_shift"] = int(row["scale_exp"])
    return record, output


def _check_upsampling(name: str, layer) -> None:
    """A network description's ConvTranspose2d always upsamples by 2 (output padding 1)."""
    if _single(layer.stride) != 2 or _single(layer.output_pad) != 1:
        raise UserError(f"export: hardware layer {name!r}: a ConvTranspose2d layer of a network "
                        f"description has stride 2 and output padding 1; {layer.name!r} has "
                        f"stride {layer.stride} and output_pad {layer.output_pad}")


def _export_in_dim(record: dict, members: list, by_name: dict, nodes: dict) -> None:
    """`in_dim` for a layer that reads a reshape (the reshape itself is no network layer):
    [H, W] for 2-D data, L for 1-D."""
    for member in members:
        if member.op == "reshape":
            continue
        if any(by_name[name].op == "reshape" for name in member.inputs if name in by_name):
            dims = list(nodes[member.name].in_shapes[0][1:])
            record["in_dim"] = dims[0] if len(dims) == 1 else dims
            return


def _export_channels(records: list[dict], nodes: dict, outputs: list[str | None]) -> None:
    """Add `out_channels` where the importer would not read the count from processor maps."""
    index = {record["name"]: i for i, record in enumerate(records)}
    specs = []
    for i, record in enumerate(records):
        spec = _Spec(index=i, keys={}, raw={})
        spec.op = {"mlp": "linear", "passthrough": "none",
                   "convtranspose2d": "conv_transpose2d"}.get(record["op"], record["op"])
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
        if record["op"] not in ("conv2d", "conv1d", "convtranspose2d", "mlp") \
                or outputs[i] not in nodes:
            continue
        actual = nodes[outputs[i]].out_shape[0]
        guess, _ = map_channels(specs, i, None, None)
        if guess != actual:
            record["out_channels"] = actual
            specs[i].out_channels = actual
