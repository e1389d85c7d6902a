"""Unit tests of each dataset format module: Spec -> probe / load, and every DataFileError."""

from __future__ import annotations

import gzip
import importlib.util
import struct
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from edgebuild.data import FORMATS, digits, emg, idx, npz, ts
from edgebuild.data.dataset import DataFileError, PackageFile, Probe, resolve

FASHION = Path("/usr/share/datasets/fashion-mnist")
VOWELS = "datasets/data/JapaneseVowels/JapaneseVowels_eq_{}.ts"


def test_registry_names_every_format():
    assert {"sklearn-digits": digits, "npz": npz, "idx": idx, "ts": ts,
            "synthetic-emg": emg} == FORMATS
    for name, module in FORMATS.items():
        assert module.Spec.model_fields["format"].annotation.__args__ == (name,)
        for function in ("files", "probe", "load"):
            assert callable(getattr(module, function))


# --- sklearn-digits ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_raw():
    return digits.load(digits.Spec(format="sklearn-digits"), Path("."))


def test_digits_probe(tmp_path):
    probe = digits.probe(digits.Spec(format="sklearn-digits"), tmp_path)
    assert probe.sample_shape == (1, 8, 8)
    assert probe.classes == 10


def test_digits_load(digits_raw):
    raw = digits_raw
    assert raw.x_train.shape == (1797, 1, 8, 8)
    assert raw.x_train.dtype == np.float64
    assert raw.y_train.shape == (1797,) and raw.y_train.dtype == np.int64
    assert raw.x_test is None and raw.y_test is None
    assert raw.x_train.min() == 0 and raw.x_train.max() == 16
    assert np.array_equal(raw.x_train, np.round(raw.x_train))  # integer pixel values
    assert sorted(np.unique(raw.y_train).tolist()) == list(range(10))
    assert raw.class_names == tuple(str(i) for i in range(10))


def test_digits_files_key_the_package_table(tmp_path):
    (path,) = digits.files(digits.Spec(format="sklearn-digits"), tmp_path)
    assert path.name == "digits.csv.gz" and path.is_file()


# --- npz -----------------------------------------------------------------------------------


def _npz(tmp_path: Path, name: str = "d.npz", **arrays) -> npz.Spec:
    np.savez(tmp_path / name, **arrays)
    return npz.Spec(format="npz", path=name)


def _pool(n: int = 30, classes=(0, 1, 2), shape=(2, 5), seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=(n, *shape)).astype(np.float32),
            "y": np.array([classes[i % len(classes)] for i in range(n)], dtype=np.int32)}


def test_npz_pool(tmp_path):
    arrays = _pool()
    spec = _npz(tmp_path, **arrays)
    raw = npz.load(spec, tmp_path)
    assert raw.x_train.shape == (30, 2, 5) and raw.x_train.dtype == np.float64
    assert np.allclose(raw.x_train, arrays["x"])
    assert raw.y_train.dtype == np.int64
    assert np.array_equal(raw.y_train, arrays["y"])
    assert raw.x_test is None and raw.y_test is None
    assert raw.class_names == ("0", "1", "2")
    probe = npz.probe(spec, tmp_path)
    assert probe.sample_shape == (2, 5) and probe.classes == 3


def test_npz_flat_samples(tmp_path):
    spec = _npz(tmp_path, x=np.arange(12.0).reshape(4, 3), y=np.array([0, 1, 0, 1]))
    assert npz.probe(spec, tmp_path).sample_shape == (3,)


def test_npz_path_relative_to_base(tmp_path):
    (tmp_path / "sub").mkdir()
    np.savez(tmp_path / "sub" / "d.npz", **_pool())
    spec = npz.Spec(format="npz", path="d.npz")
    assert npz.files(spec, tmp_path / "sub") == [tmp_path / "sub" / "d.npz"]
    absolute = npz.Spec(format="npz", path=str(tmp_path / "sub" / "d.npz"))
    assert npz.probe(absolute, Path("/nonexistent")).classes == 3


