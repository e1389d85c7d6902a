"""Hand-written network descriptions for the izer corpus (benchmarks/izer_corpus.py): the
layer kinds a random `chain` does not reach, each written as the vendor's own descriptions
write it — element-wise operations over interleaved data memory (as ressimplenet), a
standalone element-wise passthrough, three operands, channel concatenation read by a
convolution or a passthrough, and a transposed convolution;
on MAX78002 also depthwise convolutions (`groups`), and dilated conv1d on both devices.

Each network is (description layers, weights, input shape): weights per layer with weights,
in order, as (weight shape, bits, bias, fan-in) — what izer_corpus._case turns into recipes.
"""

from __future__ import annotations

from typing import Any

Weights = list[tuple[tuple[int, ...], int, bool, int]]
Network = tuple[list[dict[str, Any]], Weights, tuple[int, ...]]

C = 16  # channels of the hidden layers


def _mask(count: int, at: int = 0) -> str:
    return f"0x{((1 << count) - 1) << at:016x}"


def _conv(processors: str, out_offset: str, **more: Any) -> dict[str, Any]:
    return {"out_offset": out_offset, "processors": processors, "op": "conv2d",
            "kernel_size": "3x3", "pad": 1, "activate": "ReLU", **more}


def _interleaved_pair(gap: int) -> list[dict[str, Any]]:
    """conv (3 -> C) at 0x2000; a passthrough copies it to word 0 of each group of gap + 1
    words; a conv of it writes word 1: two interleaved operands at 0x0000."""
    return [
        _conv(_mask(3), "0x2000", data_format="HWC"),
        {"out_offset": "0x0000", "processors": _mask(C), "output_processors": _mask(C),
         "op": "passthrough", "write_gap": gap},
        _conv(_mask(C), "0x0004", in_offset="0x2000", in_sequences=0, write_gap=gap),
    ]


