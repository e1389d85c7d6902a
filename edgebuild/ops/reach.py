"""The taps a convolution's outputs reach: a kernel row or column that, for every output,
lands in the padding multiplies only zeros, so the C project runs the conv without it.

A 3x3 conv on a one-row input reads only its middle kernel row; a 1x14 stride-2 kernel with
6 columns of padding on 4-wide rows reads 6 of its 14 columns; a 10x10 dilation-2 kernel with
9 rows of padding on 4 rows reads 4 of its 10 rows. The generated C gets the kernel cut to
the taps some output reaches (`trim`: its first tap, its count, the padding before it) and
the weights cut the same way (`cut_weight`); the sums are the same integers (every tap left
out adds x * w with x a padding zero), so the outputs, the reference and the known answers
are unchanged while the kernels skip work that was never work (the shape benchmark's seeds
0..39: 305 of 2,013 convolutions of at least 4 K MACs have such taps).

Each axis is cut on its own and only so far that the C kernels' view of the layer stays one
they already take: the padding before the kernel stays >= 0, the padding after it (what the
outputs' last taps reach past the input) stays at most the padding before it (the padded
copies some kernels make hold in + 2 pad), and the output size the plane's formula gives is
the layer's own. The transposed conv and the training kernels keep the whole kernel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from edgebuild.core.geometry import Plane, Shape, plane, pooled, window_out

# a conv op's layer -> (kernel, stride, pad, dilation), each per spatial axis (ops.conv.Axes)
Axes = Callable[[Any], tuple[tuple[int, ...], ...]]


@dataclass(frozen=True)
class AxisReach:
    """One spatial axis of a conv as its C runs it: kernel taps [first, first + taps) of
    the layer's, `pad` before them."""

    first: int
    taps: int
    pad: int


def _reached(t: int, n_in: int, n_out: int, s: int, p: int, d: int) -> bool:
    """Whether tap t reads inside the input for some output o < n_out: the first output
    whose input o s - p + t d is >= 0 (o >= ceil((p - t d) / s)) reads below n_in."""
    first = max(0, -(-(p - t * d) // s))
    return first < n_out and first * s - p + t * d < n_in


def axis_reach(n_in: int, k: int, s: int, p: int, d: int) -> AxisReach:
    """The taps along one axis some output reaches inside the input, cut as the module
    docstring says: of the cuts (f taps before, b after) that leave out only unreached
    taps and keep the padding before >= 0, the padding after at most it and the formula's
    output size, the one leaving out most (the whole kernel where none does)."""
    n_out = window_out(n_in, k, s, p, d)  # (a layer's: at least 1)
    reached = [t for t in range(k) if _reached(t, n_in, n_out, s, p, d)]
    if not reached:
        return AxisReach(0, k, p)
    best = (0, 0)
    for f in range(reached[0] + 1):
        for b in range(k - reached[-1]):
            taps, pad = k - f - b, p - f * d
            after = (n_out - 1) * s + (taps - 1) * d + 1 - n_in - pad
            if pad >= 0 and after <= pad and window_out(n_in, taps, s, pad, d) == n_out and \
                    f + b > sum(best):
                best = (f, b)
    return AxisReach(best[0], k - sum(best), p - best[0] * d)


def trim(in_sizes: tuple[int, ...], kernel: tuple[int, ...], stride: tuple[int, ...],
         pad: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[AxisReach, ...]:
    """Every spatial axis's reach (the conv's per-axis fields, as its op's `axes` gives
    them; `in_sizes` its input's spatial sizes, after a fused pool)."""
    return tuple(axis_reach(*fields) for fields in zip(in_sizes, kernel, stride, pad,
                                                       dilation, strict=True))


def cut_weight(weight: NDArray[Any], reach: tuple[AxisReach, ...]) -> NDArray[Any]:
    """The weights (out, in / groups, *kernel) cut to the reached taps: contiguous again,
    in the same order (what weights.c stores for the cut conv)."""
    index = (slice(None), slice(None),
             *(slice(r.first, r.first + r.taps) for r in reach))
    return np.ascontiguousarray(weight[index])


def of_layer(layer: Any, in_shape: Shape, axes: Axes) -> tuple[AxisReach, ...]:
    """Per spatial axis the taps a conv layer's outputs reach, over its (already pooled)
    input `in_shape`."""
    kernel, stride, pad, dilation = axes(layer)
    return trim(tuple(in_shape[1:]), kernel, stride, pad, dilation)


def pooled_input(layer: Any, in_shapes: Sequence[Shape]) -> Shape:
    """A conv layer's input: the layer's, through its fused pool."""
    shape = in_shapes[0]
    return shape if layer.pool is None else pooled(shape, layer.pool, len(shape) - 1)


def c_plane(layer: Any, in_shape: Shape, out_shape: Shape, axes: Axes,
            vertical: bool = False) -> Plane:
    """The plane the C project runs a conv layer in (ops.conv.conv_plane's, its kernel cut
    to the reached taps; the weights cut alike: `stored_weight`)."""
    _, stride, _, dilation = axes(layer)
    reach = of_layer(layer, in_shape, axes)
    return plane(in_shape, out_shape, tuple(r.taps for r in reach), stride,
                 tuple(r.pad for r in reach), dilation, layer.groups, vertical)


def c_kernel(layer: Any, in_shapes: Sequence[Shape], axes: Axes) -> tuple[int, ...]:
    """The cut kernel's size per axis (the scratch the C kernels claim for it)."""
    return tuple(r.taps for r in of_layer(layer, pooled_input(layer, in_shapes), axes))


def stored_weight(layer: Any, in_shapes: Sequence[Shape], weight: Any, axes: Axes) -> Any:
    """The weights weights.c stores for the C project's conv: cut to c_plane's taps."""
    return cut_weight(weight, of_layer(layer, pooled_input(layer, in_shapes), axes))