def test_npz_user_split(tmp_path):
    rng = np.random.default_rng(1)
    spec = _npz(tmp_path, x_train=rng.normal(size=(20, 1, 4, 4)), y_train=np.arange(20) % 4,
                x_test=rng.normal(size=(8, 1, 4, 4)), y_test=np.arange(8) % 4)
    raw = npz.load(spec, tmp_path)
    assert raw.x_train.shape == (20, 1, 4, 4) and raw.x_test.shape == (8, 1, 4, 4)
    assert raw.y_test.dtype == np.int64
    assert np.array_equal(raw.y_test, np.arange(8) % 4)
    assert npz.probe(spec, tmp_path).classes == 4


def test_npz_pool_keys_beside_split_keys_are_refused(tmp_path):
    """Once the split keys won and `x`, `y` were left out without a word: a file holds one
    key set, and an array edgebuild would not read is named (tests/test_dataset_contract.py
    has the other key sets)."""
    pool = _pool()
    spec = _npz(tmp_path, x=pool["x"], y=pool["y"], x_train=pool["x"][:10],
                y_train=pool["y"][:10], x_test=pool["x"][10:13], y_test=pool["y"][10:13])
    for call in (npz.probe, npz.load):
        with pytest.raises(DataFileError) as info:
            call(spec, tmp_path)
        _assert_file_error(info, tmp_path / "d.npz", "`x`, `y` are not keys edgebuild reads "
                           "beside `x_train`, `y_train`")
        assert info.value.field == ("path",)


def test_npz_labels_remapped_to_indices(tmp_path):
    y_train = np.array([9, 3, 7, 3, 9, 7, 7])
    spec = _npz(tmp_path, x_train=np.zeros((7, 2)), y_train=y_train,
                x_test=np.zeros((3, 2)), y_test=np.array([7, 9, 3]))
    raw = npz.load(spec, tmp_path)
    assert raw.class_names == ("3", "7", "9")
    assert raw.y_train.tolist() == [2, 0, 1, 0, 2, 1, 1]
    assert raw.y_test.tolist() == [1, 2, 0]
    assert npz.probe(spec, tmp_path).classes == 3


def test_npz_negative_labels_remapped(tmp_path):
    spec = _npz(tmp_path, x=np.zeros((4, 2)), y=np.array([-1, 5, -1, 5]))
    raw = npz.load(spec, tmp_path)
    assert raw.y_train.tolist() == [0, 1, 0, 1] and raw.class_names == ("-1", "5")


def _assert_file_error(exc_info, path: Path, *words: str):
    exc = exc_info.value
    assert exc.path == str(path)
    assert str(path) in str(exc)
    for word in words:
        assert word.lower() in str(exc).lower(), str(exc)


def test_npz_missing_file(tmp_path):
    spec = npz.Spec(format="npz", path="nope.npz")
    for call in (npz.files, npz.probe, npz.load):
        with pytest.raises(DataFileError) as info:
            call(spec, tmp_path)
        _assert_file_error(info, tmp_path / "nope.npz", "not found")


def test_npz_garbage_bytes(tmp_path):
    (tmp_path / "d.npz").write_bytes(b"this is not a zip file at all\x00\x01\x02" * 10)
    with pytest.raises(DataFileError) as info:
        npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "not a readable .npz")


