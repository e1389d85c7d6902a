"""Make the izer corpus (tests/data/ai8x/cases/, read by tests/ai8x_cases.py): small networks
and the vendor's own network descriptions, with deterministic random quantized weights and
inputs, run through the vendor's synthesis tool ("izer", ai8xize.py); each case keeps what
izer generated as the canonical form of ai8x_program.py, so edgebuild's accelerator program
can be compared with it in CI without izer.

Not run in CI (it needs izer and its Python environment). Setup, once:

    python -m venv --system-site-packages /tmp/izer-venv
    /tmp/izer-venv/bin/pip install numpy==1.26.4 rich xxhash GitPython PyGithub
    cp -a ../shared/reference/ai8x-synthesis /tmp/izer-src

Then, from the repository root:

    python benchmarks/izer_corpus.py --check-golden       # reproduce izer's mnist-extrasmall
    python benchmarks/izer_corpus.py                      # (re)make every case
    python benchmarks/izer_corpus.py --only conv_chw_8bit --keep /tmp/izer-out
    python benchmarks/izer_corpus.py --roundtrip conv_hwc_4bit [--vendor-bias]

Options --izer (izer's copy), --python (its interpreter), --tool (ai8x_program.py).
--roundtrip checks edgebuild's export (network.yaml + checkpoint-q.pth.tar of a build of the
imported case) through izer against the stored program.
A case izer refuses is reported and not written (and its old directory removed). The run
ends with the list of cases written and refused.

Random networks are made by `chain` (a sequence of conv2d / conv1d / pooling / linear layers
with the processors, offsets and widths izer expects) and `residual` (a convolution whose
output is added to a later one's, through interleaved data memory, as the vendor's
ressimplenet does), and the hand-written networks of izer_networks.py (element-wise,
concatenation, transposed convolution); every layer's `output_shift` is chosen so that its outputs neither
vanish nor saturate (only for the known answer's sake: the program does not depend on it).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import izer_networks  # noqa: E402  (hand-written descriptions beside this script)

from tests import ai8x_cases  # noqa: E402  (the recipe lives with the tests that replay it)

# The shared reference material (../shared beside the main checkout; AI8X_SHARED overrides).
SHARED = Path(os.environ.get("AI8X_SHARED") or next(
    (p for p in (REPO.parent / "shared", Path("/work/shared")) if p.is_dir()),
    REPO.parent / "shared"))
GOLDEN = SHARED / "reference" / "ai8x-goldens" / "mnist-extrasmall"
VENDOR = SHARED / "reference" / "ai8x-networks"
MODEL = SHARED / "reference" / "ai8x-models" / "mnist-extrasmall"


# -- random networks --------------------------------------------------------------------------

@dataclass(frozen=True)
class Layer:
    """One layer of a `chain`: `op` conv2d, conv1d, linear or none (pooling only)."""

    op: str
    out: int = 0  # output channels (none: the input's)
    kernel: int = 3
    pad: int = 1
    pool: tuple[str, int, int] | None = None  # (max|avg, size, stride)
    relu: bool = True
    bits: int = 8
    bias: bool = True
    flatten: bool = False
    wide: bool = False  # 32-bit output (the last layer only)
    processors_at: int = 0  # first processor of this layer's input channels
    same_weights_as: int | None = None  # weights: a copy of weight layer w<k>'s (a tie)
    same_bias_as: int | None = None  # bias: a copy of weight layer w<k>'s
    streaming: bool = False  # the layer streams its input (izer then needs `--fifo`)
    out_offset: str | None = None  # default: 0x4000 and 0x0000 by turns


@dataclass(frozen=True)
class Net:
    """A random network: input shape (C, H, W) or (C, L), data format, layers."""

    input_shape: tuple[int, ...]
    data_format: str
    layers: tuple[Layer, ...]
    extra: list[dict[str, Any]] = field(default_factory=list)


def _mask(count: int, at: int) -> str:
    return f"0x{((1 << count) - 1) << at:016x}"


def _processors(channels: int, at: int) -> tuple[int, int]:
    """(processor count, first processor) for `channels` input channels: one channel per
    processor up to 64; more run in ceil(channels / 64) passes over the fewest processors
    that hold them, a multiple of 4 (what izer expects of the producing layer's output map)."""
    if channels <= 64:
        return channels, min(at, 64 - channels)
    passes = math.ceil(channels / 64)
    return math.ceil(channels / passes / 4) * 4, 0


def _pooled(shape: tuple[int, ...], pool: tuple[str, int, int] | None) -> tuple[int, ...]:
    if pool is None:
        return shape
    _, size, stride = pool
    return tuple((d - size) // stride + 1 for d in shape)


def _placed(net: Net, layer: Layer, i: int, mask: str) -> dict[str, Any]:
    """A layer's processors, output offset, (first layer) data format and streaming."""
    record: dict[str, Any] = {"processors": mask, "out_offset": layer.out_offset or (
        "0x4000" if i % 2 == 0 else "0x0000")}
    if i == 0:
        record["data_format"] = net.data_format
    if layer.streaming:
        record["streaming"] = True
    return record


def chain(net: Net) -> tuple[list[dict[str, Any]], list[tuple[tuple[int, ...], int, bool, int]]]:
    """The description's layers and, per layer with weights, (weight shape, bits, bias,
    fan-in) for `net`."""
    channels, *spatial = net.input_shape
    shape = tuple(spatial)
    described, weights = [], []
    for i, layer in enumerate(net.layers):
        count, at = _processors(channels, layer.processors_at)
        mask = _mask(count, at)
        if i == 0 and net.data_format == "CHW":  # one channel per memory instance (16 proc.)
            mask = f"0x{sum(1 << (16 * c) for c in range(channels)):016x}"
        record = _placed(net, layer, i, mask)
        if layer.pool is not None:
            record[f"{layer.pool[0]}_pool"] = layer.pool[1]
            record["pool_stride"] = layer.pool[2]
        shape = _pooled(shape, layer.pool)
        out = layer.out or channels
        if layer.op == "none":
            record["op"] = "none"
        elif layer.op == "linear":
            fan_in = channels * math.prod(shape)
            record.update({"op": "mlp", "activate": "ReLU" if layer.relu else "None"})
            if layer.flatten:
                record["flatten"] = True
            weights.append(((out, fan_in), layer.bits, layer.bias, fan_in))
            shape = (1,) * len(shape)
        else:
            k = layer.kernel
            record.update({"op": layer.op, "pad": layer.pad,
                           "kernel_size": f"{k}x{k}" if layer.op == "conv2d" else k,
                           "activate": "ReLU" if layer.relu else "None"})
            kernel = (k, k) if layer.op == "conv2d" else (k,)
            weights.append(((out, channels, *kernel), layer.bits, layer.bias,
                            channels * math.prod(kernel)))
            shape = tuple(d + 2 * layer.pad - k + 1 for d in shape)
        if layer.bits != 8 and layer.op != "none":
            record["quantization"] = layer.bits
        if layer.wide:
            record["output_width"] = 32
        described.append(record)
        channels = out
    return described, weights


def ties(net: Net) -> list[tuple[int | None, int | None]]:
    """Per layer with weights (w0, w1, ...): (same_weights_as, same_bias_as), the
    recipe's ties (tests/ai8x_cases.py)."""
    return [(layer.same_weights_as, layer.same_bias_as) for layer in net.layers
            if layer.op != NONE]


def _shift(bits: int, fan_in: int) -> int:
    """An output_shift that keeps a ReLU layer's outputs spread over [0, 127]: the
    accumulator of `fan_in` products of uniform weights and inputs has a spread of about
    sqrt(fan_in) * 2**(bits-1) / sqrt(3) * 74 / 2; the device output is
    acc * 2**(shift + 8 - bits) / 128."""
    spread = math.sqrt(fan_in) * (1 << (bits - 1)) / math.sqrt(3) * 37
    shift = round(math.log2(40 / spread)) + bits - 1
    return max(-15 - (8 - bits), min(15 - (8 - bits), shift))


def network_yaml(arch: str, dataset: str, layers: list[dict[str, Any]]) -> str:
    lines = ["---", f"# izer corpus case {arch} (benchmarks/izer_corpus.py)", "",
             f"arch: {arch}", f"dataset: {dataset}", "", "layers:"]
    for record in layers:
        for j, (key, value) in enumerate(record.items()):
            text = "true" if value is True else str(value)
            lines.append(("  - " if j == 0 else "    ") + f"{key}: {text}")
    return "\n".join(lines) + "\n"


# -- the cases ---------------------------------------------------------------------------------

C2, C1, LIN, NONE = "conv2d", "conv1d", "linear", "none"


def _random_nets() -> dict[str, tuple[Net, str, int]]:
    """name -> (network, device, seed)."""
    m = ("max", 2, 2)
    a = ("avg", 2, 2)
    nets: dict[str, tuple[Net, str, int]] = {
        "conv_chw_8bit": (Net((1, 16, 16), "CHW", (
            Layer(C2, 8), Layer(C2, 12, pool=m, processors_at=4), Layer(C2, 8, pool=m),
            Layer(LIN, 10, flatten=True, relu=False, wide=True, processors_at=16))),
            "MAX78000", 1),
        "conv_hwc_8bit": (Net((3, 12, 12), "HWC", (
            Layer(C2, 16), Layer(C2, 16, pool=m), Layer(C2, 8, pad=0, kernel=1, pool=a))),
            "MAX78000", 2),
        "conv_hwc_4bit": (Net((4, 10, 10), "HWC", (
            Layer(C2, 20, bits=4), Layer(C2, 24, bits=4, pool=m, processors_at=32),
            Layer(LIN, 7, bits=4, flatten=True, relu=False, wide=True))),
            "MAX78000", 3),
        "conv_chw_2bit": (Net((2, 14, 14), "CHW", (
            Layer(C2, 8, bits=2), Layer(C2, 8, bits=2, pad=0, pool=m),
            Layer(C2, 4, bits=2, bias=False))), "MAX78000", 4),
        "conv_hwc_1bit": (Net((3, 8, 8), "HWC", (
            Layer(C2, 16, bits=1), Layer(C2, 16, bits=1, pool=m, processors_at=8),
            Layer(C2, 10, bits=1, kernel=1, pad=0))), "MAX78000", 5),
        "mixed_bits": (Net((3, 16, 16), "HWC", (
            Layer(C2, 32, bits=8), Layer(C2, 32, bits=4, pool=m), Layer(C2, 24, bits=2, pool=m),
            Layer(C2, 16, bits=1, kernel=1, pad=0),
            Layer(LIN, 10, flatten=True, relu=False, wide=True))), "MAX78000", 6),
        "pool_stride": (Net((2, 17, 17), "CHW", (
            Layer(C2, 8, pool=("max", 3, 2)), Layer(C2, 8, pool=("avg", 3, 1)),
            Layer(NONE, pool=("max", 2, 1)), Layer(C2, 6, kernel=1, pad=0))), "MAX78000", 7),
        "pad_kernels": (Net((4, 9, 9), "HWC", (
            Layer(C2, 8, pad=0), Layer(C2, 8, pad=2), Layer(C2, 8, kernel=3, pad=0),
            Layer(C2, 5, pad=0, relu=False))), "MAX78000", 8),
        "conv1d_hwc": (Net((16, 48), "HWC", (
            Layer(C1, 24, kernel=5, pad=2), Layer(C1, 16, kernel=3, pad=1, pool=m),
            Layer(C1, 8, kernel=3, pad=0, pool=("avg", 4, 4)))), "MAX78000", 9),
        "conv1d_chw": (Net((2, 64), "CHW", (
            Layer(C1, 12, kernel=7, pad=2), Layer(C1, 12, kernel=1, pad=0, pool=("max", 4, 4)),
            Layer(LIN, 5, flatten=True, relu=False, wide=True))), "MAX78000", 10),
        "multipass_128": (Net((3, 8, 8), "HWC", (
            Layer(C2, 128), Layer(C2, 96, kernel=1, pad=0, pool=m),
            Layer(C2, 32, kernel=1, pad=0))),
            "MAX78000", 11),
        "multipass_linear": (Net((8, 2, 2), "HWC", (
            Layer(C2, 128, kernel=1, pad=0), Layer(LIN, 12, flatten=True, relu=False,
                                                   wide=True))), "MAX78000", 12),
        "linear_stack": (Net((64, 1, 1), "HWC", (
            Layer(LIN, 32), Layer(LIN, 48, bits=4), Layer(LIN, 16, bits=2),
            Layer(LIN, 10, relu=False, wide=True))), "MAX78000", 13),
    }
    for name in ("conv_chw_8bit", "conv_hwc_4bit", "mixed_bits", "conv1d_hwc",
                 "multipass_128", "linear_stack", "pool_stride", "conv_chw_2bit",
                 "conv_hwc_1bit", "multipass_linear", "conv_hwc_8bit", "pad_kernels",
                 "conv1d_chw"):
        net, _, seed = nets[name]
        nets[f"{name}_max78002"] = (net, "MAX78002", seed + 100)
    nets.update(_dedup_nets())
    # MAX78002's kernels of layers on processors 0/16/32/48 only go to the end of their
    # larger memories: three such layers stack there (lengths not multiples of 4, one of
    # 2-bit weights), between layers of shared columns
    nets["extended_kernels_max78002"] = (Net((1, 10, 10), "CHW", (
        Layer(C2, 6), Layer(C2, 1, kernel=1, pad=0), Layer(C2, 9),
        Layer(C2, 1, kernel=1, pad=0, processors_at=16), Layer(C2, 5, bits=2, processors_at=16),
        Layer(C2, 2, kernel=1, pad=0),
        Layer(LIN, 3, flatten=True, relu=False, wide=True))), "MAX78002", 114)
    # streaming: the first two layers stream (the input through the FIFO), then normal ones;
    # the streaming layers' circular buffers (at their inputs' offsets) apart from every
    # output, as the vendor's faceid places them
    nets["streaming_hwc"] = (Net((3, 24, 20), "HWC", (
        Layer(C2, 16, streaming=True, out_offset="0x1000"),
        Layer(C2, 16, pool=m, streaming=True, out_offset="0x2000"),
        Layer(C2, 16, pool=m, out_offset="0x0000"),
        Layer(C2, 8, kernel=1, pad=0, relu=False, out_offset="0x2000"))), "MAX78000", 15)
    nets["streaming_hwc_max78002"] = (nets["streaming_hwc"][0], "MAX78002", 115)
    # CHW input through the FIFOs (one channel per FIFO, four pixels a word): the first
    # layer's rollover is the big-data one
    nets["streaming_chw"] = (replace(nets["streaming_hwc"][0], data_format="CHW"),
                             "MAX78000", 17)
    nets["streaming_chw_max78002"] = (nets["streaming_chw"][0], "MAX78002", 117)
    # a 1x1 convolution that streams, or reads a streaming layer's output, runs as a 3x3
    # one padded by 1 (izer's EMULATE_1X1_STREAMING): one streaming, one after the last
    # streaming layer
    nets["streaming_1x1"] = (Net((3, 24, 20), "HWC", (
        Layer(C2, 16, streaming=True, out_offset="0x1000"),
        Layer(C2, 12, kernel=1, pad=0, streaming=True, out_offset="0x2000"),
        Layer(C2, 16, streaming=True, out_offset="0x3000"),
        Layer(C2, 16, kernel=1, pad=0, out_offset="0x0000"),
        Layer(C2, 16, pool=m, out_offset="0x2000"),
        Layer(C2, 8, kernel=1, pad=0, relu=False, out_offset="0x0000"))), "MAX78000", 16)
    nets["streaming_1x1_max78002"] = (nets["streaming_1x1"][0], "MAX78002", 116)
    return nets


def _dedup_nets() -> dict[str, tuple[Net, str, int]]:
    """Networks with tied tensors, for izer's deduplication (an equal tensor stored once):
    `dedup_kernels` a chain of equal-shaped 3x3 convolutions where w3 and w5 have w1's
    kernels (w5 its bias too) and w4 w2's bias with kernels of its own; `dedup_refused`
    equal kernels izer must store twice (w2: w1's values at another width; w3: w2's on
    other processors) beside a bias shared across processor maps (w4: w3's); a 1-D chain
    and a linear stack; the first on MAX78002; and `dedup_merged_channels`, kernels of
    transposed channel counts that izer's comparison takes as equal."""
    same = Layer(C2, 8)
    kernels = Net((8, 8, 8), "HWC", (
        same, same, same, replace(same, same_weights_as=1), replace(same, same_bias_as=2),
        replace(same, same_weights_as=1, same_bias_as=1, relu=False)))
    refused = Net((8, 8, 8), "HWC", (
        same, replace(same, bits=4), replace(same, same_weights_as=1),
        replace(same, processors_at=8, same_weights_as=2),
        replace(same, same_bias_as=3, relu=False)))
    one = Layer(C1, 8, kernel=3, pad=1)
    oned = Net((8, 32), "HWC", (
        one, one, replace(one, same_weights_as=1, same_bias_as=1),
        replace(one, same_bias_as=0, relu=False)))
    lin = Layer(LIN, 32)
    linear = Net((64, 1, 1), "HWC", (
        lin, lin, replace(lin, same_weights_as=1), replace(lin, bits=4),
        replace(lin, bits=4, same_weights_as=3, same_bias_as=1, relu=False, wide=True)))
    # izer compares kernels with input and output channels on one axis: 64 -> 128 and
    # 128 -> 64 channels (both on all 64 processors, one and two passes) are "equal"
    merged = Net((64, 4, 4), "HWC", (
        Layer(C2, 128), Layer(C2, 64, same_weights_as=0, relu=False)))
    # a 1x1 kernel that streams or reads a streaming layer is compared as the 3x3 kernel it
    # runs as: w2 (after a streaming layer) shares w1's, w3 (not streamed) has w1's values
    # but stores its own, which w4 then shares
    square = Layer(C2, 16, kernel=1, pad=0)
    streamed = Net((3, 24, 20), "HWC", (
        Layer(C2, 16, streaming=True, out_offset="0x1000"),
        replace(square, streaming=True, out_offset="0x2000"),
        replace(square, same_weights_as=1, out_offset="0x0000"),
        replace(square, same_weights_as=1, out_offset="0x2000"),
        replace(square, same_weights_as=3, relu=False, out_offset="0x0000")))
    return {"dedup_kernels": (kernels, "MAX78000", 40),
            "dedup_refused": (refused, "MAX78000", 41),
            "dedup_conv1d": (oned, "MAX78000", 42),
            "dedup_linear": (linear, "MAX78000", 43),
            "dedup_kernels_max78002": (kernels, "MAX78002", 140),
            "dedup_merged_channels": (merged, "MAX78000", 44),
            "dedup_streaming_1x1": (streamed, "MAX78000", 45),
            "dedup_streaming_1x1_max78002": (streamed, "MAX78002", 145)}


def residual_layers() -> tuple[list[dict[str, Any]], list[tuple[tuple[int, ...], int, bool, int]]]:
    """conv -> (passthrough to interleaved memory, conv beside it) -> add + conv -> conv:
    the element-wise add of two layers' outputs, as the vendor's ressimplenet writes it."""
    c = 16
    described = [
        {"out_offset": "0x2000", "processors": _mask(3, 0), "op": "conv2d",
         "kernel_size": "3x3", "pad": 1, "activate": "ReLU", "data_format": "HWC"},
        {"out_offset": "0x0000", "processors": _mask(c, 0), "output_processors": _mask(c, 0),
         "op": "passthrough", "write_gap": 1},
        {"in_offset": "0x2000", "in_sequences": 0, "out_offset": "0x0004",
         "processors": _mask(c, 0), "op": "conv2d", "kernel_size": "3x3", "pad": 1,
         "activate": "ReLU", "write_gap": 1},
        {"in_sequences": "[1, 2]", "in_offset": "0x0000", "out_offset": "0x2000",
         "processors": _mask(c, 0), "eltwise": "add", "op": "conv2d", "kernel_size": "3x3",
         "pad": 1, "activate": "ReLU"},
        {"out_offset": "0x0000", "processors": _mask(c, 0), "op": "conv2d",
         "kernel_size": "1x1", "pad": 0, "activate": "None", "max_pool": 2, "pool_stride": 2},
    ]
    weights = [((c, 3, 3, 3), 8, True, 27), ((c, c, 3, 3), 8, True, c * 9),
               ((c, c, 3, 3), 8, False, c * 9), ((8, c, 1, 1), 8, True, c)]  # MAX78002: an
    # add fused with a convolution that has a bias is refused ("multi-pass element-wise")
    return described, weights


def options(net: Net) -> tuple[str, ...]:
    """izer's extra options for `net`: a first layer that streams reads its input through
    the FIFO, which izer only generates with `--fifo` ("Streaming in the first layer requires
    use of a FIFO")."""
    return ("--fifo",) if net.layers[0].streaming else ()


@dataclass(frozen=True)
class Made:
    """A case before izer ran: its description text and the case record."""

    yaml_text: str
    case: ai8x_cases.Case


def _case(name: str, device: str, seed: int, input_shape: tuple[int, ...], yaml_text: str,
          weights: list[tuple[tuple[int, ...], int, bool, int]], source: str,
          tied: list[tuple[int | None, int | None]] | None = None,
          izer_options: tuple[str, ...] = (), transposed: frozenset[int] = frozenset()
          ) -> Made:
    """`transposed`: the weight layers that are transposed convolutions (weight shape
    (in, out, kh, kw): their bias has shape[1] values)."""
    tied = tied or [(None, None)] * len(weights)
    recipes = tuple(ai8x_cases.LayerRecipe(f"w{i}", shape, bits, bias, _shift(bits, fan_in),
                                           *tied[i], transposed=i in transposed)
                    for i, (shape, bits, bias, fan_in) in enumerate(weights))
    case = ai8x_cases.Case(name, ai8x_cases.CASES / name, device, seed, input_shape, recipes,
                           "", source, izer_options)
    return Made(yaml_text, case)


def random_cases() -> list[Made]:
    made = []
    for name, (net, device, seed) in _random_nets().items():
        described, weights = chain(net)
        made.append(_case(name, device, seed, net.input_shape,
                          network_yaml(name, "none", described), weights, "chain", ties(net),
                          options(net)))
    described, weights = residual_layers()
    for device, seed in (("MAX78000", 20), ("MAX78002", 21)):
        name = "residual_add" + ("" if device == "MAX78000" else "_max78002")
        made.append(_case(name, device, seed, (3, 12, 12), network_yaml(name, "none", described),
                          weights, "residual"))
    for name, (network, seed, device) in izer_networks.NETWORKS.items():
        described, weights, shape = network()
        made.append(_case(name, device, seed, shape, network_yaml(name, "none", described),
                          weights, f"izer_networks.{network.__name__}"))
    return made


# Vendor descriptions that fit with random weights: file -> (input shape, out_channels of the
# last layer where only a checkpoint would say, device, seed).
VENDOR_CASES = {
    "fashionmnist-chw.yaml": ((1, 28, 28), 10, "MAX78000", 30),
    "speechcom-chw.yaml": ((1, 64, 64), 21, "MAX78000", 31),
    "kws20-hwc.yaml": ((128, 128), None, "MAX78000", 32),
    "cifar100-simple.yaml": ((3, 32, 32), None, "MAX78000", 33),
    "cifar100-ressimplenet.yaml": ((3, 32, 32), None, "MAX78000", 34),
    "ai85-autoencoder.yaml": ((256, 3), 256, "MAX78000", 35),
    "cats-dogs-chw.yaml": ((3, 64, 64), 2, "MAX78000", 36),
    # MAX78002 only: depthwise convolutions and element-wise add residuals, multi-pass
    "ai87-cifar100-mobilenet-v2-0.5.yaml": ((3, 32, 32), None, "MAX78002", 37),
    "faceid.yaml": ((3, 160, 120), None, "MAX78000", 37),
    "ai85-faceid_112.yaml": ((3, 112, 112), 64, "MAX78000", 38),
    "camvid-unet-large.yaml": ((48, 88, 88), None, "MAX78000", 39),
    "ai85-kinetics-actiontcn.yaml": ((96, 60, 60), 5, "MAX78000", 40),
}

# izer's extra options per vendor description: the face-identification model streams its
# first layers (its 160x120 input is larger than a data memory instance), which izer only
# generates reading the input through the FIFO, as the vendor's own faceid demo does.
# The CamVid UNet's and the action-recognition TCN's first layers write over input they have
# already read, which izer only allows with `--overlap-data` (as the vendor's demos of them
# are generated).
VENDOR_OPTIONS = {"faceid.yaml": ("--fifo",), "ai85-faceid_112.yaml": ("--fifo",),
                  "camvid-unet-large.yaml": ("--overlap-data",),
                  "ai85-kinetics-actiontcn.yaml": ("--overlap-data",)}


# The same descriptions run on MAX78002 (its own register layout and kernel placement):
# file -> seed.
VENDOR_CASES_MAX78002 = {
    "fashionmnist-chw.yaml": 130, "kws20-hwc.yaml": 132, "cifar100-simple.yaml": 133,
    "ai85-autoencoder.yaml": 135, "cats-dogs-chw.yaml": 136,
}


def _vendor_entries() -> list[tuple[str, str, tuple[tuple[int, ...], int | None, str, int]]]:
    """(case name, file, (input shape, out_channels, device, seed)) of every vendor case."""
    entries = []
    for file, entry in VENDOR_CASES.items():
        entries.append(("vendor_" + file.removesuffix(".yaml").replace("-", "_")
                        .replace(".", "_"), file, entry))
    for file, seed in VENDOR_CASES_MAX78002.items():
        shape, out_channels, _, _ = VENDOR_CASES[file]
        entries.append(("vendor_" + file.removesuffix(".yaml").replace("-", "_")
                        .replace(".", "_") + "_max78002", file,
                        (shape, out_channels, "MAX78002", seed)))
    return entries


def vendor_cases(only: list[str] | None = None) -> list[Made]:
    """The vendor's descriptions, with weight shapes from edgebuild's import of the
    description (its channel counts from processor maps)."""
    made = []
    for name, file, (shape, out_channels, device, seed) in _vendor_entries():
        if only and name not in only:
            continue
        text = (VENDOR / file).read_text()
        if out_channels is not None:
            text = text.rstrip() + f"\n    out_channels: {out_channels}\n"
        try:
            weights, transposed = _vendor_weights(text, shape)
        except Exception as exc:  # noqa: BLE001  (reported: the case is left out)
            print(f"{file}: edgebuild cannot read its weight shapes: {exc}")
            continue
        made.append(_case(name, device, seed, shape, text, weights, f"ai8x-networks/{file}",
                          izer_options=VENDOR_OPTIONS.get(file, ()), transposed=transposed))
    return made


def _vendor_weights(text: str, shape: tuple[int, ...]
                    ) -> tuple[list[tuple[tuple[int, ...], int, bool, int]], frozenset[int]]:
    """Per weight layer (shape, bits, bias, fan-in), and which of them are transposed
    convolutions."""
    from edgebuild.core import document as yamlsource
    from edgebuild.manifest import reading
    from edgebuild.model import graph as graphs
    from edgebuild.model.imported import expected_shape
    from edgebuild.ops import OPS
    from edgebuild.targets.max7800x import network

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "network.yaml"
        path.write_text(text)
        result = network.import_network(path, input_shape=shape, out_dir=Path(tmp), name="v")
        manifest = reading.parse(yamlsource.load(result.manifest))
    graph, problems = graphs.build(manifest.model.input, manifest.model.layers)
    assert graph is not None, problems
    nodes = {node.name: node for node in graph.nodes}
    bits = {name: o.weight_bits for name, o in (manifest.qat.overrides.items()
                                                if manifest.qat else ())}
    weights, transposed = [], set()
    for layer in manifest.model.layers:
        if OPS[layer.op].computes:
            w = tuple(expected_shape(layer, nodes[layer.name].in_shapes[0]))
            if layer.op == "conv_transpose2d":
                transposed.add(len(weights))
            weights.append((w, int(bits.get(layer.name) or 8), True, math.prod(w[1:])))
    return weights, frozenset(transposed)


# -- running izer ------------------------------------------------------------------------------

def run_izer(args: argparse.Namespace, prefix: str, network: Path, checkpoint: Path,
             sample: Path, device: str, out: Path, options: tuple[str, ...] = ()
             ) -> tuple[bool, str]:
    """Run ai8xize.py as the vendor's MSDK demo script does; (ok, last lines of its log)."""
    command = [args.python, "ai8xize.py", "--test-dir", str(out), "--prefix", prefix,
               "--checkpoint-file", str(checkpoint), "--config-file", str(network),
               "--softmax", "--device", device, "--timer", "0", "--display-checkpoint",
               "--no-version-check", "--overwrite", "--sample-input", str(sample), *options]
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    run = subprocess.run(command, cwd=args.izer, env=env, capture_output=True, text=True,
                         check=False, timeout=900)
    log = (run.stdout + run.stderr).strip().splitlines()
    ok = run.returncode == 0 and (out / prefix / "cnn.c").is_file()
    return ok, "\n".join(log[-6:])


def canonical(args: argparse.Namespace, project: Path) -> dict[str, Any]:
    import json

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "program.json"
        subprocess.run([sys.executable, str(args.tool), str(project), "--json", str(target)],
                       check=True)
        result: dict[str, Any] = json.loads(target.read_text())
    return result


def make(args: argparse.Namespace, made: Made, out: Path) -> str | None:
    """Run one case and write its directory; None when done, else why izer refused it."""
    case = made.case
    work = out / "inputs" / case.name
    work.mkdir(parents=True, exist_ok=True)
    (work / "network.yaml").write_text(made.yaml_text)
    staged = replace(case, directory=work)
    layers, sample = ai8x_cases.generate(staged)
    staged = replace(staged, digest=ai8x_cases.digest(layers, sample))
    checkpoint, sample_path = ai8x_cases.write_inputs(staged, work)
    ok, log = run_izer(args, case.name, work / "network.yaml", checkpoint, sample_path,
                       case.device, out, case.options)
    if os.path.isdir(case.directory):
        shutil.rmtree(case.directory)
    if not ok:
        return log
    program = canonical(args, out / case.name)
    case.directory.mkdir(parents=True)
    (case.directory / "network.yaml").write_text(made.yaml_text)
    (case.directory / "case.json").write_text(ai8x_cases.case_json(
        replace(staged, directory=case.directory)))
    (case.directory / "program.json.gz").write_bytes(ai8x_cases.program_gz(program))
    return None


def check_golden(args: argparse.Namespace, out: Path) -> bool:
    """izer on the published mnist-extrasmall reproduces the given golden program."""
    ok, log = run_izer(args, "golden", MODEL / "network.yaml", MODEL / "checkpoint-q.pth.tar",
                       MODEL / "input.npy", "MAX78000", out)
    if not ok:
        print(log)
        return False
    run = subprocess.run([sys.executable, str(args.tool), "--compare", str(out / "golden"),
                          str(GOLDEN / "program.json")], check=False)
    return run.returncode == 0


def roundtrip(args: argparse.Namespace, name: str, out: Path) -> list[str]:
    """The exporter checked through izer: import the case (`import-ai8x`), build it with
    edgebuild, run izer on the exported network.yaml + checkpoint-q.pth.tar, and compare its
    program with the stored one (differences; empty: identical). With --vendor-bias the
    exported `bias_group`s (edgebuild's bias-memory choice) are dropped so izer chooses."""
    from edgebuild.targets.max7800x import network

    case = ai8x_cases.load_case(name)
    work = out / "roundtrip" / name
    shutil.rmtree(work, ignore_errors=True)
    checkpoint, sample = ai8x_cases.write_inputs(case, work)
    network.import_network(case.network, checkpoint=checkpoint, sample=sample,
                           device=case.device.lower(), out_dir=work, name="m")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "edgebuild", "build", "m.yaml", "--cache-dir",
                    str(out / "roundtrip-cache")], cwd=work, env=env, check=True,
                   capture_output=True)
    exported = work / "build" / "m" / "ai8x"
    text = (exported / "network.yaml").read_text()
    if args.vendor_bias:
        text = "".join(line for line in text.splitlines(keepends=True)
                       if "bias_group:" not in line)
    (work / "exported.yaml").write_text(text)
    ok, log = run_izer(args, "p", work / "exported.yaml", exported / "checkpoint-q.pth.tar",
                       sample, case.device, work / "izer", case.options)
    if not ok:
        return [f"izer refused the export: {log}"]
    return ai8x_cases.compare(ai8x_cases.expected_program(case),
                              canonical(args, work / "izer" / "p"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--izer", default="/tmp/izer-src", help="a copy of ai8x-synthesis")
    parser.add_argument("--python", default="/tmp/izer-venv/bin/python",
                        help="the interpreter izer runs with")
    parser.add_argument("--tool", default=str(SHARED / "tools" / "ai8x_program.py"))
    parser.add_argument("--only", action="append", help="make only these cases")
    parser.add_argument("--keep", help="keep izer's projects in this directory")
    parser.add_argument("--check-golden", action="store_true")
    parser.add_argument("--roundtrip", action="append", metavar="CASE",
                        help="check edgebuild's export of this stored case through izer")
    parser.add_argument("--vendor-bias", action="store_true",
                        help="(--roundtrip) let izer choose bias memory")
    args = parser.parse_args(argv)
    out = Path(args.keep or tempfile.mkdtemp(prefix="izer-corpus-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.check_golden:
        return 0 if check_golden(args, out) else 1
    if args.roundtrip:
        failed = 0
        for name in args.roundtrip:
            diffs = roundtrip(args, name, out)
            failed += bool(diffs)
            print(f"{name}: " + ("identical" if not diffs else
                                 f"{len(diffs)} differences: " + "; ".join(diffs[:8])))
        return 1 if failed else 0
    cases = [m for m in random_cases() + vendor_cases(args.only)
             if not args.only or m.case.name in args.only]
    written, refused = [], {}
    for made in cases:
        why = make(args, made, out)
        print(f"{made.case.name}: {'written' if why is None else 'REFUSED'}", flush=True)
        if why is None:
            written.append(made.case.name)
        else:
            refused[made.case.name] = why
    print(f"\n{len(written)} cases written: {', '.join(written)}")
    for name, why in refused.items():
        print(f"\nrefused {name}:\n{why}")
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
