"""Which optional paths of the Cortex-M4 kernels for TFLite's number format
(templates/kernels/eb_tfl_opt.c) a layer runs: the names its C emitter gives its step
(ops.c OPTIONAL_PATHS, prefixed "tfl_"), so that a model links the paths its layers take and
eb_config.h leaves out the others (EB_OPT_NO_TFL_<PATH>; eb_tfl_opt.c turns each into a
constant and its tests then fold). Each predicate mirrors the C test it names; the kernels
choose at run time from the layer's shape, activation range and quantization, which the
generator knows, so the prediction is the path the C takes. A path left out changes no
result (its layers take the next path, at worst the portable kernel of eb_tfl.c), only the
speed: tests/test_tfl_kernel_selection.py checks both on the M4.

Layers are their C parameter records as the emitters write them (tflite.operators: the
fields of eb_tfl_conv_params, eb_tfl_fc_params, eb_tfl_pool_params, by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edgebuild.formats.tflite import kernels

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.formats.tflite.quant import TflQuant

Fields = Mapping[str, Any]

FAST_BOUND = 1 << 29  # EB_TFL_FAST_BOUND: |acc| below it takes the fast requantization
TAP_BOUND = 255 * 128  # |x - zp| * |w| of one tap, at most (eb_tfl_rq_of's 32640)
RIGHT_SHIFTS = (1, 22)  # eb_tfl_rq.e of the assembly's channels: a right shift by 1..22
POOL_WINDOW_MAX = 1 << 23  # eb_tfl_pool2d_opt: larger windows run eb_tfl_pool2d


def full_range(q: TflQuant) -> bool:
    """eb_tfl_act_of's `full`: the activation range is all of int8, so SSAT alone clamps;
    a narrower one takes the assembly's clamping forms ("tfl_clamp")."""
    return q.act_min <= -128 and q.act_max >= 127


def right_shift_channels(q: TflQuant) -> NDArray[np.bool_]:
    """Per output channel, whether eb_tfl_rq_of gives it a right shift e in 1..22 (the form
    the assembly runs; the others run in C): a row of all-zero weights whose bias bound is
    past FAST_BOUND (a constant, e 1), else m >= 0, |bias| + taps * 32640 below FAST_BOUND
    (or, when that bound is past it, |bias| + 255 * sum |w|) and a shift in -22..-1."""
    assert q.weight is not None and q.multiplier is not None and q.shift is not None
    rows = np.asarray(q.weight, dtype=np.int64).reshape(len(q.weight), -1)
    size = np.zeros(len(rows), np.int64) if q.bias is None else np.abs(q.bias)
    bound = size + rows.shape[1] * TAP_BOUND
    rare = bound >= FAST_BOUND  # the C sums the row's magnitudes only then
    magnitude = np.where(rare, np.abs(rows).sum(axis=1), 1)
    bound = np.where(rare, size + magnitude * 255, bound)
    shifted = (q.shift >= -RIGHT_SHIFTS[1]) & (q.shift <= -RIGHT_SHIFTS[0])
    return np.asarray((magnitude == 0) | ((q.multiplier >= 0) & (bound < FAST_BOUND) & shifted))


@dataclass(frozen=True)
class GemmPlan:
    """The GEMM path's choices of eb_tfl_plan_of: taps per output channel (k), whether the
    weights are expanded into int16 records (else int8 in the loop), the output channels per
    tile."""

    k: int
    records: bool
    tile: int