def eltwise_passthrough() -> Network:
    """A standalone add (no convolution): `op: none` with `eltwise: add`, then a 1x1 conv."""
    described = _interleaved_pair(1) + [
        {"in_sequences": "[1, 2]", "in_offset": "0x0000", "out_offset": "0x2000",
         "processors": _mask(C), "op": "none", "eltwise": "add"},
        {"out_offset": "0x0000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 3, 3, 3), 8, True, 27), ((C, C, 3, 3), 8, True, C * 9),
                        ((8, C, 1, 1), 8, True, C)]
    return described, weights, (3, 12, 12)


def eltwise_three() -> Network:
    """Three operands (write gap 2; `operands: 3`, izer's default is 2) added in-flight
    before a conv (izer pools after an element-wise operation of at most 2 operands)."""
    described = _interleaved_pair(2) + [
        _conv(_mask(C), "0x0008", in_offset="0x2000", in_sequences=0, write_gap=2),
        _conv(_mask(C), "0x2000", in_offset="0x0000", in_sequences="[1, 2, 3]",
              eltwise="add", operands=3),
        {"out_offset": "0x0000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 3, 3, 3), 8, True, 27), ((C, C, 3, 3), 8, True, C * 9),
                        ((C, C, 3, 3), 8, True, C * 9), ((C, C, 3, 3), 8, False, C * 9),
                        ((6, C, 1, 1), 8, True, C)]
    return described, weights, (3, 10, 10)


def _two_branches() -> list[dict[str, Any]]:
    """conv (3 -> 8) on processors 0-7, a conv of it (8 -> 8) writing processors 8-15 at the
    same offset: the two outputs are one 16-channel tensor at 0x2000."""
    return [
        _conv(_mask(3), "0x2000", data_format="HWC", output_processors=_mask(8)),
        _conv(_mask(8), "0x2000", in_offset="0x2000", output_processors=_mask(8, 8)),
    ]


def concat_conv() -> Network:
    """A convolution reading the channel concatenation of two layers (`in_sequences`)."""
    described = _two_branches() + [
        _conv(_mask(C), "0x0000", in_offset="0x2000", in_sequences="[0, 1]"),
        {"out_offset": "0x2000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((8, 3, 3, 3), 8, True, 27), ((8, 8, 3, 3), 8, True, 72),
                        ((C, C, 3, 3), 8, True, C * 9), ((5, C, 1, 1), 8, True, C)]
    return described, weights, (3, 10, 10)


def concat_passthrough() -> Network:
    """A passthrough that concatenates two layers' outputs, then a conv of the copy."""
    described = _two_branches() + [
        {"in_sequences": "[0, 1]", "in_offset": "0x2000", "out_offset": "0x0000",
         "processors": _mask(C), "op": "none"},
        {"out_offset": "0x2000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((8, 3, 3, 3), 8, True, 27), ((8, 8, 3, 3), 8, True, 72),
                        ((5, C, 1, 1), 8, True, C)]
    return described, weights, (3, 10, 10)


def conv_transpose() -> Network:
    """A transposed convolution (the hardware's stride 2 upsampling) between two convs."""
    described = [
        _conv(_mask(3), "0x2000", data_format="HWC"),
        {"out_offset": "0x0000", "processors": _mask(8), "op": "convtranspose2d",
         "kernel_size": "3x3", "pad": 1, "activate": "ReLU"},
        {"out_offset": "0x2000", "processors": _mask(8), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((8, 3, 3, 3), 8, True, 27), ((8, 8, 3, 3), 8, True, 72),
                        ((4, 8, 1, 1), 8, True, 8)]
    return described, weights, (3, 6, 6)


def depthwise() -> Network:
    """A depthwise convolution (`groups` = channels, MAX78002 only) in broadcast mode (its
    output processors are its input processors), with a bias, between two convs."""
    described = [
        _conv(_mask(3), "0x2000", data_format="HWC"),
        _conv(_mask(C), "0x0000", groups=C),
        {"out_offset": "0x2000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 3, 3, 3), 8, True, 27), ((C, 1, 3, 3), 8, True, 9),
                        ((6, C, 1, 1), 8, True, C)]
    return described, weights, (3, 8, 8)


def depthwise_multipass() -> Network:
    """A depthwise convolution of 96 channels (two passes over 48 processors), unpadded and
    max-pooled, without a bias, then a 1x1 conv down to 10."""
    wide = 96
    described = [
        _conv(_mask(3), "0x2000", data_format="HWC", output_processors=_mask(48)),
        {"out_offset": "0x0000", "processors": _mask(48), "output_processors": _mask(48),
         "op": "conv2d", "kernel_size": "3x3", "pad": 0, "groups": wide, "activate": "ReLU",
         "max_pool": 2, "pool_stride": 2},
        {"out_offset": "0x2000", "processors": _mask(48), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((wide, 3, 3, 3), 8, True, 27), ((wide, 1, 3, 3), 8, False, 9),
                        ((10, wide, 1, 1), 8, True, wide)]
    return described, weights, (3, 10, 10)


def dilated_conv1d() -> Network:
    """Dilated conv1d (the hardware stretches a kernel whose dilated span fits in 9 taps:
    dilation 2 of a 3-tap kernel is a 5-tap kernel with zeros between), then dilation 3."""
    described = [
        {"out_offset": "0x2000", "processors": _mask(8), "op": "conv1d", "kernel_size": 3,
         "pad": 2, "dilation": 2, "activate": "ReLU", "data_format": "HWC"},
        {"out_offset": "0x0000", "processors": _mask(C), "op": "conv1d", "kernel_size": 3,
         "pad": 0, "dilation": 3, "activate": "ReLU"},
        {"out_offset": "0x2000", "processors": _mask(C), "op": "conv1d", "kernel_size": 1,
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 8, 3), 8, True, 24), ((C, C, 3), 8, True, C * 3),
                        ((5, C, 1), 8, True, C)]
    return described, weights, (8, 32)


def read_gap_max78002() -> Network:
    """MAX78002 reads interleaved data directly (`read_gap`): two convolutions write word 0
    and word 1 of each pair (write gap 1), a convolution reads only word 1 (read gap 1), and
    a 1x1 convolution reads its plain output (nothing reads word 0)."""
    described = _interleaved_pair(1) + [
        _conv(_mask(C), "0x2000", in_offset="0x0004", in_sequences=2, read_gap=1),
        {"out_offset": "0x0000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 3, 3, 3), 8, True, 27), ((C, C, 3, 3), 8, True, C * 9),
                        ((C, C, 3, 3), 8, True, C * 9), ((6, C, 1, 1), 8, True, C)]
    return described, weights, (3, 10, 10)


# name -> (network, seed, device)
NETWORKS = {"eltwise_passthrough": (eltwise_passthrough, 40, "MAX78000"),
            "eltwise_three": (eltwise_three, 41, "MAX78000"),
            "concat_conv": (concat_conv, 42, "MAX78000"),
            "concat_passthrough": (concat_passthrough, 43, "MAX78000"),
            "conv_transpose": (conv_transpose, 44, "MAX78000"),
            # MAX78002 programs element-wise operations with its own counters and strides
            "eltwise_passthrough_max78002": (eltwise_passthrough, 140, "MAX78002"),
            "eltwise_three_max78002": (eltwise_three, 141, "MAX78002"),
            "depthwise_max78002": (depthwise, 145, "MAX78002"),
            "depthwise_multipass_max78002": (depthwise_multipass, 146, "MAX78002"),
            "dilated_conv1d": (dilated_conv1d, 47, "MAX78000"),
            "dilated_conv1d_max78002": (dilated_conv1d, 147, "MAX78002"),
            "read_gap_max78002": (read_gap_max78002, 45, "MAX78002")}
