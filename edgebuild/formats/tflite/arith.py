"""TFLite's integer arithmetic, in numpy: the fixed-point primitives its int8 kernels (and
TFLM's, and CMSIS-NN's) compute with, and the derivation of their multipliers from the
float scales in a `.tflite` file.

Every function works on int64 arrays holding int32 values and returns int32 values (as
int64), element-wise, so the integer reference of a whole layer is one call. The rules are
TensorFlow's (tensorflow/lite/kernels/internal/common.h, quantization_util.cc and gemmlowp's
fixedpoint.h), double rounding (TFLITE_SINGLE_ROUNDING unset, as TensorFlow builds LiteRT):

- `srdhm(a, b)`: SaturatingRoundingDoublingHighMul, a * b / 2^31 rounded to nearest with
  ties up (gemmlowp's nudge is 1 - 2^30 below zero), saturating the one overflow
  (INT32_MIN * INT32_MIN);
- `rdbpot(x, e)`: RoundingDivideByPOT, x / 2^e rounded half away from zero;
- `mbqm(x, m, s)`: MultiplyByQuantizedMultiplier, x * m * 2^(s - 31): a left shift first
  (s > 0), then srdhm, then a rounding right shift (s < 0) — two roundings, as LiteRT's
  reference convolutions, depthwise convolutions and ADD compute;
- `mbqm_single(x, m, s)`: the same product rounded once, half up: (x * m + 2^(30 - s)) >>
  (31 - s) in 64 bits — what LiteRT's reference FULLY_CONNECTED computes (measured: on the
  MLPerf Tiny AD model's ten layers, 100,320 outputs, 0 differ from LiteRT with it, 711
  with the two-rounding form).

tests/test_tflite_arith.py checks them against LiteRT's kernels; the C kernels
(templates/kernels/eb_tfl.h) compute the same with int32/int64 C arithmetic.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    Ints = NDArray[np.int64]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(x: ArrayLike) -> Ints:
    """Two's complement int32 wrap-around of int64 values (C's int32 addition)."""
    v = np.asarray(x, dtype=np.int64)
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srdhm(a: ArrayLike, b: ArrayLike) -> Ints:
    """SaturatingRoundingDoublingHighMul of int32 values."""
    a64, b64 = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    # a * b fits int64 except INT32_MIN^2 = 2^62, which does too; the nudge keeps it below 2^63.
    ab = a64 * b64
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    total = ab + nudge
    # C's int64 division by 2^31 truncates toward zero.
    high = np.where(total >= 0, total >> 31, -((-total) >> 31))
    overflow = (a64 == INT32_MIN) & (b64 == INT32_MIN)
    return np.where(overflow, INT32_MAX, high).astype(np.int64)


def rdbpot(x: ArrayLike, exponent: ArrayLike) -> Ints:
    """RoundingDivideByPOT: x / 2^exponent, half away from zero (exponent 0..31)."""
    v = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = v & mask
    threshold = (mask >> 1) + (v < 0)
    return (v >> e) + (remainder > threshold)


def mbqm(x: ArrayLike, multiplier: ArrayLike, shift: ArrayLike) -> Ints:
    """MultiplyByQuantizedMultiplier (TFLite's double-rounding form)."""
    s = np.asarray(shift, dtype=np.int64)
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    shifted = wrap32(np.asarray(x, dtype=np.int64) * (np.int64(1) << left))
    return rdbpot(srdhm(shifted, multiplier), right)


def mbqm_single(x: ArrayLike, multiplier: ArrayLike, shift: ArrayLike) -> Ints:
    """MultiplyByQuantizedMultiplier rounded once (TFLITE_SINGLE_ROUNDING's form)."""
    total = 31 - np.asarray(shift, dtype=np.int64)
    product = np.asarray(x, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    return wrap32((product + (np.int64(1) << (total - 1))) >> total)


def saturating_pot(x: ArrayLike, exponent: int) -> Ints:
    """gemmlowp's SaturatingRoundingMultiplyByPOT<exponent>."""
    v = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return v
    if exponent < 0:
        return rdbpot(v, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    return np.where(v > threshold, INT32_MAX,
                    np.where(v < -threshold, INT32_MIN, v << exponent)).astype(np.int64)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier: real = m * 2^(shift - 31), m in [2^30, 2^31) (0 for 0)."""
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    fixed = _round_half_away(fraction * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return INT32_MAX, 30
    return fixed, shift


def _round_half_away(value: float) -> int:
    """std::round: halves away from zero."""
    return int(math.floor(abs(value) + 0.5)) * (1 if value >= 0 else -1)


def quantize(value: float, scale: float, zero_point: int) -> int:
    """A float in a tensor's int8 units as TFLite's activation ranges compute it:
    zero_point + round(value / scale), the division in float32."""
    ratio = float(np.float32(value) / np.float32(scale))
    return zero_point + _round_half_away(ratio)


def activation_range(act: str, scale: float, zero_point: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized for int8: the fused activation's clamp."""
    low, high = -128, 127
    if act in ("relu", "relu6", "relu_n1_to_1"):
        low = max(low, quantize(-1.0 if act == "relu_n1_to_1" else 0.0, scale, zero_point))
    if act == "relu6":
        high = min(high, quantize(6.0, scale, zero_point))
    if act == "relu_n1_to_1":
        high = min(high, quantize(1.0, scale, zero_point))
    return low, high


# --- softmax (TFLite reference_ops::Softmax, int8 in, int8 out) --------------------------------

SCALED_DIFF_INTEGER_BITS = 5  # the exp() input is Q5.26
ACCUMULATION_INTEGER_BITS = 12  # the sum of exps is Q12.19


def softmax_params(beta: float, input_scale: float) -> tuple[int, int, int]:
    """(input multiplier, input left shift, diff_min) as TFLite's SoftmaxPrepare computes them
    (PreprocessSoftmaxScaling, CalculateInputRadius) for the reference kernel."""
    real = min(float(np.float32(beta)) * float(np.float32(input_scale))
               * (1 << (31 - SCALED_DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    multiplier, left_shift = quantize_multiplier(real)
    radius = ((1 << SCALED_DIFF_INTEGER_BITS) - 1) * (1 << (31 - SCALED_DIFF_INTEGER_BITS)) \
        / (1 << left_shift)
    return multiplier, left_shift, -int(math.floor(radius))


def _exp_quarter(a: Ints) -> Ints:
    """exp(x) for x in [-1/4, 0), Q0.31 in and out (gemmlowp)."""
    constant_term, one_third = 1895147668, 715827883
    x = wrap32(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = saturating_pot(x4, -2)
    poly = saturating_pot(wrap32(srdhm(wrap32(x4_over_4 + x3), one_third) + x2), -1)
    return wrap32(constant_term + srdhm(constant_term, wrap32(x + poly)))


BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
          (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: Ints) -> Ints:
    """exp(a) for a <= 0 in Q5.26, result Q0.31 (gemmlowp's exp_on_negative_values<5>)."""
    fractional = 31 - SCALED_DIFF_INTEGER_BITS
    quarter = 1 << (fractional - 2)
    a_mod = wrap32((a & (quarter - 1)) - quarter)
    result = _exp_quarter(saturating_pot(a_mod, SCALED_DIFF_INTEGER_BITS))
    remainder = wrap32(a_mod - a)
    for exponent, multiplier in BARREL:
        bit = np.int64(1) << (fractional + exponent)
        result = np.where(remainder & bit, srdhm(result, multiplier), result)
    return np.where(a == 0, INT32_MAX, result).astype(np.int64)


def one_over_one_plus_x(a: Ints) -> Ints:
    """1 / (1 + x) for x in [0, 1), Q0.31 (gemmlowp's one_over_one_plus_x_for_x_in_0_1)."""
    a64 = np.asarray(a, dtype=np.int64)
    total = a64 + INT32_MAX
    half_denominator = np.where(total >= 0, (total + 1) // 2, -((-total + 1) // 2))
    x = wrap32(1515870810 + srdhm(half_denominator, -1010580540))
    one_q2 = 1 << 29
    for _ in range(3):
        product = srdhm(half_denominator, x)
        x = wrap32(x + saturating_pot(srdhm(x, wrap32(one_q2 - product)), 2))
    return saturating_pot(x, 1)


def reciprocal(total: Ints, integer_bits: int) -> tuple[Ints, Ints]:
    """GetReciprocal: (1 / total in Q0.31 scaled into [0.5, 1), bits over unit)."""
    t = np.asarray(total, dtype=np.int64)
    # CountLeadingZeros of the sum as uint32 (a sum of more than 4096 exps wraps negative)
    unsigned = t & 0xFFFFFFFF
    headroom_plus_one = np.array([32 - int(v).bit_length() for v in unsigned.reshape(-1)],
                                 dtype=np.int64).reshape(t.shape)
    over = integer_bits - headroom_plus_one
    shifted = wrap32(((unsigned << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x(shifted), over


def softmax(x: NDArray[np.integer[Any]], multiplier: int, left_shift: int,
            diff_min: int) -> Ints:
    """int8 softmax over the last axis, int8 out (scale 1/256, zero point -128)."""
    v = np.asarray(x, dtype=np.int64)
    diff = v - v.max(axis=-1, keepdims=True)
    inside = diff >= diff_min
    rescaled = srdhm(wrap32(diff * (1 << left_shift)), multiplier)
    exps = np.where(inside, exp_on_negative_values(rescaled), 0)
    accumulated = saturating_pot(exps, -ACCUMULATION_INTEGER_BITS)
    sums = wrap32(accumulated.sum(axis=-1, keepdims=True))
    scale, over = reciprocal(sums, ACCUMULATION_INTEGER_BITS)
    exponent = over + 31 - 8
    unsaturated = rdbpot(srdhm(scale, exps), exponent)
    out = np.clip(unsaturated - 128, -128, 127)
    return np.where(inside, out, -128).astype(np.int64)