def gemm_plan(f: Fields) -> GemmPlan:
    """eb_tfl_plan_of for a layer the depthwise path does not take: records when a group's
    weights fit WEXP_MAX, or for a 1x1 stride-1 unpadded conv of 4 pixels or more (the flat
    path) in balanced even tiles of channels when a tile of TILE_MIN fits."""
    opg = f["out_c"] // f["groups"]
    k = f["in_c"] // f["groups"] * f["k_h"] * f["k_w"]
    kp = (k + 3) & ~3
    if opg * kp <= kernels.WEXP_MAX:
        return GemmPlan(k, True, opg)
    most = (kernels.WEXP_MAX // kp) & ~1
    one = (f["k_h"], f["k_w"], f["stride_h"], f["stride_w"]) == (1, 1, 1, 1)
    flat = one and (f["pad_top"], f["pad_left"]) == (0, 0) and \
        (f["out_h"], f["out_w"]) == (f["in_h"], f["in_w"])
    if most >= kernels.TILE_MIN and flat and f["out_h"] * f["out_w"] >= 4:
        tiles = -(-opg // most)
        return GemmPlan(k, True, (-(-opg // tiles) + 1) & ~1)
    return GemmPlan(k, False, opg)


def gemm_paths(f: Fields, fast: NDArray[np.bool_], clamp: bool) -> frozenset[str]:
    """eb_tfl_gemm on the M4. Records: a group whose channels are all right shifts and come
    in pairs (its channels and tiles even: group_pairs) runs the pair GEMM
    ("tfl_gemm_pairs", which clamps itself); another group's right-shift channels run
    eb_tfl_gemm4 ("tfl_gemm4", eb_tfl_rows_rec). int8 weights: eb_tfl_gemm8 when k % 4 == 0
    ("tfl_gemm8", eb_tfl_rows_run). Those two clamp a narrower range in their own forms
    ("tfl_clamp")."""
    plan = gemm_plan(f)
    groups = fast.reshape(f["groups"], -1)
    paths: set[str] = set()
    if plan.records:
        pairs = groups.all(axis=1) & (groups.shape[1] % 2 == 0) & (plan.tile % 2 == 0)
        if pairs.any():
            paths.add("tfl_gemm_pairs")
        if groups[~pairs].any():
            paths.add("tfl_gemm4")
    elif plan.k % 4 == 0 and fast.any():
        paths.add("tfl_gemm8")
    if clamp and paths & {"tfl_gemm4", "tfl_gemm8"}:
        paths.add("tfl_clamp")
    return frozenset(paths)


def dw3_stride(f: Fields) -> int:
    """eb_tfl_dw3_stride (all of the project's kernels linked): the stride, 1 or 2, of a 3x3
    layer of dilation 1 and the same stride along both axes (the rows kernels), else 0."""
    three = (f["k_h"], f["k_w"], f["dil_h"], f["dil_w"]) == (3, 3, 1, 1)
    st = f["stride_h"]
    return st if three and f["stride_w"] == st and st in (1, 2) else 0


def depthwise_paths(f: Fields, fast: NDArray[np.bool_], clamp: bool) -> frozenset[str]:
    """eb_tfl_dw ("tfl_depthwise"): its right-shift channels of a 3x3 layer (dw3_stride) run
    the rows kernel of the stride ("tfl_dw3_s1", "tfl_dw3_s2"; a stride-1 layer's strip
    kernel needs its selection too) and, when out_w % 4 == 1 at stride 1, the strip kernel of
    the last column ("tfl_dw3_strip"); a narrower range their clamping forms; other channels
    and shapes the C loops of the path."""
    st = dw3_stride(f)
    if st == 0 or not fast.any():
        return frozenset({"tfl_depthwise"})
    paths = {"tfl_depthwise", f"tfl_dw3_s{st}"}
    if st == 1 and f["out_w"] % 4 == 1:
        paths.add("tfl_dw3_strip")
    return frozenset(paths | ({"tfl_clamp"} if clamp else set()))


def conv_paths(f: Fields, q: TflQuant) -> frozenset[str]:
    """eb_tfl_conv2d_opt: the depthwise path (kernels.is_depthwise: eb_tfl_plan_of's test)
    or the GEMM, and the optional paths within it the layer runs."""
    fast = right_shift_channels(q)
    clamp = not full_range(q)
    if kernels.is_depthwise(f["in_c"], f["out_c"], f["groups"]):
        return depthwise_paths(f, fast, clamp)
    return gemm_paths(f, fast, clamp)


def linear_paths(f: Fields) -> frozenset[str]:
    """eb_tfl_linear_opt: 1 or 2 outputs the narrow kernel ("tfl_fc_narrow"); others the
    expanded input against rows of word-aligned weights, k a multiple of 4 and at least 8
    (row triples and pairs: "tfl_fc_aligned"), else, k at least 4, eb_tfl_fc4 ("tfl_fc4").
    Word-aligned: weights.c's arrays are, as GCC aligns arrays for ARM when it does not
    optimize for size (-O2, the projects' flags; under -Os such a layer takes eb_tfl_fc4 if
    linked, else the C loop, the same results)."""
    k = f["in_f"]
    if f["out_f"] <= 2:
        return frozenset({"tfl_fc_narrow"})
    if k % 4 == 0 and k >= 8:
        return frozenset({"tfl_fc_aligned"})
    return frozenset({"tfl_fc4"} if k >= 4 else ())


def pool_paths(f: Fields) -> frozenset[str]:
    """eb_tfl_pool2d_opt: an average over the whole unpadded plane the global loop
    ("tfl_pool_global"), other windows the loops of their mode ("tfl_pool_max",
    "tfl_pool_avg"); windows past POOL_WINDOW_MAX values the portable kernel."""
    if f["k_h"] * f["k_w"] > POOL_WINDOW_MAX:
        return frozenset()
    avg = f["mode"] == 1  # eb_tfl_pool_params.mode: EB_TFL_POOL_MAX 0, EB_TFL_POOL_AVG 1
    whole = (f["k_h"], f["k_w"], f["out_h"], f["out_w"], f["pad_top"], f["pad_left"]) == (
        f["in_h"], f["in_w"], 1, 1, 0, 0)
    if avg and whole:
        return frozenset({"tfl_pool_global"})
    return frozenset({"tfl_pool_avg" if avg else "tfl_pool_max"})
