"""Max/average pooling shared by standalone pool layers and pooling fused into a conv.

Integer rule: max pooling is exact; average pooling divides the integer sum by the window
size with the rounding mode's pooling rule (half_up, floor, or a device's trunc), see
numerics.np_divide_round. The
torch fake-quant path rounds avg * 128 the same way, which is exact in float64.
"""

from __future__ import annotations

from edgebuild.core import numerics
from edgebuild.ops.operator import FusedPool, pair


def geometry(pool: FusedPool, dims: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sizes = pair(pool.size) if dims == 2 else (pool.size,)
    strides = sizes if pool.stride is None else (pair(pool.stride) if dims == 2 else (pool.stride,))
    return tuple(sizes), tuple(strides)


def torch_pool(x, pool: FusedPool | None, dims: int, mode):
    import torch.nn.functional as F

    if pool is None:
        return x
    sizes, strides = geometry(pool, dims)
    if pool.mode.value == "max":
        fn = F.max_pool1d if dims == 1 else F.max_pool2d
        return fn(x, sizes, strides)
    fn = F.avg_pool1d if dims == 1 else F.avg_pool2d
    out = fn(x, sizes, strides)
    if mode.kind == "qat":
        out = numerics.torch_pool_round(out * numerics.ACT_SCALE, mode.rounding) / numerics.ACT_SCALE
    return out


def windows(x, sizes, strides, dilation=None, pad=None):
    """View of x (N, C, *spatial) as (N, C, *out_spatial, *kernel) windows (int64 safe)."""
    import numpy as np

    dims = len(sizes)
    dilation = dilation or (1,) * dims
    if pad and any(pad):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    spans = tuple(d * (k - 1) + 1 for k, d in zip(sizes, dilation, strict=True))
    view = np.lib.stride_tricks.sliding_window_view(x, spans, axis=tuple(range(2, 2 + dims)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dilation)
    return view[index]


def reference_pool(x, pool: FusedPool | None, dims: int, rounding: str):
    if pool is None:
        return x
    sizes, strides = geometry(pool, dims)
    view = windows(x, sizes, strides)
    axes = tuple(range(-dims, 0))
    if pool.mode.value == "max":
        return view.max(axis=axes)
    count = 1
    for s in sizes:
        count *= s
    return numerics.np_divide_round(view.sum(axis=axes), count, rounding)
