"""ctypes mirrors of the C kernel structs (eb_kernels.h, eb_tiling.h), in one place for
every test that calls the kernels; each test also checks them against the C sizeof/offsetof."""

from __future__ import annotations

import ctypes

I8, I16, I32 = ctypes.c_int8, ctypes.c_int16, ctypes.c_int32

CONV_FIELDS = ("in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h",
               "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups")
POOL_FIELDS = ("c", "in_h", "in_w", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w")


class ConvParams(ctypes.Structure):
    """Mirror of eb_conv_params: int16_t fields, then int8_t fields (wbits: 0 for int8
    weights, else the width of packed ones)."""

    _fields_ = [(name, I16) for name in CONV_FIELDS] + \
        [(name, I8) for name in ("shift", "rounding", "act", "wbits")]


class PoolParams(ctypes.Structure):
    """Mirror of eb_pool_params."""

    _fields_ = [(name, I16) for name in POOL_FIELDS] + [(name, I8) for name in ("mode", "rounding")]


class Tile(ctypes.Structure):
    """Mirror of eb_tile (eb_tiling.h)."""

    _fields_ = [("rows", I16), ("channels", I16), ("double_buffer", I8)]


def layout_probe(structs: dict, prefix: str) -> list[str]:
    """C functions `<prefix>_sizeof_<key>` and `<prefix>_offsetof_<key>_<field>` for every
    mirrored struct, so a test can compare the C layout with the ctypes mirror."""
    lines = []
    for key, (c_name, struct) in structs.items():
        lines.append(f"int {prefix}_sizeof_{key}(void) {{ return (int)sizeof({c_name}); }}")
        for field, _ in struct._fields_:
            lines.append(f"int {prefix}_offsetof_{key}_{field}(void) "
                         f"{{ return (int)offsetof({c_name}, {field}); }}")
    return lines
