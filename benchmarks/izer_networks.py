"""Hand-written network descriptions for the izer corpus (benchmarks/izer_corpus.py): the
layer kinds a random `chain` does not reach, each written as the vendor's own descriptions
write it — element-wise operations over interleaved data memory (as ressimplenet), a
standalone element-wise passthrough, three operands, channel concatenation read by a
convolution or a passthrough, and a transposed convolution.

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


def read_gap_max78002() -> Network:
    """MAX78002 reads interleaved data directly (`read_gap`): two convolutions write word 0
    and word 1 of each pair (write gap 1), a convolution reads only word 1 (read gap 1), and
    a passthrough reads word 0 the same way."""
    described = _interleaved_pair(1) + [
        _conv(_mask(C), "0x2000", in_offset="0x0004", in_sequences=2, read_gap=1),
        {"out_offset": "0x0000", "processors": _mask(C), "op": "conv2d", "kernel_size": "1x1",
         "pad": 0, "activate": "None"},
    ]
    weights: Weights = [((C, 3, 3, 3), 8, True, 27), ((C, C, 3, 3), 8, True, C * 9),
                        ((C, C, 3, 3), 8, True, C * 9), ((6, C, 1, 1), 8, True, C)]
    return described, weights, (3, 10, 10)


# name -> (network, seed); on the MAX78000 unless the name ends in _max78002
NETWORKS = {"eltwise_passthrough": (eltwise_passthrough, 40),
            "eltwise_three": (eltwise_three, 41), "concat_conv": (concat_conv, 42),
            "concat_passthrough": (concat_passthrough, 43),
            "conv_transpose": (conv_transpose, 44),
            "read_gap_max78002": (read_gap_max78002, 45)}
