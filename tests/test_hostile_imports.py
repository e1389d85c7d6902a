"""Hostile files given to the importers (issue 28: "hostile files cannot stall or break the
tool"): `edgebuild import-onnx` and `edgebuild import-ai8x --checkpoint` refuse a file that
asks for more than any microcontroller holds, or that is damaged or not what it claims to
be, with exit status 2 and one line naming the file, what is wrong and the limit; never a
traceback, an internal error, a stall or a gigabyte of memory.

Every file is generated here (onnx.helper, torch.save, pickle, or bytes written by hand in
tmp_path), and every case runs the CLI under a time and memory bound (tests/hostile.py).
Each failed on the code before the limits: an internal error (exit 1), a stall killed at
its time bound, a peak memory over its bound, torch's advice to unpickle anyway, an empty
reason, or a manifest a node name wrote into.
"""

from __future__ import annotations

import collections
import datetime
import io
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.hostile import assert_user_error, run_bounded
except ImportError:
    from hostile import assert_user_error, run_bounded

SECONDS = 60  # each case ends in ~2 s here; the bound is for a shared, noisy machine
MIB = 1024  # each case peaks below ~550 MiB (torch alone is ~240)
NETWORK = Path(__file__).resolve().parent / "data" / "ai8x" / "mnist-extrasmall" / "network.yaml"


# ---- import-onnx --------------------------------------------------------------------------

def _model(nodes: list, inits: list | None = None, shape: list | None = None,
           producer: str = "hostile") -> bytes:
    """A graph of `nodes` reading input `x` (default [N, 4]) and writing `y`."""
    graph = helper.make_graph(
        nodes, "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         shape or ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name=producer)
    model.ir_version = 8
    return model.SerializeToString()


def _i64(name: str, value: object) -> TensorProto:
    return numpy_helper.from_array(np.array(value, np.int64), name)


def _declared(name: str, dims: list[int]) -> TensorProto:
    """A float tensor that declares `dims` and holds no data (a few bytes in the file)."""
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT)
    tensor.dims.extend(dims)
    return tensor


def _filled(output: str, shape: str) -> object:
    """ConstantOfShape: a constant of the shape held by initializer `shape`, all ones."""
    return helper.make_node("ConstantOfShape", [shape], [output], name=output,
                            value=numpy_helper.from_array(np.ones(1, np.float32)))


def input_dims() -> bytes:
    """A sample of 1e12 values: the old folding made `np.zeros` of it for the Shape."""
    return _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                   helper.make_node("Reshape", ["x", "s"], ["y"], name="flatten")],
                  shape=["N", 1, 1_000_000, 1_000_000])


def initializer_dims() -> bytes:
    return _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")],
                  [_declared("w", [1_000_000_000])])


def constant_dims() -> bytes:
    return _model([helper.make_node("Constant", [], ["c"], name="const",
                                    value=_declared("c", [1_000_000_000])),
                   helper.make_node("Add", ["x", "c"], ["y"], name="add")])


