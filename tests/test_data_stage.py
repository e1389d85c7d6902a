"""The `data` and `validate` stages through the CLI, checked on their artifacts in build/."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

try:  # tests/ as rootdir-relative modules, or as a package (tests/__init__.py)
    from conftest import DIGITS_MANIFEST, build_json, run_cli, write
except ModuleNotFoundError:
    from tests.conftest import DIGITS_MANIFEST, build_json, run_cli, write

DIGITS_COUNT = 1797


def _build(project: Path, until: str = "data") -> dict:
    return build_json(project, "--until", until)


def _artifacts(project: Path, name: str) -> tuple[dict, dict]:
    out = project / "build" / name / "data"
    with np.load(out / "data.npz", allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    return arrays, json.loads((out / "data.json").read_text())


def _digits_project(root: Path, name: str = "small", seed: int = 1, extra: str = "") -> Path:
    text = DIGITS_MANIFEST.format(name=name).replace("seed: 1", f"seed: {seed}")
    if extra:
        text = text.replace("  split: {val: 0.1, test: 0.2}\n",
                            f"  split: {{val: 0.1, test: 0.2}}\n{extra}")
    write(root / "manifests" / f"{name}.yaml", text)
    return root


def _project(root: Path, dataset: str, input_shape: list[int], classes: int,
             name: str = "m") -> Path:
    """A manifest with the given dataset section (YAML lines) and a one-layer linear model."""
    section = "\n".join("  " + line.strip() for line in dataset.strip().splitlines())
    manifest = (f"name: {name}\nseed: 3\ndataset:\n{section}\nmodel:\n"
                f"  input: {input_shape}\n  layers:\n"
                f"    - {{name: fc, op: linear, out: {classes}, flatten: true, wide: true}}\n")
    (root / "manifests").mkdir(parents=True, exist_ok=True)
    (root / "manifests" / f"{name}.yaml").write_text(manifest)
    return root


@pytest.fixture(scope="module")
def digits_build(tmp_path_factory) -> tuple[Path, dict]:
    project = _digits_project(tmp_path_factory.mktemp("digits_a"))
    result = _build(project)
    return project, result


# --- digits: dtypes, counts, split, normalization ------------------------------------------


def test_build_reports_the_data_stage(digits_build):
    project, result = digits_build
    assert result["small"]["data"]["status"] == "built"
    assert len(result["small"]["data"]["key"]) == 64
    assert (project / "build" / "small" / "data" / "data.npz").is_file()


def test_arrays_dtypes_and_counts(digits_build):
    arrays, info = _artifacts(digits_build[0], "small")
    assert sorted(arrays) == ["x_test", "x_train", "x_val", "y_test", "y_train", "y_val"]
    for part in ("train", "val", "test"):
        x, y = arrays[f"x_{part}"], arrays[f"y_{part}"]
        assert x.dtype == np.int8, part
        assert y.dtype == np.int64, part
        assert x.shape == (len(y), 1, 8, 8)
        assert info["counts"][part] == len(y) == len(x)
    assert sum(info["counts"].values()) == DIGITS_COUNT
    assert info["sample_shape"] == [1, 8, 8]
    assert info["classes"] == [str(i) for i in range(10)]
    assert info["input_scale"] == 1 / 128


def test_split_is_stratified(digits_build):
    arrays, info = _artifacts(digits_build[0], "small")
    totals = sum(np.bincount(arrays[f"y_{p}"], minlength=10) for p in ("train", "val", "test"))
    for part, fraction in (("test", 0.2), ("val", 0.1 * 0.8)):
        counts = np.bincount(arrays[f"y_{part}"], minlength=10)
        assert (counts > 0).all(), (part, counts)
        # every class is held out in proportion (+-1 for rounding, +-2 for val after test)
        assert np.all(np.abs(counts - fraction * totals) <= 2), (part, counts, totals)
    assert (np.bincount(arrays["y_train"], minlength=10) > 0).all()


def test_minmax_maps_training_extremes_to_the_int8_range(digits_build):
    arrays, info = _artifacts(digits_build[0], "small")
    assert info["normalize"] == {"method": "minmax", "offset": [8.0], "scale": [8.0]}
    x_train = arrays["x_train"]
    assert x_train.min() == -128 and x_train.max() == 127
    # pixel v in 0..16 maps to (v - 8) / 8 -> q = 16 v - 128, saturated at 127
    allowed = {min(16 * v - 128, 127) for v in range(17)}
    for part in ("train", "val", "test"):
        values = set(np.unique(arrays[f"x_{part}"]).tolist())
        assert values <= allowed, (part, values - allowed)
        assert arrays[f"x_{part}"].min() >= -128 and arrays[f"x_{part}"].max() <= 127


def test_split_is_deterministic_across_projects(digits_build, tmp_path):
    first = digits_build[0]
    second = _digits_project(tmp_path / "b")
    _build(second)
    path = Path("build") / "small" / "data"
    assert (first / path / "data.npz").read_bytes() == (second / path / "data.npz").read_bytes()
    assert (first / path / "data.json").read_text() == (second / path / "data.json").read_text()


def test_seed_changes_the_split(digits_build, tmp_path):
    base, _ = _artifacts(digits_build[0], "small")
    other = _digits_project(tmp_path, seed=2)
    _build(other)
    changed, info = _artifacts(other, "small")
    assert sum(info["counts"].values()) == DIGITS_COUNT
    assert (other / "build/small/data/data.npz").read_bytes() != (
        digits_build[0] / "build/small/data/data.npz").read_bytes()
    # the same per-class sizes, but different members
    assert np.array_equal(np.bincount(base["y_test"]), np.bincount(changed["y_test"]))
    assert not np.array_equal(base["x_test"], changed["x_test"])


def test_limit(digits_build, tmp_path):
    """limit.train caps what training reads, the validation split held out of it (it once
    left the validation split at its full size: 143 samples beside 100 training ones)."""
    project = _digits_project(tmp_path, extra="  limit: {train: 100, test: 50}\n")
    _build(project)
    arrays, info = _artifacts(project, "small")
    assert info["counts"] == {"train": 90, "val": 10, "test": 50}
    assert len(arrays["x_train"]) == len(arrays["y_train"]) == 90
    assert len(arrays["x_val"]) == len(arrays["y_val"]) == 10
    assert len(arrays["x_test"]) == len(arrays["y_test"]) == 50


# --- npz / ts datasets ---------------------------------------------------------------------


CHANNEL_MEANS = (100.0, -5.0, 0.01)
CHANNEL_STDS = (20.0, 0.5, 0.002)


def _channels_npz(path: Path, n: int = 240) -> None:
    rng = np.random.default_rng(7)
    x = np.stack([rng.normal(m, s, size=(n, 16)) for m, s in zip(CHANNEL_MEANS, CHANNEL_STDS,
                                                                   strict=True)], axis=1)
    np.savez(path, x=x.astype(np.float32), y=np.arange(n) % 4 * 10)  # labels 0,10,20,30


def test_standard_per_channel_centres_every_channel(tmp_path):
    (tmp_path / "manifests").mkdir()
    _channels_npz(tmp_path / "manifests" / "d.npz")
    dataset = """\
        format: npz
        path: d.npz
        normalize: {method: standard, per_channel: true}"""
    _project(tmp_path, dataset, [3, 16], 4)
    _build(tmp_path)
    arrays, info = _artifacts(tmp_path, "m")
    assert info["classes"] == ["0", "10", "20", "30"]
    assert info["normalize"]["method"] == "standard"
    assert len(info["normalize"]["offset"]) == len(info["normalize"]["scale"]) == 3
    x = arrays["x_train"].astype(np.float64)
    assert arrays["x_train"].dtype == np.int8 and x.shape[1:] == (3, 16)
    means = x.mean(axis=(0, 2))
    stds = x.std(axis=(0, 2))
    assert np.all(np.abs(means) < 3), means
    assert np.all(np.abs(stds - 128 / 3) < 5), stds  # one sigma is 1/3 of the range
    assert set(np.unique(arrays["y_train"]).tolist()) == {0, 1, 2, 3}


def test_standard_without_per_channel_is_global(tmp_path):
    (tmp_path / "manifests").mkdir()
    _channels_npz(tmp_path / "manifests" / "d.npz")
    dataset = """\
        format: npz
        path: d.npz
        normalize: {method: standard}"""
    _project(tmp_path, dataset, [3, 16], 4)
    _build(tmp_path)
    arrays, info = _artifacts(tmp_path, "m")
    assert len(info["normalize"]["offset"]) == 1
    means = arrays["x_train"].astype(np.float64).mean(axis=(0, 2))
    assert np.abs(means).max() > 20, means  # channel scales differ: one global map can't centre


def test_npz_user_split_keeps_the_test_set(tmp_path):
    (tmp_path / "manifests").mkdir()
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "manifests" / "d.npz", x_train=rng.normal(size=(100, 6)),
             y_train=np.arange(100) % 2, x_test=rng.normal(size=(30, 6)),
             y_test=np.arange(30) % 2)
    _project(tmp_path, "format: npz\npath: d.npz\nsplit: {val: 0.2}", [6], 2)
    _build(tmp_path)
    arrays, info = _artifacts(tmp_path, "m")
    assert info["counts"] == {"train": 80, "val": 20, "test": 30}
    assert np.array_equal(arrays["y_test"], np.arange(30) % 2)  # order kept, not shuffled


def test_ts_minmax_per_channel(tmp_path):
    rng = np.random.default_rng(5)
    lines = ["@problemName Tiny", "@timeStamps false", "@classLabel true up down", "@data"]
    for i in range(60):
        a = rng.uniform(-50, 50, size=8)
        b = rng.uniform(0, 0.1, size=8)
        lines.append(",".join(map(str, a)) + ":" + ",".join(map(str, b)) + (":up" if i % 2
                                                                           else ":down"))
    write(tmp_path / "manifests" / "t.ts", "\n".join(lines) + "\n")
    dataset = "format: ts\ntrain: t.ts\nnormalize: {method: minmax, per_channel: true}"
    _project(tmp_path, dataset, [2, 8], 2)
    _build(tmp_path)
    arrays, info = _artifacts(tmp_path, "m")
    assert info["classes"] == ["up", "down"] and info["sample_shape"] == [2, 8]
    x = arrays["x_train"]
    assert x.min(axis=(0, 2)).tolist() == [-128, -128]
    assert x.max(axis=(0, 2)).tolist() == [127, 127]


@pytest.mark.parametrize(("content", "words"), [
    (None, ["d.npz", "not found"]),
    (b"garbage, not a zip", ["d.npz", "not a readable .npz"]),
    ("npy", ["d.npz", "not a .npz archive"]),
])
def test_bad_data_file_is_a_user_error(tmp_path, content, words):
    (tmp_path / "manifests").mkdir()
    if content == "npy":
        np.save(tmp_path / "manifests" / "d.npy", np.zeros((4, 6)))
        (tmp_path / "manifests" / "d.npy").rename(tmp_path / "manifests" / "d.npz")
    elif content is not None:
        (tmp_path / "manifests" / "d.npz").write_bytes(content)
    _project(tmp_path, "format: npz\npath: d.npz", [6], 2)
    result = run_cli(["build", "--until", "data"], tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "manifests/m.yaml:" in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.mark.parametrize("command", [["build"], ["build", "--until", "data", "-j", "2"],
                                     ["check"]])
def test_dataset_with_python_objects_is_a_user_error_in_edgebuilds_words(tmp_path, command):
    """numpy refuses object arrays with allow_pickle=False and invites loading them "unsafely
    using allow_pickle=": edgebuild says why it never unpickles and what to save instead."""
    (tmp_path / "manifests").mkdir()
    np.savez(tmp_path / "manifests" / "d.npz", x=np.array([{"a": 1}] * 4, dtype=object),
             y=np.arange(4) % 2)
    _project(tmp_path, "format: npz\npath: d.npz", [6], 2)
    result = run_cli(command, tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "manifests/m.yaml:" in result.stderr and " dataset: " in result.stderr
    assert "d.npz: array 'x' holds Python objects (pickled data), which edgebuild never " \
           "loads: unpickling can run arbitrary code. Save plain numeric arrays instead, " \
           "e.g. np.savez(path, x=x.astype(np.float32), y=y.astype(np.int64))" in result.stderr
    assert "allow_pickle" not in result.stderr and "unsafely" not in result.stderr
    assert not (tmp_path / "build" / "m" / "data").exists()


# --- validate: graph.json ------------------------------------------------------------------

GRAPH_MANIFEST = """\
name: g
dataset: {format: sklearn-digits}
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}
    - {name: conv2, op: conv2d, out: 16, kernel: 3, pad: 1, pool: {mode: max, size: 2}}
    - {name: skip, op: conv2d, inputs: [conv1], out: 16, kernel: 1, bias: false,
       pool: {mode: avg, size: 2}}
    - {name: sum, op: add, inputs: [conv2, skip]}
    - {name: fc, op: linear, out: 10, flatten: true, wide: true}
"""


def test_validate_graph_json(tmp_path):
    write(tmp_path / "manifests" / "g.yaml", GRAPH_MANIFEST)
    result = _build(tmp_path, until="validate")
    assert result["g"]["validate"]["status"] == "built"
    graph = json.loads((tmp_path / "build" / "g" / "validate" / "graph.json").read_text())
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert list(nodes) == ["conv1", "conv2", "skip", "sum", "fc"]
    expected = {
        # name: (inputs, in_shapes, out_shape, params, macs)
        "conv1": (["input"], [[1, 8, 8]], [8, 8, 8], 8 * 9 + 8, 8 * 64 * 9),
        "conv2": (["conv1"], [[8, 8, 8]], [16, 4, 4], 16 * 8 * 9 + 16, 16 * 16 * 8 * 9),
        "skip": (["conv1"], [[8, 8, 8]], [16, 4, 4], 16 * 8, 16 * 16 * 8),
        "sum": (["conv2", "skip"], [[16, 4, 4], [16, 4, 4]], [16, 4, 4], 0, 0),
        "fc": (["sum"], [[16, 4, 4]], [10], 256 * 10 + 10, 2560),
    }
    for name, (inputs, in_shapes, out, params, macs) in expected.items():
        n = nodes[name]
        assert (n["inputs"], n["in_shapes"], n["out_shape"], n["params"], n["macs"]) == (
            inputs, in_shapes, out, params, macs), name
    assert graph["input"] == [1, 8, 8]
    assert graph["params"] == 80 + 1168 + 128 + 2570
    assert graph["macs"] == 4608 + 18432 + 2048 + 2560


def test_validate_graph_json_of_the_conftest_model(digits_project):
    build_json(digits_project, "--until", "validate")
    build_json(digits_project, "--until", "data")
    graph = json.loads((digits_project / "build/small/validate/graph.json").read_text())
    conv, fc = graph["nodes"]
    assert (conv["out_shape"], conv["params"], conv["macs"]) == ([8, 8, 8], 80, 4608)
    assert (fc["in_shapes"], fc["params"], fc["macs"]) == ([[8, 8, 8]], 5130, 5120)
    assert graph["params"] == 5210 and graph["macs"] == 9728
    model = json.loads((digits_project / "build/small/validate/model.json").read_text())
    assert model["layers"][0]["stride"] == 1  # defaults resolved
    assert (digits_project / "build/small/data/data.npz").is_file()
