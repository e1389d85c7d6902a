"""edgebuild.targets.max7800x.overlap: when a layer may write its output over its own input.

The oracle is a brute-force simulation of the hardware model the module states: output
pixels computed in raster order, each after reading every input pixel its window touches,
then written. Writing over an input pixel that a later (or the same) output pixel still
reads is a failure; `clash` must find exactly those placements.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from edgebuild.targets.max7800x.hwlayer import HwLayer, Pool
from edgebuild.targets.max7800x.overlap import clash, last_reader
from edgebuild.targets.max7800x.placement import Region


def layer(op: str, shape, kernel=1, stride=1, pad=0, pool=None, output_pad=0) -> HwLayer:
    """A hardware layer of `op` over a (C, H, W) or (C, L) input."""
    dims = len(shape) - 1

    def tup(v):
        return (v,) * dims

    window = None if pool is None else Pool("max", tup(pool), tup(pool))
    pooled = shape if window is None else (shape[0], *((n - pool) // pool + 1 for n in shape[1:]))
    if op == "conv_transpose2d":
        spatial = [(n - 1) * stride - 2 * pad + (kernel - 1) + output_pad + 1
                   for n in pooled[1:]]
    elif op in ("conv2d", "conv1d"):
        spatial = [(n + 2 * pad - kernel) // stride + 1 for n in pooled[1:]]
    elif op == "linear":
        spatial = []
    else:
        spatial = list(pooled[1:])
    weights = op in ("conv2d", "conv1d", "conv_transpose2d")
    return HwLayer(name="l", members=("l",), op=op, inputs=("x",), in_channels=shape[0],
                   in_shape=tuple(shape), pooled_shape=tuple(pooled), out_channels=4,
                   out_shape=(4, *spatial), kernel=tup(kernel) if weights else None,
                   pad=tup(pad) if weights else None, stride=tup(stride) if weights else None,
                   dilation=tup(1) if weights else None,
                   output_pad=tup(output_pad) if op == "conv_transpose2d" else None,
                   pool=window)


def reads(hw: HwLayer) -> list[set[int]]:
    """Input raster indices each output pixel reads, enumerated tap by tap."""
    spatial_in, spatial_out = hw.in_shape[1:], hw.out_shape[1:]
    if hw.op == "linear":
        return [set(range(_count(spatial_in)))]
    window = hw.pool.size[0] if hw.pool is not None else 1
    step = hw.pool.stride[0] if hw.pool is not None else 1
    pooled = hw.pooled_shape[1:]
    out = []
    for o in itertools.product(*(range(n) for n in spatial_out)):
        taps = set()
        for q in _sources(hw, o, pooled):
            for a in itertools.product(range(window), repeat=len(q)):
                x = [qi * step + ai for qi, ai in zip(q, a, strict=True)]
                if all(0 <= v < n for v, n in zip(x, spatial_in, strict=True)):
                    taps.add(_raster(x, spatial_in))
        out.append(taps)
    return out


def _sources(hw: HwLayer, o, pooled):
    """Pooled coordinates output coordinate `o` reads."""
    if hw.kernel is None:
        return [tuple(o)]
    found = []
    for k in itertools.product(*(range(n) for n in hw.kernel)):
        if hw.op == "conv_transpose2d":  # o = i * S - p + k
            q = [(oi + p - ki) for oi, p, ki in zip(o, hw.pad, k, strict=True)]
            if any(v % s for v, s in zip(q, hw.stride, strict=True)):
                continue
            q = [v // s for v, s in zip(q, hw.stride, strict=True)]
        else:
            q = [oi * s - p + ki for oi, s, p, ki in zip(o, hw.stride, hw.pad, k, strict=True)]
        if all(0 <= v < n for v, n in zip(q, pooled, strict=True)):
            found.append(tuple(q))
    return found


def _count(spatial) -> int:
    total = 1
    for n in spatial:
        total *= n
    return total


def _raster(x, spatial) -> int:
    index = 0
    for v, n in zip(x, spatial, strict=True):
        index = index * n + v
    return index


def simulate(hw: HwLayer, written: Region, read: Region, passes: int = 1) -> bool:
    """Whether computing in raster order over these regions reads only intact input; an
    input in several passes keeps each pixel's passes in consecutive entries."""
    owner = {}
    for e in range(read.count):
        for b in range(read.width):
            owner[read.start + read.stride * e + b] = e
    per = written.count // max(1, _count(hw.out_shape[1:]))
    for i, taps in enumerate(reads(hw)):
        for j in taps:
            for e in range(j * passes, (j + 1) * passes):
                if any(owner.get(read.start + read.stride * e + b) != e
                       for b in range(read.width)):
                    return False
        for k in range(i * per, (i + 1) * per):
            for b in range(written.width):
                owner[written.start + written.stride * k + b] = None
    return True


