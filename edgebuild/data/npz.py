"""npz: the user's own arrays in a NumPy .npz file.

Every array in the file is read or refused: a key edgebuild does not read is an error that
names it (an `x_test` beside `x`, `y` was once left out without a word, and 20 % of `x`
held out as the test split instead). The key sets (KEY_SETS, in the schema too):
- `x`, `y`: one pool; edgebuild holds out the test and validation splits (dataset.split);
- `x_train`, `y_train`, optionally `x_test`, `y_test` (the test split) and `x_val`, `y_val`
  (the validation split, used instead of holding out dataset.split.val);
- with either, `classes` or `labels`: the class names, an array of strings; the labels in
  y are then indices into it (label k is named classes[k]).
x is (N, *sample_shape) numeric; y holds integer class labels.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from edgebuild.data.dataset import (
    CommonFields,
    DataFileError,
    FileRef,
    Probe,
    Raw,
    existing,
    ref_field,
    resolve,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

KEY_SETS = ("`x`, `y` (one pool, split by edgebuild), or `x_train`, `y_train` with optional "
            "`x_test`, `y_test` (the test split) and `x_val`, `y_val` (the validation "
            "split); class names in `classes` or `labels` (an array of strings, label k "
            "named by entry k)")
POOL = {"train": ("x", "y")}
SPLITS = {"train": ("x_train", "y_train"), "val": ("x_val", "y_val"),
          "test": ("x_test", "y_test")}
NAMES = ("classes", "labels")
KNOWN = ("x", "y", *(key for pair in SPLITS.values() for key in pair), *NAMES)


class NpzSpec(CommonFields):
    format: Literal["npz"]
    path: FileRef = Field(description=(
        "the .npz file, relative to the manifest. Its arrays: " + KEY_SETS.replace("`", "")
        + ". An array of any other name is an error (nothing is left out silently)"))


def files(spec: NpzSpec, base: Path) -> list[Path]:
    return [existing(resolve(spec.path, base), ref_field("path", spec.path))]


def _arrays(path: Path) -> dict[str, NDArray[Any]]:
    from edgebuild.core import arrays

    try:
        data = arrays.read(path)
    except arrays.PickledData as exc:  # pickled data: never numpy's advice to allow it
        raise DataFileError(path, exc.reason) from None
    except (OSError, ValueError) as exc:  # arrays.read: an empty file, a broken archive too
        raise DataFileError(path, f"not a readable .npz file ({exc})") from None
    if not isinstance(data, dict):  # a single .npy array, not an archive
        raise DataFileError(path, "not a .npz archive (a single .npy array? save named "
                                  "arrays with numpy.savez)")
    return data


def _quoted(keys: list[str]) -> str:
    return ", ".join(f"`{key}`" for key in keys)


def _layout(path: Path, keys: set[str], where: tuple[str, ...]
            ) -> dict[str, tuple[str, str]]:
    """The (x, y) keys of each split the file holds, by split; every other key but the class
    names is an error naming it."""
    if keys & {"x_train", "y_train"}:
        layout = {split: pair for split, pair in SPLITS.items()
                  if split == "train" or keys & set(pair)}
    elif keys & {"x", "y"}:
        layout = POOL
    else:
        raise DataFileError(path, f"holds none of the arrays edgebuild reads ({KEY_SETS}); "
                                  f"found {_quoted(sorted(keys))}{_did_you_mean(keys)}", where)
    for x, y in layout.values():
        missing = [key for key in (x, y) if key not in keys]
        if missing:
            raise DataFileError(path, f"{_quoted(missing)} missing: `{x}` (inputs) and `{y}` "
                                      "(their labels) come together", where)
    read = {key for pair in layout.values() for key in pair} | set(NAMES)
    unread = sorted(keys - read)
    if unread:
        raise DataFileError(path, _refusal(unread, layout is POOL), where)
    return layout


def _refusal(unread: list[str], pool: bool) -> str:
    """Why the keys `unread` are not read, and what to name the arrays instead."""
    what = (f"{_quoted(unread)} {'is not a key' if len(unread) == 1 else 'are not keys'} "
            "edgebuild reads")
    if pool and set(unread) <= {"x_test", "y_test", "x_val", "y_val"}:
        rename = ("with a test split, name the arrays x_train/y_train/x_test/y_test (and "
                  "x_val/y_val for a validation split)" if set(unread) & {"x_test", "y_test"}
                  else "with a validation split, name the arrays x_train/y_train/x_val/y_val")
        return (f"{what} beside `x`, `y`; {rename}, or leave them out to have edgebuild hold "
                "out dataset.split of `x`")
    if not pool and set(unread) <= {"x", "y"}:
        return (f"{what} beside `x_train`, `y_train`: a file holds one key set, x/y (one "
                "pool edgebuild splits) or x_train/y_train with x_test/y_test, x_val/y_val; "
                "remove the other")
    return f"{what}{_did_you_mean(set(unread))}; it reads {KEY_SETS}"


def _did_you_mean(keys: set[str]) -> str:
    hints = [f"`{key}` for `{match[0]}`" for key in sorted(keys)
             if (match := difflib.get_close_matches(key.lower(), KNOWN, n=1, cutoff=0.6))
             and match[0] != key]
    return f" (did you mean {', '.join(hints)}?)" if hints else ""


def _names(path: Path, arrays: dict[str, NDArray[Any]], where: tuple[str, ...]
           ) -> tuple[str, ...] | None:
    """The class names the file gives (`classes` or `labels`), or None."""
    given = [key for key in NAMES if key in arrays]
    if not given:
        return None
    if len(given) > 1:
        raise DataFileError(path, "gives class names twice, as `classes` and `labels`; keep "
                                  "one", where)
    names = arrays[given[0]]
    if names.ndim != 1 or names.dtype.kind not in "US" or not len(names):
        raise DataFileError(path, f"`{given[0]}` must be a 1-D array of class names "
                                  f"(strings), got {names.dtype} {list(names.shape)}", where)
    try:
        texts = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in names.tolist())
    except UnicodeDecodeError:
        raise DataFileError(path, f"`{given[0]}`: class names must be UTF-8 text",
                            where) from None
    if "" in texts or len(set(texts)) != len(texts):
        raise DataFileError(path, f"`{given[0]}`: class names must be non-empty and "
                                  "distinct", where)
    return texts


def _labels(path: Path, name: str, x: NDArray[Any], y: NDArray[Any]) -> None:
    import numpy as np

    if x.ndim < 2 or not np.issubdtype(x.dtype, np.number):
        raise DataFileError(path, f"{name}: x must be numeric with shape (N, ...), got "
                                  f"{x.dtype} {list(x.shape)}")
    if y.ndim != 1 or len(y) != len(x) or not np.issubdtype(y.dtype, np.integer):
        raise DataFileError(path, f"{name}: y must be integer labels of shape ({len(x)},), "
                                  f"got {y.dtype} {list(y.shape)}")
    if not np.isfinite(x).all():
        raise DataFileError(path, f"{name}: x contains NaN or infinite values")


def _classes(path: Path, names: tuple[str, ...] | None, y_train: NDArray[Any],
             where: tuple[str, ...]) -> tuple[tuple[str, ...], dict[int, int]]:
    """(class names, label -> class index). Without names the classes are the labels
    y_train holds, in order; with names label k is class k, and every class must have
    training samples (a model output nothing trains is refused, not kept)."""
    import numpy as np

    present = np.unique(y_train).tolist()
    if names is None:
        return tuple(str(c) for c in present), {c: i for i, c in enumerate(present)}
    outside = [c for c in present if not 0 <= c < len(names)]
    if outside:
        raise DataFileError(path, f"y_train holds labels {outside[:5]}, but the {len(names)} "
                                  f"class names take labels 0..{len(names) - 1}", where)
    empty = [f"{names[k]!r} ({k})" for k in range(len(names)) if k not in present]
    if empty:
        raise DataFileError(path, f"classes without training samples: {', '.join(empty[:5])}; "
                                  "remove them from the class names or add samples", where)
    return names, {k: k for k in range(len(names))}


def _remap(path: Path, split: str, y: NDArray[Any], index: dict[int, int]
           ) -> NDArray[np.int64]:
    import numpy as np

    unknown = sorted(set(np.unique(y).tolist()) - index.keys())
    if unknown:
        raise DataFileError(path, f"{split} labels {unknown[:5]} never occur in training data")
    return np.array([index[int(v)] for v in y], dtype=np.int64)


def _split_val(path: Path, spec: NpzSpec, layout: dict[str, tuple[str, str]]) -> None:
    """A validation split in the file is used as it is: a `split.val` fraction written
    beside it would be ignored, so it is refused."""
    if "val" in layout and "val" in spec.split.model_fields_set:
        raise DataFileError(path, "the file holds a validation split (`x_val`, `y_val`), "
                                  "used as it is: remove dataset.split.val (or merge x_val "
                                  "into x_train to hold out a fraction instead)", ("split", "val"))


def load(spec: NpzSpec, base: Path) -> Raw:
    import numpy as np

    path = files(spec, base)[0]
    where = ref_field("path", spec.path)
    arrays = _arrays(path)
    layout = _layout(path, set(arrays), where)
    _split_val(path, spec, layout)
    parts = {split: (arrays[x], arrays[y]) for split, (x, y) in layout.items()}
    for split, (x, y) in parts.items():
        _labels(path, split, x, y)
        if x.shape[1:] != parts["train"][0].shape[1:]:
            raise DataFileError(path, f"x_{split} samples {list(x.shape[1:])} differ from "
                                      f"x_train samples {list(parts['train'][0].shape[1:])}")
    names, index = _classes(path, _names(path, arrays, where), parts["train"][1], where)
    xs = {split: x.astype(np.float64) for split, (x, _) in parts.items()}
    ys = {split: _remap(path, split, y, index) for split, (_, y) in parts.items()}
    return Raw(xs["train"], ys["train"], xs.get("test"), ys.get("test"), names,
               xs.get("val"), ys.get("val"))


def probe(spec: NpzSpec, base: Path) -> Probe:
    raw = load(spec, base)
    return Probe(tuple(int(d) for d in raw.x_train.shape[1:]), len(raw.class_names))


Spec = NpzSpec  # the registry's name for a format's manifest section
