"""The numerics contract (docs/internals/numerics.md), written once, used everywhere.

Activations are int8 `q` meaning `q / 128` (Q7, as on MAX78000). A compute layer with
`b`-bit weights has integer weights `w_q` in [-2^(b-1), 2^(b-1) - 1] and a power-of-two
weight scale exponent `s`: the real weight is `w_q * 2^(s - (b-1))`. Its accumulator is
exact int32/int64:

    acc = sum(w_q * x_q) + bias_q            (bias_q in accumulator units)
    out = saturate(act(round(acc * 2^shift)))   with  shift = s - (b - 1)

`round` is the manifest's rounding mode applied to a *right* shift (`half_up`:
floor(v + 0.5) as the MAX78000 rounds; `floor`: plain arithmetic shift, as in the DS-CNN
notes); a left shift (shift >= 0) is exact. Rounding happens before the activation (the
order matters for `abs`), saturation is last: [-128, 127], or [0, 127] after relu/abs. A
`wide` last layer outputs `acc` itself (int32, no shift, activation or saturation).

A rounding *mode* names the requantization rounding and, after a `/`, the average-pooling
rule when that differs: `half_up`, `floor`, or a device's `half_up/trunc` (MAX7800x: the
sum of products rounds half up, average pooling truncates toward zero). Device profiles
also fix the bias format: a bias is a `bias_bits` integer in units of 2^bias_scale_log2
accumulator units (MAX7800x: int8 added as b x 128), and the weight scale exponent range
depends on the weight width (`shift_limits`).

The PyTorch fake-quant model computes the same thing in real units: every partial sum
is an integer multiple of one unit 2^(-7 + shift), so in float64 it is exact and agrees
with the integer reference bit for bit. (float32 is exact only to 2^24 — never use it
for the integer-mode comparison.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:  # numpy and torch load on first use: importing edgebuild stays cheap
    import numpy as np
    import torch
    from numpy.typing import NDArray

    Int = TypeVar("Int", bound=np.integer[Any])  # an integer dtype, kept by the operation


class Activation(StrEnum):
    """Applied after the output shift, before saturation to int8 (see the numerics contract)."""

    none = "none"
    relu = "relu"
    abs = "abs"


class Rounding(StrEnum):
    # The requantization rounding a manifest may choose; a device may add a pooling rule
    # (see the module docstring). A comment, not a docstring: it would enter the schema.

    half_up = "half_up"
    floor = "floor"


ROUNDING_MODES = tuple(Rounding)
WEIGHT_BITS = (1, 2, 4, 8)
SHIFT_RANGE = (-15, 15)  # allowed weight scale exponent s
INT8_MIN, INT8_MAX = -128, 127
ACT_SCALE = 128.0


def requantize_rounding(mode: str) -> str:
    """The rounding of `acc * 2^shift` in a rounding mode (see the module docstring)."""
    return mode.split("/")[0]


def pool_rounding(mode: str) -> str:
    """The rounding of average pooling in a rounding mode: half_up, floor or trunc."""
    return mode.split("/")[-1]


def shift_limits(bits: int, total: tuple[int, int] | None = None) -> tuple[int, int]:
    """Allowed weight scale exponents s. Generic targets: SHIFT_RANGE. A device whose total
    shift `s + (8 - bits)` must stay within `total` (MAX7800x: [-15, 15], so 4-bit weights
    allow s in [-19, 11] as in the manual's output_shift table)."""
    if total is None:
        return SHIFT_RANGE
    return total[0] - (8 - bits), total[1] - (8 - bits)


def weight_limits(bits: int) -> tuple[int, int]:
    """Integer weight range: 8 -> [-128, 127], 4 -> [-8, 7], 2 -> [-2, 1], 1 -> [-1, 0]."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def scale_exponent(threshold: float, limits: tuple[int, int] = SHIFT_RANGE) -> int:
    """Smallest s with threshold <= 2^s, clipped to `limits`: weights/2^s fit [-1, 1]."""
    if not threshold > 0 or not math.isfinite(threshold):
        return limits[0]
    return int(min(max(math.ceil(math.log2(threshold) - 1e-12), limits[0]), limits[1]))


def output_shift(scale_exp: int, bits: int) -> int:
    """The power-of-two shift of the accumulator: `s - (b - 1)` (see the module docstring)."""
    return scale_exp - (bits - 1)


class Arithmetic(Protocol):
    """A device's fixed number format (see the module docstring), as its profile gives it
    (targets.max7800x.records.Numbers; targets.numbers.device_numbers): allowed weight
    widths, the bias format, the total shift range, the requantization rounding and the
    average-pooling rule."""

    @property
    def weight_bits(self) -> tuple[int, ...]: ...

    @property
    def bias_bits(self) -> int: ...

    @property
    def bias_scale_log2(self) -> int: ...

    @property
    def total_shift(self) -> tuple[int, int]: ...

    @property
    def rounding(self) -> str: ...

    @property
    def avg_pool(self) -> str: ...


@dataclass(frozen=True)
class QuantParams:
    """A quantized compute layer: integer weights/bias and its weight scale exponent."""

    weight: Any  # numpy int64
    bias: Any | None  # numpy int64, accumulator units
    scale_exp: int
    bits: int

    @property
    def shift(self) -> int:
        return output_shift(self.scale_exp, self.bits)


# ---- numpy (integer reference) -------------------------------------------------------

def np_round_shift(acc: NDArray[np.integer[Any]], shift: int, rounding: str) -> NDArray[np.int64]:
    """acc * 2^shift rounded to an integer (int64 in, int64 out)."""
    import numpy as np

    acc = acc.astype(np.int64)
    if shift >= 0:
        return acc << shift
    right = -shift
    if requantize_rounding(rounding) == "half_up":
        return (acc + (1 << (right - 1))) >> right
    return acc >> right


def np_activate(values: NDArray[Int], act: str) -> NDArray[Int]:
    import numpy as np

    if act == "relu":
        return np.maximum(values, 0)
    if act == "abs":
        return np.abs(values)
    return values


def np_saturate(values: NDArray[Int]) -> NDArray[Int]:
    import numpy as np

    return np.clip(values, INT8_MIN, INT8_MAX)


def np_requantize(acc: NDArray[np.integer[Any]], shift: int, rounding: str,
                  act: str) -> NDArray[np.int64]:
    return np_saturate(np_activate(np_round_shift(acc, shift, rounding), act))


def np_quantize_inputs(x: NDArray[np.floating[Any]]) -> NDArray[np.int8]:
    """Real values in [-1, 1] -> int8 Q7 inputs (round half up, saturate): the data stage's
    rule, also for drifted data (ondevice.drift)."""
    import numpy as np

    return np.clip(np.floor(128.0 * x + 0.5), -128, 127).astype(np.int8)


def np_divide_round(total: NDArray[Int], count: int, rounding: str) -> NDArray[Int]:
    """total / count with the mode's pooling rule: used by average pooling (integers only)."""
    import numpy as np

    rule = pool_rounding(rounding)
    if rule == "half_up":
        return (2 * total + count) // (2 * count)
    if rule == "trunc":
        return np.sign(total) * (np.abs(total) // count)
    return total // count


def np_quantize_weights(weights: NDArray[np.floating[Any]], scale_exp: int, bits: int,
                        rounding: str = "half_up") -> NDArray[np.int64]:
    """Real weights -> integers in the bit width's range (round half up, saturate)."""
    import numpy as np

    low, high = weight_limits(bits)
    scaled = weights.astype(np.float64) * 2.0 ** ((bits - 1) - scale_exp)
    return np.clip(np.floor(scaled + 0.5), low, high).astype(np.int64)


def np_quantize_bias(bias: NDArray[np.floating[Any]], scale_exp: int, bits: int, bias_bits: int,
                     bias_scale_log2: int = 0) -> NDArray[np.int64]:
    """Real bias -> accumulator units 2^(-7 + s - (b-1)): a `bias_bits` integer times
    2^bias_scale_log2 (rounded half up, saturated)."""
    import numpy as np

    unit_exp = -7 + output_shift(scale_exp, bits) + bias_scale_log2
    limit = (1 << (bias_bits - 1))
    scaled = bias.astype(np.float64) * 2.0 ** (-unit_exp)
    stored = np.clip(np.floor(scaled + 0.5), -limit, limit - 1).astype(np.int64)
    return stored << bias_scale_log2


# ---- torch (training and fake quantization) ------------------------------------------

def torch_round(values: torch.Tensor, rounding: str) -> torch.Tensor:
    """Round with a straight-through gradient (identity backward)."""
    import torch

    rounded = torch.floor(values + 0.5) if requantize_rounding(rounding) == "half_up" \
        else torch.floor(values)
    return values + (rounded - values).detach()


def torch_pool_round(values: torch.Tensor, rounding: str) -> torch.Tensor:
    """Average pooling's rounding (the mode's pooling rule), straight-through gradient."""
    import torch

    rule = pool_rounding(rounding)
    if rule == "trunc":
        rounded = torch.trunc(values)
    else:
        rounded = torch.floor(values + 0.5) if rule == "half_up" else torch.floor(values)
    return values + (rounded - values).detach()


def torch_activate(values: torch.Tensor, act: str) -> torch.Tensor:
    import torch

    if act == "relu":
        return torch.relu(values)
    if act == "abs":
        return torch.abs(values)
    return values


def torch_requantize(pre: torch.Tensor, rounding: str, act: str) -> torch.Tensor:
    """Real pre-activation -> real Q7 output on the 1/128 grid (the integer path in real units)."""
    import torch

    q = torch_round(pre * ACT_SCALE, rounding)
    q = torch_activate(q, act)
    return torch.clamp(q, INT8_MIN, INT8_MAX) / ACT_SCALE


def torch_clamp_float(values: torch.Tensor, act: str) -> torch.Tensor:
    """Float training's hardware-aware clamp to the Q7 range [-1, 127/128] (Hardtanh, whose
    backward is cheaper than torch.clamp's)."""
    import torch.nn.functional as F

    return F.hardtanh(torch_activate(values, act), INT8_MIN / ACT_SCALE, INT8_MAX / ACT_SCALE)


def torch_scale_exponent(weights: torch.Tensor, quantile: float,
                         limits: tuple[int, int] = SHIFT_RANGE) -> int:
    """The weight scale exponent from a quantile of |w| (1.0 = the maximum)."""
    import torch

    flat = weights.detach().abs().flatten().double()
    threshold = flat.max() if quantile >= 1.0 else torch.quantile(flat, quantile)
    return scale_exponent(float(threshold), limits)


def torch_fake_weights(weights: torch.Tensor, scale_exp: int, bits: int) -> torch.Tensor:
    """Weights on the quantized grid w_q * 2^(s-(b-1)), straight-through gradient."""
    import torch

    low, high = weight_limits(bits)
    step = 2.0 ** (scale_exp - (bits - 1))
    q = torch.clamp(torch_round(weights / step, "half_up"), low, high)
    return q * step


def torch_fake_bias(bias: torch.Tensor, scale_exp: int, bits: int, bias_bits: int,
                    bias_scale_log2: int = 0) -> torch.Tensor:
    import torch

    step = 2.0 ** (-7 + output_shift(scale_exp, bits) + bias_scale_log2)
    limit = float(1 << (bias_bits - 1))
    return torch.clamp(torch_round(bias / step, "half_up"), -limit, limit - 1) * step