LAYERS = st.one_of(
    st.builds(lambda k, s, p, pool: ("conv2d", dict(kernel=k, stride=s, pad=min(p, k - 1),
                                                    pool=pool)),
              st.sampled_from([1, 3]), st.sampled_from([1, 2]), st.integers(0, 2),
              st.sampled_from([None, 2])),
    st.builds(lambda k, p: ("conv1d", dict(kernel=k, pad=min(p, k - 1))),
              st.sampled_from([1, 3, 5]), st.integers(0, 2)),
    st.builds(lambda p: ("conv_transpose2d", dict(kernel=3, stride=2, pad=p, output_pad=1)),
              st.integers(0, 2)),
    st.builds(lambda pool: ("pool", dict(pool=pool)), st.sampled_from([2, 3])),
    st.just(("passthrough", {})),
    st.just(("linear", {})),
)


@settings(max_examples=400, deadline=None)
@given(spec=LAYERS, h=st.integers(3, 7), w=st.integers(3, 7), delta=st.integers(-60, 60),
       gap_in=st.integers(0, 1), gap_out=st.integers(0, 1), wide=st.booleans(),
       passes=st.sampled_from([1, 1, 2, 3]))
def test_clash_matches_a_brute_force_simulation(spec, h, w, delta, gap_in, gap_out, wide,
                                                passes):
    op, options = spec
    shape = (4, h) if op == "conv1d" else (4, h, w)
    if op == "pool" and min(shape[1:]) < options["pool"]:
        return
    hw = layer(op, shape, **options)
    in_pixels, out_pixels = _count(shape[1:]), max(1, _count(hw.out_shape[1:]))
    base = 400
    gap_in = gap_in if passes == 1 else 0
    read = Region("x", 0, base, 4 * (gap_in + 1), in_pixels * passes, 4, -1, 0)
    if wide:  # a 32-bit value per pixel: four consecutive words
        written = Region("l", 0, base + 4 * delta, 4, 4 * out_pixels, 4, 0, 1)
    else:
        written = Region("l", 0, base + 4 * delta, 4 * (gap_out + 1), out_pixels, 4, 0, 1)
    assert (clash(hw, written, read, out_pixels, in_pixels) is None) == \
        simulate(hw, written, read, passes), (op, options, shape, delta, passes)


def test_last_reader_is_the_last_output_reading_each_input():
    for op, options in [("conv2d", dict(kernel=3, pad=1)), ("conv2d", dict(kernel=3, pool=2)),
                        ("conv2d", dict(kernel=1, stride=2)),
                        ("conv_transpose2d", dict(kernel=3, stride=2, pad=1, output_pad=1)),
                        ("pool", dict(pool=2)), ("conv1d", dict(kernel=5, pad=2)),
                        ("linear", {})]:
        shape = (4, 9) if op == "conv1d" else (4, 7, 6)
        hw = layer(op, shape, **options)
        expected = [-1] * _count(shape[1:])
        for i, taps in enumerate(reads(hw)):
            for j in taps:
                expected[j] = max(expected[j], i)
        assert list(last_reader(hw)) == expected, op


def test_a_one_by_one_layer_may_trail_its_input_by_one_word():
    hw = layer("conv2d", (4, 8, 8))
    read = Region("x", 0, 256, 4, 64, 4, -1, 0)
    assert clash(hw, Region("l", 0, 256, 4, 64, 4, 0, 1), read, 64, 64) is None  # in place
    assert clash(hw, Region("l", 0, 252, 4, 64, 4, 0, 1), read, 64, 64) is None
    assert clash(hw, Region("l", 0, 260, 4, 64, 4, 0, 1), read, 64, 64) == (0, 1)


def test_a_three_by_three_layer_needs_a_row_and_a_pixel_of_lag():
    hw = layer("conv2d", (4, 8, 8), kernel=3, pad=1)
    read = Region("x", 0, 256, 4, 64, 4, -1, 0)
    # output pixel i may overwrite input pixel i - 9 (a row above, one to the left): output
    # pixel i + 1 reads from input pixel i - 8 on
    assert clash(hw, Region("l", 0, 256 - 4 * 9, 4, 64, 4, 0, 1), read, 64, 64) is None
    assert clash(hw, Region("l", 0, 256 - 4 * 8, 4, 64, 4, 0, 1), read, 64, 64) == (8, 0)
