"""One layer's TFLite quantization: the integers TFLite's int8 kernels compute with, as
`edgebuild import-tflite` derives them from the `.tflite` file's float scales
(tflite.arith) and stores them in the manifest's weights file (`model.weights`, one .npz).

Keys of the weights file, per layer `<l>` (every deployed layer that computes; views have
none):

- `<l>.zero_points` int32 [input zero point per input..., output zero point];
- `<l>.range` int32 [min, max]: the fused activation's clamp in output units;
- `<l>.scale` float32 [output scale] (to read outputs as real numbers; not computed with);
- a convolution or linear layer: `<l>.weight` int8 (edgebuild's layout, ops' `weights`
  facet), `<l>.bias` int32 (TFLite's bias, accumulator units), `<l>.multiplier` and
  `<l>.shift` int32 per output channel (x * m * 2^(shift - 31));
- add: `<l>.multiplier` / `<l>.shift` [input 1, input 2, output] and `<l>.left_shift`;
- softmax: `<l>.multiplier` [input multiplier], `<l>.left_shift`, `<l>.diff_min`;
- and `input.zero_points` / `input.scale`: the model input's quantization.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Arrays = dict[str, NDArray[Any]]

PER_LAYER = ("zero_points", "range", "scale", "multiplier", "shift", "left_shift", "diff_min")
COMPUTE = ("weight", "bias")


@dataclass(frozen=True)
class TflQuant:
    """A layer's TFLite integers. `in_zp`: one per input; `multiplier`/`shift`: per output
    channel (compute), per operand (add) or one (softmax)."""

    in_zp: tuple[int, ...]
    out_zp: int
    act_min: int
    act_max: int
    scale: float
    multiplier: NDArray[np.int64] | None = None
    shift: NDArray[np.int64] | None = None
    left_shift: int = 0
    diff_min: int = 0
    weight: NDArray[np.int64] | None = None
    bias: NDArray[np.int64] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def layer_quant(arrays: Arrays, name: str) -> TflQuant:
    """`name`'s record from the weights file's arrays (checked before: tflite.check)."""
    import numpy as np

    def ints(key: str) -> NDArray[np.int64] | None:
        value = arrays.get(f"{name}.{key}")
        return None if value is None else np.asarray(value, dtype=np.int64).reshape(-1)

    zero_points = ints("zero_points")
    bounds = ints("range")
    assert zero_points is not None and bounds is not None
    scalar = {key: int(np.asarray(arrays[f"{name}.{key}"]).reshape(-1)[0])
              for key in ("left_shift", "diff_min") if f"{name}.{key}" in arrays}
    return TflQuant(tuple(int(v) for v in zero_points[:-1]), int(zero_points[-1]),
                    int(bounds[0]), int(bounds[1]),
                    float(np.asarray(arrays[f"{name}.scale"]).reshape(-1)[0]),
                    ints("multiplier"), ints("shift"), scalar.get("left_shift", 0),
                    scalar.get("diff_min", 0), _weight(arrays, name), ints("bias"))


def _weight(arrays: Arrays, name: str) -> NDArray[np.int64] | None:
    import numpy as np

    value = arrays.get(f"{name}.weight")
    return None if value is None else np.asarray(value, dtype=np.int64)


def input_quant(arrays: Arrays) -> tuple[float, int]:
    """(scale, zero point) of the model's input."""
    import numpy as np

    return (float(np.asarray(arrays["input.scale"]).reshape(-1)[0]),
            int(np.asarray(arrays["input.zero_points"]).reshape(-1)[-1]))