def fold_tebibytes() -> bytes:
    """Folding ConstantOfShape([1e6, 1e6]) needs 3.6 TiB (the issue's probe)."""
    return _model([_filled("c", "s"), helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                  [_i64("s", [1_000_000, 1_000_000])])


def fold_gibibytes() -> bytes:
    """2 GiB: numpy can allocate it, and the old folding did."""
    return _model([_filled("c", "s"), helper.make_node("Add", ["x", "c"], ["y"], name="add")],
                  [_i64("s", [1 << 29])])


def fold_total() -> bytes:
    """Twenty folded constants of 60 MiB each: each within the limit, 1.2 GiB together."""
    nodes = [_filled(f"c{i}", "s") for i in range(20)]
    nodes.append(helper.make_node("Sum", ["x", *(f"c{i}" for i in range(20))], ["y"],
                                  name="sum"))
    return _model(nodes, [_i64("s", [15 << 20])])


def loop_forever() -> bytes:
    """A Loop of 1e12 iterations over constants: the old folding ran it."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [4])])
    return _model([helper.make_node("Loop", ["m", "go", "v"], ["w"], body=body, name="loop"),
                   helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                  [_i64("m", 10**12), numpy_helper.from_array(np.array(True), "go"),
                   numpy_helper.from_array(np.zeros(4, np.float32), "v")])


def many_nodes() -> bytes:
    """100,000 nodes in 600 KB (each decodes to some 150 bytes, each costs the importer)."""
    graph = onnx.load_from_string(_model([helper.make_node("Relu", ["x"], ["y"])])).graph
    for _ in range(100_000):
        graph.node.add(op_type="Relu")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


# case -> (the file's bytes, what the one line says)
ONNX_CASES: dict[str, tuple[Callable[[], bytes], tuple[str, ...]]] = {
    "onnx_input_dim_1e6x1e6": (input_dims, (
        "input 'x': one sample has shape [1, 1000000, 1000000]",
        "4,000,000,000,000 bytes (3.6 TiB)", "at most 16,777,216 elements and 67,108,864 bytes")),
    "onnx_initializer_dim_1e9": (initializer_dims, (
        "initializer 'w' has shape [1000000000]: 1,000,000,000 elements, 4,000,000,000 bytes",
        "at most 16,777,216 elements")),
    "onnx_constant_dim_1e9": (constant_dims, (
        "node 'Constant const': its output 'c', a constant folded at import, has shape "
        "[1000000000]", "4,000,000,000 bytes (3.7 GiB)", "67,108,864 bytes (64.0 MiB)")),
    "onnx_fold_3.6TiB": (fold_tebibytes, (
        "node 'ConstantOfShape c'", "has shape [1000000, 1000000]",
        "4,000,000,000,000 bytes (3.6 TiB)", "at most 16,777,216 elements")),
    "onnx_fold_2GiB": (fold_gibibytes, (
        "node 'ConstantOfShape c'", "has shape [536870912]", "2,147,483,648 bytes (2.0 GiB)")),
    "onnx_fold_total_1.2GiB": (fold_total, (
        "the output 'c4' of node 'ConstantOfShape c4' (62,914,560 bytes (60.0 MiB)) would "
        "bring the model's constants to", "at most 268,435,456 bytes (256.0 MiB) of constants")),
    "onnx_loop_1e12_iterations": (loop_forever, (
        "node 'Loop loop': operator Loop is not supported",)),
    "onnx_100k_nodes": (many_nodes, (
        "more than 10,000 nodes; edgebuild imports models of at most that many",)),
}


@pytest.mark.parametrize("case", sorted(ONNX_CASES))
def test_hostile_onnx_files_are_refused_with_what_they_ask_for(tmp_path: Path, case: str):
    build, needles = ONNX_CASES[case]
    source = tmp_path / "hostile.onnx"
    source.write_bytes(build())
    outcome = run_bounded(case, ["import-onnx", str(source), "-o", "out/"], tmp_path,
                          seconds=SECONDS, mib=MIB)
    assert_user_error(outcome, *needles)
    assert outcome.lines() == [outcome.lines()[0]] and \
        outcome.lines()[0].startswith(f"{source}: "), outcome.stderr[-2000:]
    assert not (tmp_path / "out").exists()  # nothing written


def test_an_onnx_file_beyond_the_size_limit_is_not_read(tmp_path: Path):
    """1.2 GiB (sparse: no disk space used): the old import read it all into memory."""
    source = tmp_path / "large.onnx"
    with open(source, "wb") as file:
        file.truncate(1200 << 20)
    outcome = run_bounded("onnx_file_1.2GiB", ["import-onnx", str(source)], tmp_path,
                          seconds=SECONDS, mib=MIB)
    assert_user_error(outcome, f"{source}: 1,258,291,200 bytes (1.2 GiB); edgebuild imports "
                               "ONNX files of at most 268,435,456 bytes (256.0 MiB)")


def test_names_in_an_onnx_file_stay_on_their_line(tmp_path: Path):
    """A producer and a node name holding newlines went into the manifest's comments as
    they were, so the file wrote keys of its own into the manifest (a dataset path, a
    name); now they are escaped, and the manifest is the importer's alone."""
    source = tmp_path / "inject.onnx"
    source.write_bytes(_model(
        [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1, name="fc\nname: injected\n#")],
        [numpy_helper.from_array(np.ones((3, 4), np.float32), "w")],
        producer="evil\ndataset: {format: npz, path: /etc/passwd}\n#"))
    outcome = run_bounded("onnx_names_with_newlines", ["import-onnx", str(source), "-o",
                                                       "out/"], tmp_path, seconds=SECONDS,
                          mib=MIB)
    assert outcome.code == 0, outcome.stderr[-2000:]
    text = (tmp_path / "out" / "inject.yaml").read_text()
    manifest = yaml.safe_load(text)
    assert manifest["name"] == "inject" and "dataset" not in manifest, text
    assert "(evil\\ndataset: {format: npz, path: /etc/passwd}\\n#)" in text.splitlines()[0]


def test_a_name_of_megabytes_is_not_a_message_of_megabytes(tmp_path: Path):
    source = tmp_path / "named.onnx"
    source.write_bytes(_model([helper.make_node("Sigmoid", ["x"], ["y"], name="n" * 10**7)]))
    outcome = run_bounded("onnx_10MB_node_name", ["import-onnx", str(source)], tmp_path,
                          seconds=SECONDS, mib=MIB)
    assert_user_error(outcome, "node 'Sigmoid nnnnnnnn", "...': operator Sigmoid is not "
                                                         "supported")
    assert max(len(line) for line in outcome.lines()) < 1000


# ---- import-ai8x --checkpoint -------------------------------------------------------------

class _Storage:
    """torch.save's reference to a stored tensor: (kind, storage type, key, place, size)."""

    def __init__(self, key: str, numel: int) -> None:
        self.key, self.numel = key, numel


class _View:
    """A tensor as torch.save pickles one: any shape and strides over a storage."""

    def __init__(self, storage: _Storage, size: tuple[int, ...], stride: tuple[int, ...]):
        self.args = (storage, 0, size, stride)

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (*self.args, False, collections.OrderedDict())


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj: object) -> object:
        if isinstance(obj, _Storage):
            return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel)
        return None