def test_npz_truncated_zip(tmp_path):
    np.savez(tmp_path / "full.npz", **_pool())
    data = (tmp_path / "full.npz").read_bytes()
    (tmp_path / "d.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFileError) as info:
        npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    _assert_file_error(info, tmp_path / "d.npz")


def test_npz_single_npy_file_is_not_an_npz(tmp_path):
    np.save(tmp_path / "d.npy", np.zeros((3, 2)))
    (tmp_path / "d.npy").rename(tmp_path / "d.npz")
    with pytest.raises(DataFileError) as info:
        npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    _assert_file_error(info, tmp_path / "d.npz")


def _no_numpy_pickle_advice(message: str) -> None:
    """numpy's text for pickled data invites loading it "unsafely using allow_pickle=":
    edgebuild never passes that on."""
    assert "allow_pickle" not in message and "unsafely" not in message, message


def _object_npz(path: Path) -> None:
    np.savez(path, x=np.array([{"a": 1}], dtype=object), y=np.array([0]))


def _object_npy(path: Path) -> None:
    np.save(path.with_suffix(".npy"), np.array([{"a": 1}], dtype=object))
    path.with_suffix(".npy").rename(path)


def _pickle(path: Path) -> None:
    import pickle

    path.write_bytes(pickle.dumps({"x": [1, 2], "y": [0]}))


@pytest.mark.parametrize(("make", "words"), [
    (_object_npz, ["array 'x' holds Python objects (pickled data)",
                   "np.savez(path, x=x.astype(np.float32), y=y.astype(np.int64))"]),
    (_object_npy, ["holds Python objects (pickled data)"]),
    (_pickle, ["is a Python pickle"]),
])
def test_npz_pickled_data_is_refused_in_edgebuilds_words(tmp_path, make, words):
    make(tmp_path / "d.npz")
    spec = npz.Spec(format="npz", path="d.npz")
    for call in (npz.probe, npz.load):
        with pytest.raises(DataFileError) as info:
            call(spec, tmp_path)
        _assert_file_error(info, tmp_path / "d.npz", *words, "edgebuild never loads",
                           "unpickling can run arbitrary code", "save plain numeric arrays")
        _no_numpy_pickle_advice(str(info.value))


@pytest.mark.parametrize("content", [b"not a NumPy file\n1,2,3\n", b""])
def test_npz_other_files_never_pass_numpy_pickle_advice(tmp_path, content):
    (tmp_path / "d.npz").write_bytes(content)  # numpy tries any such file as a pickle
    with pytest.raises(DataFileError) as info:
        npz.load(npz.Spec(format="npz", path="d.npz"), tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "not a readable .npz")
    _no_numpy_pickle_advice(str(info.value))
    assert "pickled" not in str(info.value)


@pytest.mark.parametrize(("arrays", "words"), [
    ({"images": np.zeros((3, 2)), "targets": np.zeros(3, dtype=int)},
     ["holds none of the arrays edgebuild reads", "`x`, `y`", "`x_train`, `y_train`",
      "found `images`, `targets`"]),
    ({"x": np.zeros((3, 2))}, ["`y` missing: `x` (inputs) and `y` (their labels) come together"]),
    ({"x_train": np.zeros((3, 2)), "y_train": np.zeros(3, dtype=int), "x_test": np.zeros((1, 2))},
     ["`y_test` missing: `x_test` (inputs) and `y_test` (their labels) come together"]),
])
def test_npz_missing_keys(tmp_path, arrays, words):
    spec = _npz(tmp_path, **arrays)
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", *words)
    assert info.value.field == ("path",)


def test_npz_float_labels(tmp_path):
    spec = _npz(tmp_path, x=np.zeros((4, 2)), y=np.array([0.0, 1.0, 0.0, 1.0]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "integer labels", "float64")


def test_npz_label_length_mismatch(tmp_path):
    spec = _npz(tmp_path, x=np.zeros((4, 2)), y=np.array([0, 1, 0]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "shape (4,)", "[3]")


def test_npz_test_label_length_mismatch(tmp_path):
    spec = _npz(tmp_path, x_train=np.zeros((4, 2)), y_train=np.array([0, 1, 0, 1]),
                x_test=np.zeros((2, 2)), y_test=np.array([0, 1, 1]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "test:")


def test_npz_two_dimensional_labels(tmp_path):
    spec = _npz(tmp_path, x=np.zeros((4, 2)), y=np.zeros((4, 1), dtype=int))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "y must be integer labels")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_npz_non_finite_x(tmp_path, bad):
    x = np.zeros((4, 2))
    x[2, 1] = bad
    spec = _npz(tmp_path, x=x, y=np.array([0, 1, 0, 1]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "NaN or infinite")


def test_npz_nan_in_test_x(tmp_path):
    x_test = np.zeros((2, 2))
    x_test[0, 0] = np.nan
    spec = _npz(tmp_path, x_train=np.zeros((4, 2)), y_train=np.array([0, 1, 0, 1]),
                x_test=x_test, y_test=np.array([0, 1]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "test: x contains NaN")


@pytest.mark.parametrize("x", [np.zeros(4), np.array([["a", "b"]] * 4)], ids=["1d", "strings"])
def test_npz_bad_x(tmp_path, x):
    spec = _npz(tmp_path, x=x, y=np.array([0, 1, 0, 1]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "x must be numeric")


def test_npz_test_labels_unseen_in_training(tmp_path):
    spec = _npz(tmp_path, x_train=np.zeros((4, 2)), y_train=np.array([3, 7, 3, 7]),
                x_test=np.zeros((3, 2)), y_test=np.array([3, 9, 5]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "never occur in training", "[5, 9]")


def test_npz_test_sample_shape_differs(tmp_path):
    spec = _npz(tmp_path, x_train=np.zeros((4, 2, 3)), y_train=np.array([0, 1, 0, 1]),
                x_test=np.zeros((2, 3, 2)), y_test=np.array([0, 1]))
    with pytest.raises(DataFileError) as info:
        npz.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "d.npz", "differ")


# --- idx -----------------------------------------------------------------------------------


def _idx_bytes(array: np.ndarray) -> bytes:
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09}
    header = b"\0\0" + bytes([codes[array.dtype], array.ndim])
    return header + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def _write_idx(path: Path, array: np.ndarray, compress: bool = False) -> Path:
    data = _idx_bytes(array)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _idx_set(tmp_path: Path, n: int = 12, size=(5, 4), labels=None, compress=False,
             test: int = 0) -> idx.Spec:
    rng = np.random.default_rng(2)
    suffix = ".gz" if compress else ""
    labels = np.arange(n) % 3 if labels is None else np.asarray(labels)
    _write_idx(tmp_path / f"train-images{suffix}", rng.integers(0, 256, (n, *size), dtype=np.uint8),
               compress)
    _write_idx(tmp_path / f"train-labels{suffix}", labels.astype(np.uint8), compress)
    fields = {"train_images": f"train-images{suffix}", "train_labels": f"train-labels{suffix}"}
    if test:
        _write_idx(tmp_path / f"test-images{suffix}",
                   rng.integers(0, 256, (test, *size), dtype=np.uint8), compress)
        _write_idx(tmp_path / f"test-labels{suffix}",
                   (np.arange(test) % 3).astype(np.uint8), compress)
        fields |= {"test_images": f"test-images{suffix}", "test_labels": f"test-labels{suffix}"}
    return idx.Spec(format="idx", **fields)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_idx_images(tmp_path, compress):
    spec = _idx_set(tmp_path, compress=compress, test=6)
    probe = idx.probe(spec, tmp_path)
    assert probe.sample_shape == (1, 5, 4) and probe.classes == 3
    raw = idx.load(spec, tmp_path)
    assert raw.x_train.shape == (12, 1, 5, 4) and raw.x_train.dtype == np.float64
    assert raw.x_test.shape == (6, 1, 5, 4)
    assert raw.y_train.dtype == np.int64 and raw.y_train.tolist() == [i % 3 for i in range(12)]
    assert raw.y_test.tolist() == [i % 3 for i in range(6)]
    assert raw.class_names == ("0", "1", "2")
    images = idx.read(tmp_path / spec.train_images)
    assert images.shape == (12, 5, 4) and images.dtype == np.uint8
    assert np.array_equal(raw.x_train[:, 0], images)


def test_idx_gzip_and_plain_agree(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = idx.load(_idx_set(tmp_path / "a"), tmp_path / "a")
    packed = idx.load(_idx_set(tmp_path / "b", compress=True), tmp_path / "b")
    assert np.array_equal(plain.x_train, packed.x_train)
    assert np.array_equal(plain.y_train, packed.y_train)


def test_idx_without_test_split(tmp_path):
    raw = idx.load(_idx_set(tmp_path), tmp_path)
    assert raw.x_test is None and raw.y_test is None
    assert len(idx.files(_idx_set(tmp_path), tmp_path)) == 2


def test_idx_labels_remapped(tmp_path):
    spec = _idx_set(tmp_path, n=6, labels=[9, 3, 7, 7, 3, 9])
    raw = idx.load(spec, tmp_path)
    assert raw.class_names == ("3", "7", "9")
    assert raw.y_train.tolist() == [2, 0, 1, 1, 0, 2]
    assert idx.probe(spec, tmp_path).classes == 3


def test_idx_other_ranks(tmp_path):
    _write_idx(tmp_path / "flat", np.zeros((4, 7), dtype=np.uint8))
    _write_idx(tmp_path / "chw", np.zeros((4, 3, 2, 2), dtype=np.int8))
    _write_idx(tmp_path / "labels", np.array([0, 1, 0, 1], dtype=np.uint8))
    flat = idx.Spec(format="idx", train_images="flat", train_labels="labels")
    chw = idx.Spec(format="idx", train_images="chw", train_labels="labels")
    assert idx.probe(flat, tmp_path).sample_shape == (7,)
    assert idx.load(flat, tmp_path).x_train.shape == (4, 7)
    assert idx.probe(chw, tmp_path).sample_shape == (3, 2, 2)
    assert idx.load(chw, tmp_path).x_train.shape == (4, 3, 2, 2)


def test_idx_signed_and_wide_types(tmp_path):
    values = np.array([[-3, 2], [1, -1000]], dtype=">i2")
    header = b"\0\0\x0b\x02" + struct.pack(">2I", 2, 2)
    (tmp_path / "img").write_bytes(header + values.tobytes())
    assert idx.read(tmp_path / "img").tolist() == [[-3, 2], [1, -1000]]


@pytest.mark.parametrize("header", [
    b"\x01\0\x08\x03", b"\0\0\x07\x03", b"\0\0\x08\x00", b"\0\0", b"",
    b"PK\x03\x04",
], ids=["nonzero", "type", "no-dims", "short", "empty", "zip"])
def test_idx_bad_magic(tmp_path, header):
    (tmp_path / "img").write_bytes(header + b"\0" * 16)
    with pytest.raises(DataFileError) as info:
        idx.read(tmp_path / "img")
    _assert_file_error(info, tmp_path / "img", "bad magic")


def test_idx_bad_magic_via_probe_and_load(tmp_path):
    spec = _idx_set(tmp_path)
    (tmp_path / "train-images").write_bytes(b"\x12\x34\x56\x78" + b"\0" * 100)
    for call in (idx.probe, idx.load):
        with pytest.raises(DataFileError) as info:
            call(spec, tmp_path)
        _assert_file_error(info, tmp_path / "train-images", "bad magic")


def test_idx_truncated_header(tmp_path):
    (tmp_path / "img").write_bytes(b"\0\0\x08\x03" + struct.pack(">2I", 10, 28))
    with pytest.raises(DataFileError) as info:
        idx.read(tmp_path / "img")
    _assert_file_error(info, tmp_path / "img", "truncated")


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_idx_truncated_body(tmp_path, compress):
    data = _idx_bytes(np.zeros((10, 4, 4), dtype=np.uint8))[:-7]
    (tmp_path / "img").write_bytes(gzip.compress(data) if compress else data)
    with pytest.raises(DataFileError) as info:
        idx.read(tmp_path / "img")
    _assert_file_error(info, tmp_path / "img", "[10, 4, 4]", "160 values", "153 bytes")


def test_idx_body_longer_than_header(tmp_path):
    (tmp_path / "img").write_bytes(_idx_bytes(np.zeros((2, 2, 2), dtype=np.uint8)) + b"\0")
    with pytest.raises(DataFileError) as info:
        idx.read(tmp_path / "img")
    _assert_file_error(info, tmp_path / "img", "9 bytes")


def test_idx_truncated_gzip_stream(tmp_path):
    packed = gzip.compress(_idx_bytes(np.zeros((50, 8, 8), dtype=np.uint8)))
    (tmp_path / "img").write_bytes(packed[: len(packed) - 10])
    with pytest.raises(DataFileError) as info:
        idx.read(tmp_path / "img")
    _assert_file_error(info, tmp_path / "img")


def test_idx_label_count_mismatch(tmp_path):
    spec = _idx_set(tmp_path, n=12)
    _write_idx(tmp_path / "train-labels", np.zeros(11, dtype=np.uint8))
    with pytest.raises(DataFileError) as info:
        idx.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "train-labels", "expected 12 labels", "train-images")


def test_idx_test_labels_unseen(tmp_path):
    spec = _idx_set(tmp_path, test=3)
    _write_idx(tmp_path / "test-labels", np.array([0, 1, 5], dtype=np.uint8))
    with pytest.raises(DataFileError) as info:
        idx.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "test-labels", "never seen in training")


def test_idx_half_a_test_split(tmp_path):
    _idx_set(tmp_path, test=3)
    spec = idx.Spec(format="idx", train_images="train-images", train_labels="train-labels",
                    test_images="test-images")
    with pytest.raises(DataFileError, match="both test_images and test_labels"):
        idx.files(spec, tmp_path)


def test_idx_missing_file(tmp_path):
    spec = idx.Spec(format="idx", train_images="a", train_labels="b")
    with pytest.raises(DataFileError) as info:
        idx.probe(spec, tmp_path)
    _assert_file_error(info, tmp_path / "a", "not found")


@pytest.mark.skipif(not (FASHION / "t10k-images-idx3-ubyte.gz").is_file(),
                    reason=f"Fashion-MNIST not installed at {FASHION} (apt install dataset-fashion-mnist)")
def test_idx_real_fashion_mnist():
    spec = idx.Spec(format="idx", train_images=str(FASHION / "t10k-images-idx3-ubyte.gz"),
                    train_labels=str(FASHION / "t10k-labels-idx1-ubyte.gz"))
    probe = idx.probe(spec, Path("/nonexistent"))
    assert probe.sample_shape == (1, 28, 28) and probe.classes == 10
    raw = idx.load(spec, Path("/nonexistent"))
    assert raw.x_train.shape == (10000, 1, 28, 28)
    assert raw.x_train.min() == 0 and raw.x_train.max() == 255
    assert np.bincount(raw.y_train).tolist() == [1000] * 10


# --- ts ------------------------------------------------------------------------------------

TS_HEADER = """\
# A comment line, as UCR files have
@problemName Tiny
@timeStamps false
@missing false
@univariate false
@dimensions 2
@equalLength true
@seriesLength 3
@classLabel true a b
@data
"""


def _ts(tmp_path: Path, body: str, header: str = TS_HEADER, name: str = "t.ts") -> ts.Spec:
    (tmp_path / name).write_text(header + body)
    return ts.Spec(format="ts", train=name)


def test_ts_read(tmp_path):
    spec = _ts(tmp_path, "1,2,3:4,5,6:a\n7,8,9:10,11,12:b\n\n-1.5,0,2e3:0.25,1,1:a\n")
    raw = ts.load(spec, tmp_path)
    assert raw.x_train.shape == (3, 2, 3) and raw.x_train.dtype == np.float64
    assert raw.x_train[0].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert raw.x_train[2].tolist() == [[-1.5, 0, 2000], [0.25, 1, 1]]
    assert raw.y_train.tolist() == [0, 1, 0] and raw.y_train.dtype == np.int64
    assert raw.class_names == ("a", "b")
    assert raw.x_test is None
    probe = ts.probe(spec, tmp_path)
    assert probe.sample_shape == (2, 3) and probe.classes == 2


def test_ts_labels_follow_header_order(tmp_path):
    header = "@problemName X\n@classLabel true zeta alpha 7\n@data\n"
    spec = _ts(tmp_path, "1,2:alpha\n3,4:7\n5,6:zeta\n", header)
    raw = ts.load(spec, tmp_path)
    assert raw.class_names == ("zeta", "alpha", "7")
    assert raw.y_train.tolist() == [1, 2, 0]
    assert raw.x_train.shape == (3, 1, 2)
    assert ts.probe(spec, tmp_path).classes == 3  # unused classes still count


def test_ts_mixed_case_header_keys(tmp_path):
    header = "@PROBLEMNAME X\n@timestamps false\n@ClassLabel TRUE p q\n@DATA\n"
    raw = ts.load(_ts(tmp_path, "1,2:p\n3,4:q\n", header), tmp_path)
    assert raw.y_train.tolist() == [0, 1]


def test_ts_label_whitespace_and_crlf(tmp_path):
    (tmp_path / "t.ts").write_bytes(b"@classLabel true a b\r\n@data\r\n1,2:a \r\n3,4:b\r\n")
    raw = ts.load(ts.Spec(format="ts", train="t.ts"), tmp_path)
    assert raw.y_train.tolist() == [0, 1]


def test_ts_train_and_test(tmp_path):
    _ts(tmp_path, "1,2,3:4,5,6:a\n7,8,9:10,11,12:b\n", name="train.ts")
    _ts(tmp_path, "0,0,0:1,1,1:b\n", name="test.ts")
    spec = ts.Spec(format="ts", train="train.ts", test="test.ts")
    raw = ts.load(spec, tmp_path)
    assert raw.x_test.shape == (1, 2, 3) and raw.y_test.tolist() == [1]
    assert len(ts.files(spec, tmp_path)) == 2


def test_ts_test_file_differs(tmp_path):
    _ts(tmp_path, "1,2,3:4,5,6:a\n", name="train.ts")
    _ts(tmp_path, "1,2:4,5:a\n", name="test.ts")
    spec = ts.Spec(format="ts", train="train.ts", test="test.ts")
    with pytest.raises(DataFileError) as info:
        ts.load(spec, tmp_path)
    _assert_file_error(info, tmp_path / "test.ts", "differ")


def _ts_error(tmp_path: Path, body: str, header: str = TS_HEADER, *words: str):
    spec = _ts(tmp_path, body, header)
    for call in (ts.probe, ts.load):
        with pytest.raises(DataFileError) as info:
            call(spec, tmp_path)
        _assert_file_error(info, tmp_path / "t.ts", *words)


def test_ts_unequal_lengths_within_a_series(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n1,2,3:4,5:b\n", TS_HEADER, "line 12", "equal-length")


def test_ts_unequal_lengths_across_series(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n1,2:4,5:b\n", TS_HEADER, "line 12", "equal-length")


def test_ts_dimension_count_differs(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n1,2,3:b\n", TS_HEADER, "line 12", "dimensions differ")


def test_ts_missing_values(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n1,?,3:4,5,6:b\n", TS_HEADER, "line 12", "missing")


def test_ts_non_numeric_value(tmp_path):
    _ts_error(tmp_path, "1,2,x:4,5,6:a\n", TS_HEADER, "line 11", "non-numeric")


def test_ts_line_without_values(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\nb\n", TS_HEADER, "line 12")


def test_ts_label_not_in_header(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n1,2,3:4,5,6:c\n", TS_HEADER, "line 12", "'c'",
              "['a', 'b']")


def test_ts_no_data_section(tmp_path):
    _ts_error(tmp_path, "", TS_HEADER.replace("@data\n", ""), "no @data")


def test_ts_no_series_after_data(tmp_path):
    _ts_error(tmp_path, "\n\n", TS_HEADER, "no series")


def test_ts_class_label_false(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6\n",
              TS_HEADER.replace("@classLabel true a b", "@classLabel false"), "@classLabel false")


def test_ts_class_label_missing(tmp_path):
    _ts_error(tmp_path, "1,2,3:4,5,6:a\n",
              TS_HEADER.replace("@classLabel true a b\n", ""), "missing @classLabel")


def test_ts_not_utf8(tmp_path):
    (tmp_path / "t.ts").write_bytes(b"@classLabel true a b\n@data\n1,2:\xff\xfe\n")
    with pytest.raises(DataFileError) as info:
        ts.load(ts.Spec(format="ts", train="t.ts"), tmp_path)
    _assert_file_error(info, tmp_path / "t.ts", "cannot read")


def test_ts_missing_file(tmp_path):
    with pytest.raises(DataFileError) as info:
        ts.probe(ts.Spec(format="ts", train="missing.ts"), tmp_path)
    _assert_file_error(info, tmp_path / "missing.ts", "not found")


needs_aeon = pytest.mark.skipif(importlib.util.find_spec("aeon") is None,
                                reason="aeon is not installed (pip install --no-deps aeon)")


@needs_aeon
def test_ts_real_japanese_vowels():
    train = PackageFile(package="aeon", path=VOWELS.format("TRAIN"))
    test = PackageFile(package="aeon", path=VOWELS.format("TEST"))
    spec = ts.Spec(format="ts", train=train, test=test)
    probe = ts.probe(spec, Path("/nonexistent"))
    assert probe.sample_shape == (12, 25) and probe.classes == 9
    raw = ts.load(spec, Path("/nonexistent"))
    assert raw.x_train.shape == (270, 12, 25)
    assert raw.x_test.shape[1:] == (12, 25)
    assert raw.class_names == tuple(str(i) for i in range(1, 10))
    assert sorted(np.unique(raw.y_train).tolist()) == list(range(9))
    assert np.isfinite(raw.x_train).all()


@needs_aeon
def test_ts_spec_accepts_package_file_mapping():
    spec = ts.Spec.model_validate(
        {"format": "ts", "train": {"package": "aeon", "path": VOWELS.format("TRAIN")}})
    assert isinstance(spec.train, PackageFile)
    (path,) = ts.files(spec, Path("."))
    assert path.name == "JapaneseVowels_eq_TRAIN.ts" and path.is_file()


# --- PackageFile ---------------------------------------------------------------------------


def test_package_file_not_installed():
    ref = PackageFile(package="edgebuild_no_such_package", path="data/x.ts")
    with pytest.raises(DataFileError) as info:
        resolve(ref, Path("."))
    message = str(info.value)
    assert "edgebuild_no_such_package:data/x.ts" in message
    assert "not installed" in message
    assert "pip install --no-deps edgebuild_no_such_package" in message


def test_package_file_hint_names_what_pip_installs(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(DataFileError) as info:
        resolve(PackageFile(package="sklearn", path="datasets/data/digits.csv.gz"), Path("."))
    assert "pip install --no-deps scikit-learn`" in str(info.value)


def test_package_file_not_installed_through_a_format(tmp_path):
    spec = ts.Spec(format="ts", train=PackageFile(package="edgebuild_no_such_package.sub",
                                                  path="x.ts"))
    with pytest.raises(DataFileError, match="install"):
        ts.probe(spec, tmp_path)


def test_package_file_dotted_package():
    nested = resolve(PackageFile(package="sklearn.datasets", path="data/digits.csv.gz"), Path("."))
    direct = resolve(PackageFile(package="sklearn", path="datasets/data/digits.csv.gz"), Path("."))
    assert nested == direct and nested.is_file()


def test_package_file_missing_inside_package(tmp_path):
    spec = ts.Spec(format="ts", train=PackageFile(package="edgebuild", path="no/such.ts"))
    with pytest.raises(DataFileError, match="not found"):
        ts.files(spec, tmp_path)


def test_package_file_name_is_validated():
    with pytest.raises(ValueError):
        PackageFile(package="not a package", path="x")


# --- synthetic-emg ------------------------------------------------------------------------

def emg_spec(**fields) -> emg.Spec:
    return emg.Spec.model_validate({"format": "synthetic-emg", "train": 36, "test": 18,
                                    "length": 120, **fields})


def test_emg_generator_is_the_declared_shape_balanced_and_seeded():
    spec = emg_spec()
    raw = emg.load(spec, Path("."))
    assert raw.x_train.shape == (36, 14, 120) and raw.x_test.shape == (18, 14, 120)
    assert np.bincount(raw.y_train).tolist() == [4] * 9
    assert np.bincount(raw.y_test).tolist() == [2] * 9
    assert emg.probe(spec, Path(".")) == Probe((14, 120), 9)
    assert emg.files(spec, Path(".")) == []  # generated: the fields key the build
    again = emg.load(spec, Path("."))
    assert np.array_equal(raw.x_train, again.x_train) and np.array_equal(raw.x_test, again.x_test)
    other = emg.load(emg_spec(seed=1), Path("."))
    assert not np.array_equal(raw.x_train, other.x_train)
    assert np.isfinite(raw.x_train).all() and raw.x_train.std() > 0


def test_emg_words_differ_in_where_their_energy_is():
    """A class is its electrodes' energy over time: the mean envelope of one class is
    closer to its own samples' than to another class's (what a model can learn)."""
    raw = emg.load(emg_spec(train=180, noise=0.1), Path("."))
    energy = (raw.x_train ** 2).reshape(180, 14, 12, 10).mean(axis=3).reshape(180, -1)
    centroids = np.stack([energy[raw.y_train == k].mean(axis=0) for k in range(9)])
    nearest = np.argmin(((energy[:, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)
    assert (nearest == raw.y_train).mean() > 0.5  # chance is 1/9


@pytest.mark.parametrize("field,value", [("channels", 0), ("classes", 1), ("length", 8),
                                         ("noise", -1), ("seed", -1), ("phases", 0)])
def test_emg_fields_out_of_range_are_refused(field, value):
    with pytest.raises(ValidationError, match=field):
        emg_spec(**{field: value})
