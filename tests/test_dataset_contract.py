"""The dataset contract (issue 29): data is read exactly or refused.

Every array of an .npz is read or named in a `check` error; the class names a dataset
carries reach data.json and every report; `limit` limits every split; a missing or
trailing channel axis is an explicit option (`dataset.channel_axis`), and the mismatch
message says what each reading of the samples means; `normalize: {method: none}` and
`{method: scale}` keep a fixed input contract (an imported model's), exactly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from edgebuild.data import npz
from edgebuild.data.dataset import DataFileError, Normalize

try:  # tests/ as rootdir-relative modules, or as a package (tests/__init__.py)
    from conftest import build_json, example_targets, run_cli
except ModuleNotFoundError:
    from tests.conftest import build_json, example_targets, run_cli

FASHION_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                 "Sneaker", "Bag", "Ankle boot")


def _project(root: Path, dataset: str, input_shape: list[int], outputs: int,
             layers: str = "", **arrays: np.ndarray) -> Path:
    """manifests/m.yaml with the given dataset lines (d.npz beside it holds `arrays`) and a
    one-layer linear model, or the given layers."""
    (root / "manifests").mkdir(parents=True, exist_ok=True)
    if arrays:
        np.savez(root / "manifests" / "d.npz", **arrays)
    section = "\n".join("  " + line.strip() for line in dataset.strip().splitlines())
    layers = layers or f"    - {{name: fc, op: linear, out: {outputs}, flatten: true, wide: true}}\n"
    (root / "manifests" / "m.yaml").write_text(
        f"name: m\nseed: 3\ndataset:\n{section}\nmodel:\n  input: {input_shape}\n"
        f"  layers:\n{layers}train: {{epochs: 1, batch: 16}}\nqat: {{epochs: 1}}\n"
        "target: {device: host}\n")
    return root


def _check(root: Path) -> tuple[int, list[str]]:
    result = run_cli(["check"], root)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, [line for line in result.stderr.splitlines() if line.strip()]


def _data(root: Path) -> tuple[dict[str, np.ndarray], dict]:
    build_json(root, "--until", "data")
    out = root / "build" / "m" / "data"
    with np.load(out / "data.npz", allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    return arrays, json.loads((out / "data.json").read_text())


def _line_of(root: Path, text: str) -> int:
    lines = (root / "manifests" / "m.yaml").read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def _samples(n: int, shape: tuple[int, ...] = (6,), classes: int = 3, seed: int = 0
             ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, *shape)).astype(np.float32), np.arange(n) % classes


# ---- 1. every array of an .npz is read or refused ------------------------------------------


def test_a_test_split_beside_the_pool_is_a_check_error_at_dataset_path(tmp_path):
    """It once passed `check`, and the build held out 20 % of `x` and never read x_test."""
    x, y = _samples(60)
    x_test, y_test = _samples(9, seed=1)
    _project(tmp_path, "format: npz\npath: d.npz", [6], 3, x=x, y=y, x_test=x_test,
             y_test=y_test)
    code, lines = _check(tmp_path)
    assert code == 2
    (line,) = lines
    assert line.startswith(f"manifests/m.yaml:{_line_of(tmp_path, 'path: d.npz')}:3: "
                           "dataset.path: "), line
    assert "d.npz: `x_test`, `y_test` are not keys edgebuild reads beside `x`, `y`; with a " \
           "test split, name the arrays x_train/y_train/x_test/y_test" in line


@pytest.mark.parametrize(("extra", "words"), [
    ({"x_val": 1, "y_val": 1}, ["`x_val`, `y_val` are not keys edgebuild reads beside `x`, "
                                "`y`; with a validation split, name the arrays "
                                "x_train/y_train/x_val/y_val"]),
    ({"mean": 1}, ["`mean` is not a key edgebuild reads; it reads `x`, `y`"]),
    ({"X_test": 1}, ["`X_test` is not a key edgebuild reads (did you mean `X_test` for "
                     "`x_test`?)"]),
])
def test_every_unread_array_is_named(tmp_path, extra, words):
    x, y = _samples(12)
    arrays = {"x": x, "y": y, **{key: np.zeros(3) for key in extra}}
    np.savez(tmp_path / "d.npz", **arrays)
    for call in (npz.probe, npz.load):
        with pytest.raises(DataFileError) as info:
            call(npz.Spec(format="npz", path="d.npz"), tmp_path)
        for word in words:
            assert word in str(info.value), str(info.value)
        assert info.value.field == ("path",)


def test_a_train_split_without_a_test_split_is_read(tmp_path):
    """x_train/y_train alone were refused ("needs arrays x, y"): now the test split is held
    out of them as from a pool."""
    x, y = _samples(60)
    _project(tmp_path, "format: npz\npath: d.npz\nsplit: {val: 0, test: 0.2}", [6], 3,
             x_train=x, y_train=y)
    _, info = _data(tmp_path)
    assert info["counts"] == {"train": 48, "val": 0, "test": 12}


def test_a_validation_split_in_the_file_is_the_validation_split(tmp_path):
    x, y = _samples(40)
    x_val, y_val = _samples(9, seed=1)
    x_test, y_test = _samples(6, seed=2)
    _project(tmp_path, "format: npz\npath: d.npz", [6], 3, x_train=x, y_train=y, x_val=x_val,
             y_val=y_val, x_test=x_test, y_test=y_test)
    arrays, info = _data(tmp_path)
    assert info["counts"] == {"train": 40, "val": 9, "test": 6}
    assert np.array_equal(arrays["y_val"], y_val)  # as given, in order
    assert np.array_equal(arrays["y_train"], y)


def test_split_val_beside_a_validation_split_in_the_file_is_a_check_error(tmp_path):
    x, y = _samples(40)
    _project(tmp_path, "format: npz\npath: d.npz\nsplit: {val: 0.2}", [6], 3, x_train=x,
             y_train=y, x_val=x[:5], y_val=y[:5])
    code, lines = _check(tmp_path)
    assert code == 2
    (line,) = lines
    assert re.match(r"manifests/m.yaml:\d+:\d+: dataset.split.val: ", line), line
    assert "holds a validation split (`x_val`, `y_val`), used as it is: remove " \
           "dataset.split.val" in line


def test_the_key_sets_are_in_the_schema():
    from edgebuild.manifest import schema

    described = json.dumps(schema.generate())
    for words in ("x, y (one pool, split by edgebuild)", "x_train, y_train with optional "
                  "x_test, y_test", "x_val, y_val", "classes or labels"):
        assert words in described, words


# ---- 2. class names from the data ----------------------------------------------------------


@pytest.mark.parametrize("key", ["classes", "labels"])
@pytest.mark.parametrize("kind", [str, bytes])
def test_class_names_come_from_the_file(tmp_path, key, kind):
    x, y = _samples(12, classes=3)
    names = np.array([kind(name, "utf-8") if kind is bytes else name
                      for name in ("cat", "dog", "bird")])
    np.savez(tmp_path / "d.npz", x=x, y=y, **{key: names})
    raw = npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    assert raw.class_names == ("cat", "dog", "bird")
    assert np.array_equal(raw.y_train, y)  # label k is class k


@pytest.mark.parametrize(("arrays", "words"), [
    ({"classes": np.array(["a", "b", "c"]), "labels": np.array(["a", "b", "c"])},
     "gives class names twice"),
    ({"classes": np.array(["a", "b"])}, "y_train holds labels [2], but the 2 class names take "
                                        "labels 0..1"),
    ({"classes": np.array(["a", "b", "c", "d"])}, "classes without training samples: 'd' (3)"),
    ({"classes": np.array(["a", "a", "b"])}, "class names must be non-empty and distinct"),
    ({"classes": np.arange(3)}, "`classes` must be a 1-D array of class names (strings)"),
])
def test_bad_class_names_are_refused(tmp_path, arrays, words):
    x, y = _samples(12, classes=3)
    np.savez(tmp_path / "d.npz", x=x, y=y, **arrays)
    with pytest.raises(DataFileError) as info:
        npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    assert words in str(info.value), str(info.value)
    assert info.value.field == ("path",)


@pytest.fixture(scope="module")
def named_build(tmp_path_factory) -> Path:
    """A whole build of a dataset with class names (Fashion-MNIST's, on random data)."""
    root = tmp_path_factory.mktemp("named")
    rng = np.random.default_rng(4)
    y = np.arange(200) % 10
    x = rng.normal(size=(200, 1, 4, 4)) + y[:, None, None, None] / 3
    _project(root, "format: npz\npath: d.npz", [1, 4, 4], 10, x=x.astype(np.float32), y=y,
             classes=np.array(FASHION_NAMES))
    build_json(root)
    return root / "build" / "m"


def test_class_names_reach_data_json_and_every_report(named_build):
    info = json.loads((named_build / "data" / "data.json").read_text())
    assert tuple(info["classes"]) == FASHION_NAMES
    report = json.loads((named_build / "report.json").read_text())
    assert tuple(report["confusion"]["labels"]) == FASHION_NAMES
    page = (named_build / "report.html").read_text()
    assert "class names (output order)</td><td>T-shirt/top, Trouser, Pullover" in page
    assert (named_build / "report" / "confusion.png").is_file()
    header = (named_build / "codegen" / "model" / "cnn.h").read_text()
    assert '"Ankle boot"' in header


def test_long_class_names_are_cut_in_the_confusion_ticks():
    from edgebuild.report import figures

    assert figures._tick("Ankle boot") == "Ankle boot"
    long = figures._tick("a class name far longer than any tick should be")
    assert len(long) == figures.TICK_CHARS and long.endswith("\u2026")


# ---- 3. limit limits every split -----------------------------------------------------------


def test_limit_train_caps_a_validation_split_from_the_file_in_proportion(tmp_path):
    x, y = _samples(80)
    _project(tmp_path, "format: npz\npath: d.npz\nlimit: {train: 30, test: 5}", [6], 3,
             x_train=x, y_train=y, x_val=x[:20], y_val=y[:20], x_test=x[:10], y_test=y[:10])
    _, info = _data(tmp_path)
    assert info["counts"] == {"train": 24, "val": 6, "test": 5}


def test_limit_train_holds_the_validation_split_out_of_its_samples(tmp_path):
    x, y = _samples(300)
    _project(tmp_path, "format: npz\npath: d.npz\nsplit: {val: 0.2, test: 0.2}\n"
             "limit: {train: 50}", [6], 3, x=x, y=y)
    _, info = _data(tmp_path)
    assert info["counts"]["train"] + info["counts"]["val"] == 50
    assert 8 <= info["counts"]["val"] <= 12  # 0.2 of each class, rounded
    assert info["counts"]["test"] == 60


# ---- 4. the channel axis ---------------------------------------------------------------------

CONV2D = "    - {name: conv, op: conv2d, out: 4, kernel: 3}\n" \
         "    - {name: fc, op: linear, out: 3, flatten: true}\n"


def test_a_missing_channel_axis_is_explained_with_both_readings(tmp_path):
    """It once said "set model.input: [49, 10]", which makes a 1-D model of 49 channels."""
    x, y = _samples(30, (49, 10))
    _project(tmp_path, "format: npz\npath: d.npz", [1, 49, 10], 3, CONV2D, x=x, y=y)
    code, lines = _check(tmp_path)
    assert code == 2
    (line,) = lines
    assert line.startswith(f"manifests/m.yaml:{_line_of(tmp_path, 'input:')}:")
    assert "model.input: the dataset's samples have shape [49, 10] but model.input is " \
           "[1, 49, 10]; the samples have no channel axis: set dataset.channel_axis: add to " \
           "read them as one channel of 49x10 (a 2-D model: conv2d, pool2d), as model.input " \
           "says; or set model.input: [49, 10] to read them as 49 channels over 10 steps " \
           "(a 1-D model: conv1d, pool1d)" in line


def test_channel_axis_add_gives_the_samples_one_channel(tmp_path):
    x, y = _samples(30, (49, 10))
    _project(tmp_path, "format: npz\npath: d.npz\nchannel_axis: add\nnormalize: {method: none}",
             [1, 49, 10], 3, CONV2D, x=x / 8, y=y)
    assert _check(tmp_path)[0] == 0
    arrays, info = _data(tmp_path)
    assert info["sample_shape"] == [1, 49, 10]
    assert arrays["x_train"].shape[1:] == (1, 49, 10)
    everything = np.concatenate([arrays[f"x_{p}"] for p in ("train", "val", "test")])
    assert sorted(map(bytes, everything)) == sorted(
        map(bytes, np.clip(np.floor(128 * (x.astype(np.float64) / 8) + 0.5), -128, 127)
            .astype(np.int8)[:, None]))


def test_channel_axis_last_moves_the_channels_first(tmp_path):
    x, y = _samples(20, (5, 5, 3))
    x_test, y_test = _samples(6, (5, 5, 3), seed=1)
    _project(tmp_path, "format: npz\npath: d.npz\nchannel_axis: last\nnormalize: {method: none}",
             [3, 5, 5], 3, CONV2D, x_train=x / 8, y_train=y, x_test=x_test / 8, y_test=y_test)
    code, lines = _check(tmp_path)
    assert code == 0, lines
    arrays, _ = _data(tmp_path)
    expected = np.floor(128 * np.moveaxis(x_test.astype(np.float64) / 8, -1, 1) + 0.5)
    assert np.array_equal(arrays["x_test"], np.clip(expected, -128, 127).astype(np.int8))


def test_channels_last_samples_are_told_about_channel_axis_last(tmp_path):
    x, y = _samples(20, (5, 5, 3))
    _project(tmp_path, "format: npz\npath: d.npz", [3, 5, 5], 3, CONV2D, x=x, y=y)
    code, lines = _check(tmp_path)
    assert code == 2
    assert "the samples hold their channels last: set dataset.channel_axis: last" in lines[0]


def test_channel_axis_add_on_samples_that_have_one_is_told_to_go(tmp_path):
    x, y = _samples(20, (1, 5, 5))
    _project(tmp_path, "format: npz\npath: d.npz\nchannel_axis: add", [1, 5, 5], 3, CONV2D,
             x=x, y=y)
    code, lines = _check(tmp_path)
    assert code == 2
    assert "remove dataset.channel_axis: add" in lines[0]


# ---- 5. normalization for a fixed input contract -------------------------------------------

# x -> q = floor(128 x + 0.5), saturated: the values a model trained on x sees, exactly
KNOWN = [(0.0, 0), (0.5, 64), (-1.0, -128), (1.0, 127), (1 / 256, 1), (-1 / 256, 0),
         (3 / 256, 2), (-3 / 256, -1), (0.25, 32), (2.0, 127), (-2.0, -128), (0.99, 127)]


def _known_test_split(root: Path, x_test: np.ndarray, normalize: str, channels: int = 1
                      ) -> tuple[np.ndarray, dict]:
    """The int8 test split of `x_test` (order kept: a split the file gives is not
    shuffled) under `normalize`."""
    x, y = _samples(30, (channels, x_test.shape[-1]))
    _project(root, f"format: npz\npath: d.npz\nnormalize: {normalize}",
             [channels, x_test.shape[-1]], 3, x_train=x, y_train=y, x_test=x_test,
             y_test=np.arange(len(x_test)) % 3)
    arrays, info = _data(root)
    return arrays["x_test"], info


def test_normalize_none_quantizes_the_values_as_they_are(tmp_path):
    values = np.array([[[v for v, _ in KNOWN]]] * 3)
    x_test, info = _known_test_split(tmp_path, values, "{method: none}")
    assert x_test.dtype == np.int8
    assert x_test[0, 0].tolist() == [q for _, q in KNOWN]
    assert info["normalize"] == {"method": "none", "offset": [0.0], "scale": [1.0]}


def test_normalize_scale_maps_then_quantizes(tmp_path):
    # x' = (x - 10) / 4: 10 -> 0, 12 -> 0.5 (64), 6 -> -1 (-128), 14 -> 1 (127), 26 -> 4 (127)
    values = np.array([[[10.0, 12.0, 6.0, 14.0, 26.0, 11.0, 10.0 + 4 / 256]]] * 3)
    x_test, info = _known_test_split(tmp_path, values, "{method: scale, scale: 4, offset: 10}")
    assert x_test[0, 0].tolist() == [0, 64, -128, 127, 127, 32, 1]
    assert info["normalize"] == {"method": "scale", "offset": [10.0], "scale": [4.0]}


def test_normalize_scale_per_channel(tmp_path):
    values = np.array([[[1.0, 3.0], [0.0, 0.25]]] * 3)  # channel 0: (x - 1) / 2; 1: x / 0.5
    x_test, info = _known_test_split(
        tmp_path, values, "{method: scale, scale: [2, 0.5], offset: [1, 0]}", channels=2)
    assert x_test[0].tolist() == [[0, 127], [0, 64]]
    assert info["normalize"] == {"method": "scale", "offset": [1.0, 0.0], "scale": [2.0, 0.5]}


def test_a_fixed_normalization_warns_when_the_data_saturates(tmp_path):
    x, y = _samples(60)  # normal(0, 1): a third of the values beyond +-1
    _project(tmp_path, "format: npz\npath: d.npz\nnormalize: {method: none}", [6], 3, x=x, y=y)
    result = run_cli(["build", "--until", "data"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"warning: m\.data: \d+\.\d% of the training input values lie outside "
                     r"the int8 input range \[-1, 127/128\] after normalize method none and "
                     "are saturated", result.stderr), result.stderr


def test_the_normalization_keys_the_data_stage(tmp_path):
    x, y = _samples(30)
    _project(tmp_path, "format: npz\npath: d.npz\nnormalize: {method: scale, scale: 2}", [6], 3,
             x=x, y=y)
    first, _ = _data(tmp_path)
    manifest = tmp_path / "manifests" / "m.yaml"
    manifest.write_text(manifest.read_text().replace("scale: 2}", "scale: 2, offset: 1}"))
    result = build_json(tmp_path, "--until", "data")
    assert result["m"]["data"]["status"] == "built"
    second, info = _data(tmp_path)
    assert info["normalize"]["offset"] == [1.0]
    assert not np.array_equal(first["x_train"], second["x_train"])


def test_fields_added_later_stay_out_of_the_key_at_their_defaults():
    """The data stage's key material of a manifest that does not use channel_axis, scale or
    offset is what it was before they existed."""
    from edgebuild.pipeline.stages import data

    manifests = dict(example_targets())
    dataset = data._keyed(manifests["digits"].dataset.model_dump(mode="json"))
    assert dataset == {"format": "sklearn-digits", "split": {"val": 0.1, "test": 0.2},
                       "limit": {"train": None, "test": None},
                       "normalize": {"method": "minmax", "per_channel": False}}


@pytest.mark.parametrize(("normalize", "message"), [
    ({"method": "scale"}, "method scale needs `scale`"),
    ({"method": "minmax", "scale": 2.0}, "`scale` and `offset` are read with method: scale "
                                         "only, not with method: minmax"),
    ({"method": "none", "offset": 1.0}, "not with method: none"),
    ({"method": "none", "per_channel": True}, "per_channel applies to minmax and standard"),
    ({"method": "scale", "scale": [1.0, 2.0], "offset": [0.0, 0.0, 0.0]},
     "`scale` and `offset` give different channel counts (2 and 3)"),
])
def test_normalize_fields_belong_to_their_method(normalize, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        Normalize.model_validate(normalize)
    assert message in str(info.value)


@pytest.mark.parametrize("value", ["0", "-1", "true", ".inf", "[]"])
def test_a_scale_is_a_positive_finite_number(tmp_path, value):
    x, y = _samples(30)
    _project(tmp_path, f"format: npz\npath: d.npz\nnormalize: {{method: scale, scale: {value}}}",
             [6], 3, x=x, y=y)
    code, lines = _check(tmp_path)
    assert code == 2 and lines[0].split(": ")[1] == "dataset.normalize.scale", lines


def test_values_per_channel_must_match_the_channels(tmp_path):
    x, y = _samples(30, (2, 6))
    _project(tmp_path, "format: npz\npath: d.npz\nnormalize: {method: scale, scale: [1, 2, 3]}",
             [2, 6], 3, x=x, y=y)
    code, lines = _check(tmp_path)
    assert code == 2
    (line,) = lines
    assert "dataset.normalize.scale: 3 values, one per channel, but the samples ([2, 6]) have " \
           "2 channels" in line
