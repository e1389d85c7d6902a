"""Stage `data`: load a dataset by format, split it, and quantize inputs to int8.

Input convention (the numerics contract): every sample is stored as int8 `q` whose real
value is `q / 128`, i.e. in [-1, 127/128] — the MAX78000 Q7 data format, and exactly what
the integer model will see. Raw values are first mapped by x' = (x - offset) / scale
(`dataset.normalize`): `minmax` and `standard` measure offset and scale on the *training*
split only (`minmax`: the training min/max map to -1/+1; `standard`: the mean maps to 0
and +-3 standard deviations to +-1); `none` takes the values as they are (offset 0, scale
1: they are the model's real inputs already) and `scale` takes the manifest's own offset
and scale, so that a model whose input contract is fixed (an imported one) sees what it
was trained on. Then `q = clip(floor(128 * x' + 0.5), -128, 127)` (round half up, as the
hardware rounds). The float model trains on `q / 128` too, so float, fake-quant and
integer inference start from identical inputs.

Splits: a split the source gives is used as it is; otherwise the test split
(`split.test`) and then the validation split (`split.val`) are held out of the training
data, class by class. `limit.train` caps the samples training reads, the validation split
included: it is applied before the validation split is held out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.build.stage import Context, Stage
from edgebuild.core import arrays as arrays_io
from edgebuild.core.errors import UserError

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.data.dataset import Limit, Normalize, Raw, Split
    from edgebuild.data.info import Normalization
    from edgebuild.pipeline.validation import Checked

    Part = tuple[NDArray[np.float64], NDArray[np.int64]]  # (x, y) of one split

STANDARD_SIGMAS = 3.0
FEW_VALIDATION = 30  # validation samples below which picking an epoch is picking noise
SATURATED_SHARE = 0.001  # out-of-range input values (normalize none/scale) worth a warning
# dataset fields added after the first data stages were keyed, with their defaults: left
# out of the key while at them
LATER_FIELDS: dict[tuple[str, ...], object] = {
    ("frames",): None, ("channel_axis",): "first", ("normalize", "scale"): None,
    ("normalize", "offset"): None}


def config(checked: Checked) -> JSONObject:
    spec = checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    return {"dataset": _keyed(spec.model_dump(mode="json")), "seed": checked.manifest.seed}


def _keyed(dataset: dict[str, Any]) -> dict[str, Any]:
    """The dataset section without the fields added later that sit at their defaults: the
    key material of a manifest that does not use them stays as it was."""
    for path, default in LATER_FIELDS.items():
        *section, name = path
        record = dataset
        for part in section:
            record = record[part]
        if record.get(name, default) == default:
            record.pop(name, None)
    return dataset


def files(checked: Checked) -> list[Path]:
    from edgebuild.data import FORMATS
    from edgebuild.data.dataset import DataFileError

    spec = checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    try:
        return FORMATS[spec.format].files(spec, checked.base)
    except DataFileError as exc:
        raise UserError(checked.document.diagnostic(("dataset", *exc.field), str(exc))) from None


def run(ctx: Context[Checked]) -> None:
    import numpy as np

    from edgebuild.core import numerics
    from edgebuild.data.dataset import framed
    from edgebuild.data.info import DataInfo

    spec = ctx.checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    raw = _load(ctx.checked)
    rng = np.random.default_rng(ctx.checked.manifest.seed)
    splits = _split(raw, spec.split, spec.limit, rng)
    normalization = normalizer(splits["train"][0], spec.normalize)
    arrays: dict[str, NDArray[Any]] = {}
    for part, (x, y) in splits.items():
        arrays[f"x_{part}"] = framed(numerics.np_quantize_inputs(normalization.apply(x)),
                                     spec.frames)
        arrays[f"y_{part}"] = y
    arrays_io.save(ctx.out / "data.npz", **arrays)
    info = DataInfo(tuple(raw.class_names), tuple(arrays["x_train"].shape[1:]),
                    {p: int(len(y)) for p, (_, y) in splits.items()}, 1 / 128,
                    normalization.record)
    (ctx.out / "data.json").write_text(json.dumps(info.to_json(), indent=1, sort_keys=True) + "\n")
    held_out = info.counts["val"]
    if 0 < held_out < FEW_VALIDATION and ctx.checked.manifest.model.weights is None:
        ctx.warn(few_validation(held_out))
    if normalization.method in ("none", "scale"):
        outside = saturated(normalization.apply(splits["train"][0]))
        if outside > SATURATED_SHARE:
            ctx.warn(out_of_range(outside, normalization.method))


def _load(checked: Checked) -> Raw:
    """The format's arrays, with their channel axis first (`dataset.channel_axis`)."""
    import dataclasses

    from edgebuild.data import FORMATS
    from edgebuild.data.dataset import DataFileError, channelled

    spec = checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    try:
        raw = FORMATS[spec.format].load(spec, checked.base)
    except DataFileError as exc:
        raise UserError(checked.document.diagnostic(("dataset", *exc.field), str(exc))) from None
    axis = spec.channel_axis
    return dataclasses.replace(
        raw, x_train=channelled(raw.x_train, axis),
        x_test=None if raw.x_test is None else channelled(raw.x_test, axis),
        x_val=None if raw.x_val is None else channelled(raw.x_val, axis))


