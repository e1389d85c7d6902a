"""What every dataset format shares: file references, split/normalize options, the raw record.

A format module provides `Spec` (its manifest section), `files(spec, base)` (the files
whose *content* keys the build), `probe(spec, base)` (sample shape and class count, cheap:
used by `edgebuild check`) and `load(spec, base)` (the raw arrays).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol, TypeVar

from pydantic import Field, model_validator

from edgebuild.core.fields import Strict

if TYPE_CHECKING:  # numpy loads on first use: `check` never pays for it
    import numpy as np
    from numpy.typing import NDArray

    Element = TypeVar("Element", bound=np.generic)


class PackageFile(Strict):
    """A data file shipped inside an installed Python package (found without importing it)."""

    package: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
    path: str


FileRef = str | PackageFile


class Split(Strict):
    val: float | None = Field(default=None, ge=0, lt=1, description=(
        "fraction of the training data held out as the validation split (picks the best "
        "epoch; 0: every sample trains, epochs compared on the training loss). Unset: 0.1 "
        "when that holds at least 30 samples, else 0. Not with a validation split in the "
        "file (npz x_val/y_val), which is used as it is"))
    test: float = Field(default=0.2, gt=0, lt=1,
                        description="fraction held out for test when the source has no test split")


class Limit(Strict):
    train: int | None = Field(strict=True, default=None, ge=1, description=(
        "keep at most N samples for training, the validation split included: N are drawn "
        "from the training data, then split.val of them is held out (a validation split "
        "from the file is cut in proportion)"))
    test: int | None = Field(strict=True, default=None, ge=1, description="keep at most N test samples")


class NormalizeMethod(StrEnum):
    minmax = "minmax"
    standard = "standard"
    none = "none"
    scale = "scale"


# a normalization constant as the manifest gives it: finite; YAML `true` is no number
Constant = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Divisor = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
PerChannel = Annotated[tuple[Constant, ...], Field(min_length=1, max_length=65536)]
DivisorPerChannel = Annotated[tuple[Divisor, ...], Field(min_length=1, max_length=65536)]


class Normalize(Strict):
    """How raw values map onto the int8 input range [-128, 127] (real value q/128): x' =
    (x - offset) / scale, then q = floor(128 x' + 0.5) saturated (pipeline/stages/data.py).
    minmax and standard measure offset and scale on the training split; none and scale
    keep a model's fixed input contract (an imported model trained on [0, 1] inputs)."""

    method: NormalizeMethod = Field(default=NormalizeMethod.minmax, description=(
        "minmax: the training min/max map to -1/+1; standard: the training mean to 0 and "
        "+-3 standard deviations to +-1; none: the values are the model's real inputs "
        "already (its range is [-1, 127/128]) and are quantized as they are, q = "
        "floor(128 x + 0.5) saturated to [-128, 127]; scale: x' = (x - offset) / scale "
        "with the given `scale` and `offset`, then quantized like none"))
    per_channel: bool = Field(default=False, description=(
        "minmax and standard: statistics per channel (a sample's first axis) instead of "
        "one for all values"))
    scale: Divisor | DivisorPerChannel | None = Field(default=None, description=(
        "method scale only: the divisor, one number or one per channel"))
    offset: Constant | PerChannel | None = Field(default=None, description=(
        "method scale only: subtracted first, one number or one per channel (default 0)"))

    @model_validator(mode="after")
    def _fields_of_the_method(self) -> Normalize:
        """scale/offset belong to method scale, per_channel to the measured methods: a field
        another method would ignore is refused, not dropped."""
        method = self.method.value
        if method == "scale" and self.scale is None:
            raise ValueError("method scale needs `scale`: x' = (x - offset) / scale (offset "
                             "defaults to 0)")
        if method != "scale" and (self.scale is not None or self.offset is not None):
            raise ValueError(f"`scale` and `offset` are read with method: scale only, not "
                             f"with method: {method}")
        if self.per_channel and method in ("none", "scale"):
            raise ValueError(f"per_channel applies to minmax and standard (statistics per "
                             f"channel); method {method} takes no statistics" + (
                                 ": give `scale` and `offset` one value per channel instead"
                                 if method == "scale" else ""))
        counts = {len(v) for v in (self.scale, self.offset) if isinstance(v, tuple)}
        if len(counts) > 1:
            raise ValueError(f"`scale` and `offset` give different channel counts "
                             f"({' and '.join(map(str, sorted(counts)))})")
        return self

    def channels(self) -> int | None:
        """How many channels the given scale/offset are for (None: one value for all)."""
        counts = [len(v) for v in (self.scale, self.offset) if isinstance(v, tuple)]
        return counts[0] if counts else None


class ChannelAxis(StrEnum):
    first = "first"
    add = "add"
    last = "last"


class CommonFields(Strict):
    split: Split = Split()
    limit: Limit = Limit()
    normalize: Normalize = Normalize()
    channel_axis: ChannelAxis = Field(default=ChannelAxis.first, description=(
        "where a sample's channel axis is, as the format reads it: first (the samples are "
        "[C, L] or [C, H, W] already, and [features] for linear models); add (they have "
        "none: [49, 10] becomes one channel of 49x10, [1, 49, 10], for a 2-D model); last "
        "(channels last, as Keras stores them: [H, W, C] becomes [C, H, W], [L, C] becomes "
        "[C, L])"))
    frames: int | None = Field(
        strict=True, default=None, ge=2, le=1024,
        description="cut each sample's last axis into this many equal consecutive frames, "
                    "making clips (frames, ..., length / frames) for a model with a buffer layer")


def channelled_shape(shape: tuple[int, ...], axis: ChannelAxis) -> tuple[int, ...]:
    """A sample's shape after `channel_axis` (see `channelled`)."""
    if axis is ChannelAxis.add:
        return (1, *shape)
    if axis is ChannelAxis.last and len(shape) > 1:
        return (shape[-1], *shape[:-1])
    return tuple(shape)


def channelled(x: NDArray[Element], axis: ChannelAxis) -> NDArray[Element]:
    """Samples (N, *shape) with their channel axis first: a new axis of one channel
    (`add`), or the last axis moved to the front (`last`)."""
    import numpy as np

    if axis is ChannelAxis.add:
        return x.reshape(len(x), 1, *x.shape[1:])
    if axis is ChannelAxis.last and x.ndim > 2:
        return np.ascontiguousarray(np.moveaxis(x, -1, 1))
    return x


def framed_shape(shape: tuple[int, ...], frames: int | None) -> tuple[int, ...]:
    """A sample's shape after `frames` (see `framed`); a DataFileError when it cannot be cut."""
    if frames is None:
        return tuple(shape)
    if shape[-1] % frames:
        raise DataFileError("dataset.frames", f"samples of shape {list(shape)} cannot be cut into "
                            f"{frames} equal frames along their last axis ({shape[-1]} values); "
                            f"use a divisor of {shape[-1]}")
    return (frames, *shape[:-1], shape[-1] // frames)


def framed(x: NDArray[Element], frames: int | None) -> NDArray[Element]:
    """Samples (N, ..., T) as clips (N, frames, ..., T / frames): frame k holds the values
    k*T/frames .. (k+1)*T/frames - 1 of every channel, in time order."""
    import numpy as np

    if frames is None:
        return x
    cut = x.reshape(*x.shape[:-1], frames, x.shape[-1] // frames)
    return np.ascontiguousarray(np.moveaxis(cut, -2, 1))


class DataFileError(Exception):
    """A data file is missing or malformed; the message names the file. `field`: where in
    the dataset section the problem is written (`("path",)`), when one field holds it;
    empty: the section as a whole."""

    def __init__(self, path: Path | str, message: str, field: tuple[str, ...] = ()):
        self.path = str(path)
        self.field = field
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Probe:
    sample_shape: tuple[int, ...]
    classes: int


@dataclass(frozen=True)
class Raw:
    """Arrays as read: x float64 (N, *sample_shape); y int64 class indices 0..classes-1.
    A test or validation split is None when the source has none (edgebuild holds it out
    of the training data)."""

    x_train: NDArray[np.float64]
    y_train: NDArray[np.int64]
    x_test: NDArray[np.float64] | None
    y_test: NDArray[np.int64] | None
    class_names: tuple[str, ...]
    x_val: NDArray[np.float64] | None = None
    y_val: NDArray[np.int64] | None = None


SpecT = TypeVar("SpecT", bound=CommonFields)


class Format(Protocol[SpecT]):
    """What a format module provides (see the module docstring): the registry's values."""

    Spec: type[SpecT]

    def files(self, spec: SpecT, base: Path) -> list[Path]: ...

    def probe(self, spec: SpecT, base: Path) -> Probe: ...

    def load(self, spec: SpecT, base: Path) -> Raw: ...


# import name -> the name pip installs it by, where they differ
DISTRIBUTIONS = {"sklearn": "scikit-learn"}


def ref_field(name: str, ref: FileRef) -> tuple[str, ...]:
    """Where the file reference in the dataset field `name` is written: a package file's
    `path`, or the field itself."""
    return (name, "path") if isinstance(ref, PackageFile) else (name,)


def resolve(ref: FileRef, base: Path) -> Path:
    """A manifest path is relative to the manifest's folder; a PackageFile to its package."""
    if isinstance(ref, str):
        path = Path(ref).expanduser()
        return path if path.is_absolute() else base / path
    module = ref.package.split(".")[0]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise DataFileError(f"{ref.package}:{ref.path}",
                            f"Python package {module!r} is not installed (install it: `pip "
                            f"install --no-deps {DISTRIBUTIONS.get(module, module)}`; only "
                            "its data files are read)")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root.joinpath(*ref.package.split(".")[1:], ref.path)


def existing(path: Path, field: tuple[str, ...] = ()) -> Path:
    """`path`, a file. A path the system cannot look up (a name longer than the file
    system allows, a directory that may not be searched) is not "not found":
    `Path.is_file` raises for it, and a problem at `field` says why, with the path cut
    short (a 5000-character path is no help in a message)."""
    try:
        found = path.is_file()
    except OSError as exc:
        raise DataFileError(_short(path), _unreadable(path, exc), field) from None
    if not found:
        raise DataFileError(path, "data file not found")
    return path


def _short(path: Path, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 3:]}"


def _unreadable(path: Path, exc: OSError) -> str:
    import errno

    if exc.errno == errno.ENAMETOOLONG:
        return (f"the path ({len(str(path))} characters) is too long for the file system "
                f"({exc.strerror}); give a shorter one")
    return f"cannot be looked up ({exc.strerror})"
