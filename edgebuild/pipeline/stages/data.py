"""Stage `data`: load a dataset by format, split it, and quantize inputs to int8.

Input convention (the numerics contract): every sample is stored as int8 `q` whose real
value is `q / 128`, i.e. in [-1, 127/128] — the MAX78000 Q7 data format, and exactly what
the integer model will see. Raw values are first mapped onto [-1, 1] with statistics of the
*training* split only (`minmax`: the training min/max map to -1/+1; `standard`: the mean
maps to 0 and +-3 standard deviations to +-1), then `q = clip(floor(128 * x + 0.5), -128,
127)` (round half up, as the hardware rounds). The float model trains on `q / 128` too, so
float, fake-quant and integer inference start from identical inputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core import arrays as arrays_io
from edgebuild.core.errors import UserError
from edgebuild.pipeline.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads numpy or pydantic
    import numpy as np
    from numpy.typing import NDArray

    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.data.dataset import Limit, Normalize, Raw, Split
    from edgebuild.pipeline.validation import Checked

    Part = tuple[NDArray[np.float64], NDArray[np.int64]]  # (x, y) of one split

STANDARD_SIGMAS = 3.0
FEW_VALIDATION = 30  # validation samples below which picking an epoch is picking noise


def config(checked: Checked) -> JSONObject:
    spec = checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    dataset = spec.model_dump(mode="json")
    if dataset.get("frames") is None:  # keys of manifests without clips stay as they were
        dataset.pop("frames", None)
    return {"dataset": dataset, "seed": checked.manifest.seed}


def files(checked: Checked) -> list[Path]:
    from edgebuild.data import FORMATS
    from edgebuild.data.dataset import DataFileError

    spec = checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    try:
        return FORMATS[spec.format].files(spec, checked.base)
    except DataFileError as exc:
        raise UserError(checked.document.diagnostic(("dataset",), str(exc))) from None


def run(ctx: Context) -> None:
    import numpy as np

    from edgebuild.core import numerics
    from edgebuild.data import FORMATS
    from edgebuild.data.dataset import DataFileError, framed
    from edgebuild.data.info import DataInfo, Normalization

    spec = ctx.checked.manifest.dataset
    assert spec is not None  # the stage applies only to a manifest with a dataset
    try:
        raw = FORMATS[spec.format].load(spec, ctx.checked.base)
    except DataFileError as exc:
        raise UserError(ctx.checked.document.diagnostic(("dataset",), str(exc))) from None
    rng = np.random.default_rng(ctx.checked.manifest.seed)
    splits = _split(raw, spec.split, rng)
    splits = _limit(splits, spec.limit, rng)
    low, scale = _normalizer(splits["train"][0], spec.normalize)
    arrays: dict[str, NDArray[Any]] = {}
    for part, (x, y) in splits.items():
        arrays[f"x_{part}"] = framed(numerics.np_quantize_inputs((x - low) / scale), spec.frames)
        arrays[f"y_{part}"] = y
    arrays_io.save(ctx.out / "data.npz", **arrays)
    info = DataInfo(tuple(raw.class_names), tuple(arrays["x_train"].shape[1:]),
                    {p: int(len(y)) for p, (_, y) in splits.items()}, 1 / 128,
                    Normalization(spec.normalize.method.value, tuple(low.ravel().tolist()),
                                  tuple(scale.ravel().tolist())))
    (ctx.out / "data.json").write_text(json.dumps(info.to_json(), indent=1, sort_keys=True) + "\n")
    held_out = info.counts["val"]
    if 0 < held_out < FEW_VALIDATION and ctx.checked.manifest.model.weights is None:
        ctx.warn(few_validation(held_out))


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


def _split(raw: Raw, split: Split, rng: np.random.Generator) -> dict[str, Part]:
    x, y = raw.x_train, raw.y_train
    if raw.x_test is None:
        keep, test = _stratified(y, split.test, rng)
        parts = {"test": (x[test], y[test])}
        x, y = x[keep], y[keep]
    else:
        assert raw.y_test is not None  # a format gives test labels with its test inputs
        parts = {"test": (raw.x_test, raw.y_test)}
    keep, val = _stratified(y, split.val, rng)
    parts["train"] = (x[keep], y[keep])
    parts["val"] = (x[val], y[val])
    if len(keep) == 0 or len(parts["test"][1]) == 0:
        raise UserError("dataset too small: after splitting, the train or test set is empty")
    return {k: parts[k] for k in ("train", "val", "test")}


def _limit(splits: dict[str, Part], limit: Limit, rng: np.random.Generator
           ) -> dict[str, Part]:
    for part, cap in (("train", limit.train), ("test", limit.test)):
        x, y = splits[part]
        if cap is not None and cap < len(y):
            chosen = sorted(rng.permutation(len(y))[:cap].tolist())
            splits[part] = (x[chosen], y[chosen])
    return splits


def _normalizer(x: NDArray[np.float64], normalize: Normalize
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
              files=files, artifacts={"data.json": "data.v1"})
