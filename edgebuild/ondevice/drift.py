"""A simulated field shift of sensor data: per-channel gain and offset.

The on-device training scenario (a new user's EMG electrodes, a re-mounted IMU) is data
whose channels are scaled and offset relative to the training data. The shift is drawn
once from the manifest's seed and applied to every split alike (it is the same sensor),
in real units of the normalized input (q/128), then re-quantized like the data stage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest.ondevice import Drift


def parameters(channels: int, gain: float, offset: float, seed: int
               ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(seed + 7919)
    return (rng.uniform(1 - gain, 1 + gain, channels).astype(np.float64),
            rng.uniform(-offset, offset, channels).astype(np.float64))


def apply(x: NDArray[np.int8], spec: Drift | None, seed: int) -> NDArray[np.int8]:
    """int8 samples (N, C, ...) or (N, F) -> drifted int8 samples; `spec` None: unchanged."""
    from edgebuild.core.numerics import np_quantize_inputs as quantize

    if spec is None:
        return x
    gains, offsets = parameters(x.shape[1], spec.gain, spec.offset, seed)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    real = x.astype(np.float64) / 128.0 * gains.reshape(shape) + offsets.reshape(shape)
    return quantize(real)
