"""Hand-written network descriptions for the izer corpus (benchmarks/izer_corpus.py): the
layer kinds a random `chain` does not reach, each written as the vendor's own descriptions
write it — element-wise operations over interleaved data memory (as ressimplenet), a
standalone element-wise passthrough, three operands, channel concatenation read by a
convolution or a passthrough, and a transposed convolution;
on MAX78002 also depthwise convolutions (`groups`), and dilated conv1d on both devices;
element-wise adds over several passes, standalone and fused with a convolution.

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


def depthwise_moved(wide: int = 24, at: int = 0, out_at: int = 32) -> Network:
    """A depthwise convolution whose output processors are not its input processors (no
    broadcast: each channel's result moves to another processor's memory), with a bias:
    by default 24 channels on processors 0-23 (two quadrants) written to 32-55."""
    passes = -(-wide // 64)
    per_pass = wide // passes
    described = [
        _conv(_mask(3), "0x2000", data_format="HWC", output_processors=_mask(per_pass, at)),
        _conv(_mask(per_pass, at), "0x0000", groups=wide,
              output_processors=_mask(per_pass, out_at)),
        {"out_offset": "0x2000", "processors": _mask(per_pass, out_at), "op": "conv2d",
         "kernel_size": "1x1", "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((wide, 3, 3, 3), 8, True, 27), ((wide, 1, 3, 3), 8, True, 9),
                        ((6, wide, 1, 1), 8, True, wide)]
    return described, weights, (3, 8, 8)


def depthwise_moved_quadrant() -> Network:
    """8 channels on processors 4-11 (one quadrant, not from its start) written to 16-23."""
    return depthwise_moved(8, 4, 16)


def depthwise_moved_multipass() -> Network:
    """96 channels in two passes on processors 4-51 (from inside the first quadrant, over
    four) written to 0-47."""
    return depthwise_moved(96, 4, 0)


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


def dilated_conv1d_wide() -> Network:
    """Dilated conv1d spanning more than 9 taps, which the hardware runs as a 3x3 conv2d
    over `dilation` columns padded by 1: a 3-tap kernel at dilation 5 (its first output row
    lands before `out_offset`, which leaves room), a 2-tap one at dilation 12 over 72
    channels (two passes), then a 1x1."""
    wide = 72
    described = [
        {"out_offset": "0x2000", "processors": _mask(8), "output_processors": _mask(36),
         "op": "conv1d", "kernel_size": 3, "pad": 0, "dilation": 5, "activate": "ReLU",
         "data_format": "HWC"},
        {"out_offset": "0x0000", "processors": _mask(36), "op": "conv1d", "kernel_size": 2,
         "pad": 0, "dilation": 12, "activate": "ReLU"},
        {"out_offset": "0x2000", "processors": _mask(C), "op": "conv1d", "kernel_size": 1,
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((wide, 8, 3), 8, True, 24), ((C, wide, 2), 8, True, wide * 2),
                        ((5, C, 1), 8, True, C)]
    return described, weights, (8, 40)


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


def _wide_pair(wide: int) -> list[dict[str, Any]]:
    """conv (3 -> `wide`) at 0x2000, then the two operands of an add over `wide` channels
    (several passes): a passthrough copy at word 0 and a 1x1 conv of it at word 1 of each
    pair (write gap 1: the operands interleave within each pass)."""
    passes = -(-wide // 64)
    per_pass = -(-wide // passes)
    proc = _mask(per_pass if passes == 1 else per_pass + 3 & ~3)  # as izer: whole memories
    return [
        _conv(_mask(3), "0x2000", data_format="HWC", output_processors=proc),
        {"out_offset": "0x0000", "processors": proc, "output_processors": proc,
         "op": "passthrough", "write_gap": 1},
        {"out_offset": "0x0004", "processors": proc, "output_processors": proc,
         "in_offset": "0x2000", "in_sequences": 0, "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "ReLU", "write_gap": 1},
    ]


def eltwise_multipass(wide: int = 96) -> Network:
    """A standalone add of two `wide`-channel maps (two or more passes), then a 1x1 conv:
    96 channels run as the hardware's multi-pass element-wise operation; on MAX78000 more
    than two passes (`eltwise_emulated`) izer emulates as one pass over stacked rows."""
    proc = _wide_pair(wide)[1]["processors"]
    described = _wide_pair(wide) + [
        {"in_sequences": "[1, 2]", "in_offset": "0x0000", "out_offset": "0x2000",
         "processors": proc, "output_processors": proc, "op": "none", "eltwise": "add"},
        {"out_offset": "0x0000", "processors": proc, "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((wide, 3, 3, 3), 8, True, 27), ((wide, wide, 1, 1), 8, True, wide),
                        ((8, wide, 1, 1), 8, True, wide)]
    return described, weights, (3, 6, 6)


def eltwise_emulated() -> Network:
    """The add over 144 channels: three passes of two operands."""
    return eltwise_multipass(144)


def eltwise_conv_multipass() -> Network:
    """An add of two 96-channel maps fused with a 3x3 convolution (in-flight, two passes;
    the convolution without a bias: MAX78002 refuses a bias there), then a 1x1 conv."""
    wide = 96
    proc = _wide_pair(wide)[1]["processors"]
    described = _wide_pair(wide) + [
        _conv(proc, "0x2000", in_offset="0x0000", in_sequences="[1, 2]", eltwise="add",
              output_processors=proc),
        {"out_offset": "0x0000", "processors": proc, "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((wide, 3, 3, 3), 8, True, 27), ((wide, wide, 1, 1), 8, True, wide),
                        ((wide, wide, 3, 3), 8, False, wide * 9),
                        ((8, wide, 1, 1), 8, True, wide)]
    return described, weights, (3, 6, 6)


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
            "depthwise_moved_max78002": (depthwise_moved, 151, "MAX78002"),
            "depthwise_moved_quadrant_max78002": (depthwise_moved_quadrant, 152, "MAX78002"),
            "depthwise_moved_multipass_max78002": (depthwise_moved_multipass, 153, "MAX78002"),
            "dilated_conv1d": (dilated_conv1d, 47, "MAX78000"),
            "dilated_conv1d_max78002": (dilated_conv1d, 147, "MAX78002"),
            "eltwise_multipass": (eltwise_multipass, 48, "MAX78000"),
            "eltwise_multipass_max78002": (eltwise_multipass, 148, "MAX78002"),
            "eltwise_emulated": (eltwise_emulated, 49, "MAX78000"),
            "eltwise_emulated_max78002": (eltwise_emulated, 149, "MAX78002"),
            "eltwise_conv_multipass": (eltwise_conv_multipass, 50, "MAX78000"),
            "eltwise_conv_multipass_max78002": (eltwise_conv_multipass, 150, "MAX78002"),
            "dilated_conv1d_wide": (dilated_conv1d_wide, 51, "MAX78000"),
            "dilated_conv1d_wide_max78002": (dilated_conv1d_wide, 154, "MAX78002"),
            "read_gap_max78002": (read_gap_max78002, 45, "MAX78002")}