def saturated(x: NDArray[np.float64]) -> float:
    """The share of values more than one int8 step outside the input range [-1, 127/128]
    (the quantizer saturates them)."""
    import numpy as np

    if not x.size:
        return 0.0
    return float(np.count_nonzero((x < -1 - 1 / 128) | (x > 1)) / x.size)


def out_of_range(share: float, method: str) -> str:
    """A fixed normalization (`none`, `scale`) does not look at the data: values outside
    the model's input range are saturated, which the user should hear about."""
    return (f"{100 * share:.1f}% of the training input values lie outside the int8 input "
            f"range [-1, 127/128] after normalize method {method} and are saturated; "
            "normalize: {method: none} takes values that are the model's real inputs "
            "already: give {method: scale, scale: S, offset: O} to map them (x' = (x - O) / "
            "S), or minmax/standard to measure the map on the training data")


def few_validation(held_out: int) -> str:
    """Said once, by the stage that makes the split: train and qat both pick their best
    epoch on it."""
    return (f"the validation split holds {held_out} samples (one is {100 / held_out:.0f}% of "
            "val_acc): too few to pick the best epoch, which is then picked on noise. With "
            "little data, set dataset.split: {val: 0} (epochs are then compared on the "
            "training data) or hold out a larger fraction")


def _stratified(y: NDArray[np.int64], fraction: float, rng: np.random.Generator
                ) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Indices (keep, held) holding out `fraction` of every class, deterministically."""
    import numpy as np

    held: list[int] = []
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        members = members[rng.permutation(len(members))]
        held.extend(members[: int(round(fraction * len(members)))].tolist())
    mask = np.zeros(len(y), dtype=bool)
    mask[held] = True
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def _split(raw: Raw, split: Split, limit: Limit, rng: np.random.Generator
           ) -> dict[str, Part]:
    """train, val and test: the source's own splits, or held out of its training data (the
    test split first); `limit` applied to every split (see the module docstring)."""
    x, y = raw.x_train, raw.y_train
    if raw.x_test is None:
        keep, test = _stratified(y, split.test, rng)
        parts = {"test": (x[test], y[test])}
        x, y = x[keep], y[keep]
    else:
        assert raw.y_test is not None  # a format gives test labels with its test inputs
        parts = {"test": (raw.x_test, raw.y_test)}
    if raw.x_val is None:
        x, y = _capped((x, y), limit.train, rng)
        keep, val = _stratified(y, validation_share(split.val, len(y)), rng)
        parts["train"], parts["val"] = (x[keep], y[keep]), (x[val], y[val])
    else:
        assert raw.y_val is not None  # a format gives validation labels with their inputs
        parts["train"], parts["val"] = _capped_pair((x, y), (raw.x_val, raw.y_val),
                                                    limit.train, rng)
    parts["test"] = _capped(parts["test"], limit.test, rng)
    if len(parts["train"][1]) == 0 or len(parts["test"][1]) == 0:
        raise UserError("dataset too small: after splitting, the train or test set is empty")
    return {k: parts[k] for k in ("train", "val", "test")}


AUTO_VAL = 0.1  # an unset split.val: this share, when it holds FEW_VALIDATION samples


def validation_share(given: float | None, samples: int) -> float:
    """`split.val`, or when unset 0.1 of the training data if that is at least
    FEW_VALIDATION samples, else none: 10 % of 40 series is 4, one of which is 25 % of the
    validation accuracy the best epoch was then picked on (the UCR examples set val: 0)."""
    if given is not None:
        return given
    return AUTO_VAL if AUTO_VAL * samples >= FEW_VALIDATION else 0.0


def _capped(part: Part, cap: int | None, rng: np.random.Generator) -> Part:
    """At most `cap` samples of `part`, drawn at random, in their order."""
    x, y = part
    if cap is None or cap >= len(y):
        return part
    chosen = sorted(rng.permutation(len(y))[:cap].tolist())
    return x[chosen], y[chosen]


def _capped_pair(train: Part, val: Part, cap: int | None, rng: np.random.Generator
                 ) -> tuple[Part, Part]:
    """A training and a validation split given by the source, cut to `cap` samples
    together, in proportion."""
    total = len(train[1]) + len(val[1])
    if cap is None or cap >= total:
        return train, val
    held = round(cap * len(val[1]) / total)
    return _capped(train, cap - held, rng), _capped(val, held, rng)


@dataclass(frozen=True)
class Normalizer:
    """x' = (x - offset) / scale, with offset and scale shaped to broadcast over a batch of
    samples (one value, or one per channel: axis 1 of the batch)."""

    method: str
    offset: NDArray[np.float64]
    scale: NDArray[np.float64]

    def apply(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        result: NDArray[np.float64] = (x - self.offset) / self.scale
        return result

    @property
    def record(self) -> Normalization:
        from edgebuild.data.info import Normalization

        return Normalization(self.method, tuple(self.offset.ravel().tolist()),
                             tuple(self.scale.ravel().tolist()))


def normalizer(x: NDArray[np.float64], normalize: Normalize) -> Normalizer:
    """The map of `normalize` for samples like `x` (the training split's: minmax and
    standard measure it there; none and scale are given)."""
    method = normalize.method.value
    if method in ("none", "scale"):
        return _given(x.ndim, normalize)
    offset, scale = _measured(x, normalize)
    return Normalizer(method, offset, scale)


def _given(ndim: int, normalize: Normalize) -> Normalizer:
    """none: offset 0, scale 1 (x' = x exactly); scale: the manifest's values, one for all
    or one per channel (both then as long as the longer)."""
    import numpy as np

    if normalize.method.value == "none":
        values: tuple[object, object] = (0.0, 1.0)
    else:
        values = (0.0 if normalize.offset is None else normalize.offset, normalize.scale)
    offset, scale = np.broadcast_arrays(*(np.array(v, dtype=np.float64).reshape(-1)
                                          for v in values))
    shape = (-1, *([1] * (ndim - 2)))  # channels, then ones over the rest of a sample
    return Normalizer(normalize.method.value, offset.reshape(shape).copy(),
                      scale.reshape(shape).copy())


def _measured(x: NDArray[np.float64], normalize: Normalize
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(offset, scale) with x' = (x - offset) / scale landing in [-1, 1] on training data."""
    import numpy as np

    axes = tuple(a for a in range(x.ndim) if not (normalize.per_channel and a == 1))
    if normalize.method.value == "minmax":
        lo, hi = x.min(axis=axes, keepdims=True), x.max(axis=axes, keepdims=True)
        offset, scale = (lo + hi) / 2, (hi - lo) / 2
    else:
        offset, scale = x.mean(axis=axes, keepdims=True), STANDARD_SIGMAS * x.std(axis=axes,
                                                                                   keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    return offset[0], scale[0]


STAGE = Stage("data", (), config, run,
              "load, split and quantize the dataset to int8 inputs", applies=lambda checked: checked.manifest.dataset is not None,
              tools=("numpy",),
              files=files, artifacts={"data.json": "data.v1"}, facets=())
