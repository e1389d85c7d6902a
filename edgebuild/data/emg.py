"""synthetic-emg: multichannel surface-EMG-like bursts, generated from a seed.

The reference material's on-device training case is a silent-speech EMG model (14
electrodes x 700 samples at 500 Hz, 9 words); its recordings (SilentWear) are not
available offline, so this format makes data of that shape instead. It is not EMG, and
accuracy on it says nothing about EMG; it exists so that a model of that shape trains,
quantizes and fine-tunes on data with the properties that matter to the kernels and the
training code: a signal that is amplitude-modulated noise (a muscle's electrical activity
is noise whose envelope is the contraction), classes that differ by which electrodes fire
when, and per-sample variation (timing, strength, electrode gain, noise).

Each class ("word") is a sequence of `phases` muscle activations drawn from the
generator's seed: an onset and length in the window, and a spatial profile over the
electrodes (a bump centred on one electrode, as neighbouring electrodes pick up the same
muscle). A sample of that class is the sum of its activations, each band-limited noise
under a smooth envelope, with the onset jittered, the strength and each electrode's gain
varied, plus background noise. Deterministic: numpy's PCG64 from `seed` and float64
arithmetic, so every machine generates the same arrays.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from edgebuild.data.dataset import CommonFields, Probe, Raw

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


class EmgSpec(CommonFields):
    format: Literal["synthetic-emg"]
    channels: int = Field(strict=True, default=14, ge=1, le=256, description="electrodes")
    length: int = Field(strict=True, default=700, ge=16, le=65536,
                        description="samples per window")
    classes: int = Field(strict=True, default=9, ge=2, le=256, description="words")
    train: int = Field(strict=True, default=720, ge=1, le=100_000,
                       description="training samples (classes in turn)")
    test: int = Field(strict=True, default=180, ge=1, le=100_000,
                      description="test samples (classes in turn)")
    phases: int = Field(strict=True, default=3, ge=1, le=16,
                        description="muscle activations per word")
    noise: float = Field(strict=True, default=0.3, ge=0, le=10,
                         description="background noise, relative to an activation's strength")
    jitter: float = Field(strict=True, default=0.03, ge=0, le=0.5,
                          description="onset jitter, as a fraction of the window")
    seed: int = Field(strict=True, default=0, ge=0, le=2**32 - 1,
                      description="the words and the samples are drawn from this seed")


def files(spec: EmgSpec, base: Path) -> list[Path]:
    return []  # generated: the section's fields key the build


def probe(spec: EmgSpec, base: Path) -> Probe:
    return Probe((spec.channels, spec.length), spec.classes)


def load(spec: EmgSpec, base: Path) -> Raw:
    import numpy as np

    rng = np.random.default_rng(spec.seed)
    words = [_word(spec, rng) for _ in range(spec.classes)]
    x_train, y_train = _samples(spec, words, spec.train, rng)
    x_test, y_test = _samples(spec, words, spec.test, rng)
    return Raw(x_train, y_train, x_test, y_test,
               tuple(f"word{k}" for k in range(spec.classes)))


Word = list[tuple[float, float, "NDArray[np.float64]", float]]  # onset, length, profile, band


def _word(spec: EmgSpec, rng: np.random.Generator) -> Word:
    """A word's activations: onset and length (fractions of the window), the spatial
    profile over the electrodes and the noise band (a smoothing length in samples)."""
    import numpy as np

    phases: Word = []
    electrodes = np.arange(spec.channels, dtype=np.float64)
    for _ in range(spec.phases):
        onset = float(rng.uniform(0.05, 0.7))
        length = float(rng.uniform(0.1, 0.3))
        centre = float(rng.uniform(0, spec.channels - 1))
        width = float(rng.uniform(0.8, 3.0))
        profile = np.exp(-0.5 * ((electrodes - centre) / width) ** 2)
        phases.append((onset, length, profile, float(rng.integers(1, 5))))
    return phases


def _samples(spec: EmgSpec, words: list[Word], count: int, rng: np.random.Generator
             ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    import numpy as np

    labels = np.arange(count, dtype=np.int64) % spec.classes
    x = np.empty((count, spec.channels, spec.length), dtype=np.float64)
    t = np.arange(spec.length, dtype=np.float64) / spec.length
    for i, label in enumerate(labels):
        gain = rng.uniform(0.7, 1.3, size=(spec.channels, 1))
        signal = spec.noise * rng.standard_normal((spec.channels, spec.length))
        for onset, length, profile, band in words[label]:
            start = onset + spec.jitter * rng.standard_normal()
            envelope = np.exp(-0.5 * ((t - start - length / 2) / (length / 4)) ** 2)
            carrier = _band_noise(rng.standard_normal((spec.channels, spec.length)), int(band))
            strength = rng.lognormal(0.0, 0.25)
            signal += strength * profile[:, None] * envelope[None, :] * carrier
        x[i] = gain * signal
    return x, labels


def _band_noise(white: NDArray[np.float64], band: int) -> NDArray[np.float64]:
    """White noise smoothed over `band` samples and rescaled to unit variance: a lower
    band for a larger `band`, so that words differ in spectrum as well as in place."""
    import numpy as np

    if band <= 1:
        return white
    kernel = np.ones(band) / band
    smooth = np.apply_along_axis(lambda row: np.convolve(row, kernel, mode="same"), 1, white)
    return smooth * np.sqrt(band)


Spec = EmgSpec  # the registry's name for a format's manifest section