def _archive(state: dict, records: dict[str, bytes]) -> bytes:
    """torch.save's zip archive around a pickle of our making: what any writer can make."""
    data = io.BytesIO()
    _Pickler(data, protocol=2).dump({"arch": "ai85netextrasmall", "state_dict": state})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", data.getvalue())
        archive.writestr("archive/byteorder", "little")
        for key, value in records.items():
            archive.writestr(f"archive/data/{key}", value)
        archive.writestr("archive/version", "3\n")
    return out.getvalue()


def _saved(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def pickled_object() -> bytes:
    """torch.save of a checkpoint holding an object beyond tensors and plain data (as a
    whole nn.Module, or an object whose unpickling runs code, would)."""
    return _saved({"arch": "ai85netextrasmall",
                   "state_dict": {"conv1.op.weight": torch.ones(8, 1, 3, 3)},
                   "extras": {"saved": datetime.date(2024, 1, 1)}})


def plain_pickle() -> bytes:
    """pickle.dump, not torch.save: a plain Python pickle of a checkpoint-like dict."""
    return pickle.dumps({"arch": "ai85netextrasmall",
                         "state_dict": {"conv1.op.weight": [[1.0, 2.0]]}})


def empty() -> bytes:
    return b""


def truncated() -> bytes:
    whole = _saved({"arch": "ai85netextrasmall",
                    "state_dict": {"conv1.op.weight": torch.ones(8, 1, 3, 3)}})
    return whole[:len(whole) // 2]


def huge_view() -> bytes:
    """One stored value, viewed as a [1e5, 1e5, 3, 3] weight: 9e10 values."""
    view = _View(_Storage("0", 1), (100_000, 100_000, 3, 3), (0, 0, 0, 0))
    return _archive({"conv1.op.weight": view}, {"0": np.ones(1, np.float32).tobytes()})


def views_beyond_the_device() -> bytes:
    """Four weights of 18.9 million values each: each within the device, not together
    (the old import made arrays of all four, 1.2 GB of them)."""
    views = {f"{name}.op.weight": _View(_Storage("0", 1), (2048, 1024, 3, 3), (0, 0, 0, 0))
             for name in ("conv1", "conv2", "conv3", "fc")}
    return _archive(views, {"0": np.ones(1, np.float32).tobytes()})


# torch's advice, never ours
REFUSED = ("weights_only=False", "`weights_only` set to `False`", "add_safe_globals", "allowlist")

# case -> (the checkpoint's bytes, what the one line says, peak MiB)
CHECKPOINT_CASES: dict[str, tuple[Callable[[], bytes], tuple[str, ...], int]] = {
    "ckpt_pickled_object": (pickled_object, (
        "not a weights-only checkpoint (it pickles datetime.date", "never unpickles "
        "arbitrary "
        "objects, as unpickling them can run code", "torch.save({'arch': ARCH, 'state_dict': "
        "model.state_dict()}, FILE)"), MIB),
    "ckpt_plain_pickle": (plain_pickle, (
        "not a weights-only checkpoint (a pickle that holds more than tensors and plain data",
        "never unpickles arbitrary objects", "Fix: in a trusted environment"), MIB),
    "ckpt_empty": (empty, ("not a PyTorch checkpoint: empty file (0 bytes)",), MIB),
    "ckpt_truncated": (truncated, (
        "not a PyTorch checkpoint: truncated zip archive (no directory at its end",), MIB),
    "ckpt_view_9e10_values": (huge_view, (
        "conv1.op.weight has shape [100000, 100000, 3, 3]: 90,000,000,000 values "
        "(360,000,000,000 bytes)", "the largest MAX7800x device (max78002) holds "
        "19,177,472 values in all"), MIB),
    "ckpt_views_beyond_the_device": (views_beyond_the_device, (
        "conv2.op.weight has shape [2048, 1024, 3, 3]: 18,874,368 values",
        "holds 19,177,472 values in all", "the tensors before it have 18,874,368"),
        768),  # one weight made into arrays: ~540 MiB (all four, as before: ~970)
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CASES))
def test_hostile_checkpoints_are_refused_with_a_reason(tmp_path: Path, case: str):
    build, needles, mib = CHECKPOINT_CASES[case]
    checkpoint = tmp_path / "hostile.pth.tar"
    checkpoint.write_bytes(build())
    outcome = run_bounded(case, ["import-ai8x", str(NETWORK), "--checkpoint", str(checkpoint),
                                 "-o", "out"], tmp_path, seconds=SECONDS, mib=mib)
    assert_user_error(outcome, *needles)
    assert outcome.lines() == [outcome.lines()[0]] and \
        outcome.lines()[0].startswith(f"{checkpoint}: "), outcome.stderr[-2000:]
    assert not any(advice in outcome.stderr for advice in REFUSED), outcome.stderr[-2000:]
    assert not (tmp_path / "out").exists()  # nothing written
