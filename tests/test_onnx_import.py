"""ONNX in (issue 19, item 9): `edgebuild import-onnx` writes a manifest and float weights
(`train.init`, `train.epochs: 0`) that `check` accepts, whose float network (edgebuild's
Net) computes what onnxruntime computes on the ONNX file, and that builds through
post-training quantization, C generation and the known-answer test.

The ONNX files come three ways: PyTorch's TorchScript exporter (`torch.onnx.export(...,
dynamo=False)`; the default dynamo exporter needs onnxscript, which edgebuild does not
install), edgebuild's own float export (interchange.export) of edgebuild models, and
onnx.helper by hand in the patterns PyTorch emits (MatMul + Add, Conv + Add of a bias,
Clip with constant bounds, a shared initializer behind an Identity, a Reshape target
computed from Shape).
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

onnxruntime = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from edgebuild.core import arrays  # noqa: E402
from edgebuild.interchange import export  # noqa: E402
from edgebuild.manifest import Model  # noqa: E402
from edgebuild.ops.operator import Mode  # noqa: E402
from edgebuild.pipeline import validation  # noqa: E402
from edgebuild.train import network  # noqa: E402

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import npz_data, run_cli
except ImportError:
    from conftest import npz_data, run_cli

nn = torch.nn


class TwoD(nn.Module):
    """conv + batchnorm + relu, a depthwise conv with ReLU6, a residual add, concat, max
    and average pooling, dropout, flatten by view, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.pw = nn.Conv2d(8, 8, 1)
        self.fc = nn.Linear(16 * 2 * 2, 10)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.bn(self.conv(x)))
        b = nn.functional.relu6(self.dw(a))
        c = torch.cat([torch.relu(a + self.pw(b)), a], 1)
        c = nn.functional.avg_pool2d(nn.functional.max_pool2d(c, 2), 2)
        return self.fc(self.drop(c.view(c.size(0), -1)))


class OneD(nn.Module):
    """conv1d, a depthwise conv1d, global average pooling, linear + batchnorm + relu,
    linear, a final softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 6, 3, padding=1)
        self.dw = nn.Conv1d(6, 6, 5, padding=2, groups=6)
        self.fc1 = nn.Linear(6, 12)
        self.bn = nn.BatchNorm1d(12)
        self.fc2 = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.dw(torch.relu(self.conv(x))))
        y = torch.flatten(nn.functional.adaptive_avg_pool1d(y, 1), 1)
        return torch.softmax(self.fc2(torch.relu(self.bn(self.fc1(y)))), 1)


class LeNet(nn.Module):
    """The classic order: convolution, max pooling, then the ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 5)
        self.conv2 = nn.Conv2d(4, 8, 3)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.relu(nn.functional.max_pool2d(self.conv1(x), 2))
        x = nn.functional.relu(nn.functional.max_pool2d(self.conv2(x), 2))
        return self.fc2(nn.functional.relu(self.fc1(torch.flatten(x, 1))))


PYTORCH = {"two_d": (TwoD, (1, 8, 8), 10), "one_d": (OneD, (3, 20), 4),  # classes last
           "lenet": (LeNet, (1, 16, 16), 10)}


def torch_export(module: nn.Module, shape: tuple[int, ...], path: Path) -> Path:
    torch.manual_seed(0)
    for sub in module.modules():  # statistics a trained batchnorm would have
        if isinstance(sub, nn.BatchNorm1d | nn.BatchNorm2d):
            sub.running_mean.uniform_(-0.2, 0.2)
            sub.running_var.uniform_(0.5, 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module.eval(), (torch.zeros(1, *shape),), str(path), dynamo=False,
                              opset_version=17, input_names=["x"], dynamic_axes={"x": {0: "N"}})
        except (ImportError, RuntimeError) as exc:  # an exporter that needs onnxscript
            pytest.skip(f"torch.onnx.export does not work here: {exc}")
    return path


def imported(model: Path, tmp_path: Path, *extra: str) -> Path:
    """`edgebuild import-onnx` into tmp_path/<stem>/<stem>.yaml (exit 0)."""
    manifest = tmp_path / model.stem / f"{model.stem}.yaml"
    result = run_cli(["import-onnx", str(model), "-o", str(manifest), *extra], tmp_path)
    assert result.returncode == 0, result.stderr
    return manifest


def float_outputs(manifest: Path, x: np.ndarray) -> np.ndarray:
    """The imported model through edgebuild's float network."""
    loaded = validation.load(manifest).manifest if _has_dataset(manifest) else _manifest(manifest)
    net = network.Net(loaded.model.input, loaded.model.layers,
                      Mode("float", clamp=loaded.train.clamp_activations))
    network.load_numpy(net, arrays.load(manifest.parent / loaded.train.init))
    with torch.no_grad():
        return net.eval()(torch.as_tensor(x)).numpy()


def _has_dataset(manifest: Path) -> bool:
    return "dataset" in yaml.safe_load(manifest.read_text())


def _manifest(manifest: Path):
    from edgebuild.manifest import Manifest

    return Manifest.model_validate(yaml.safe_load(manifest.read_text()))


def onnx_outputs(model: Path | bytes, x: np.ndarray) -> np.ndarray:
    source = str(model) if isinstance(model, Path) else model
    session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def samples(shape: tuple[int, ...], count: int = 32) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, (count, *shape)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(PYTORCH))
def test_pytorch_models_import_and_compute_alike(tmp_path: Path, name: str):
    module, shape, classes = PYTORCH[name]
    source = torch_export(module(), shape, tmp_path / f"{name}.onnx")
    data = tmp_path / "data.npz"
    np.savez(data, x=samples(shape, 40), y=np.arange(40) % classes)
    manifest = imported(source, tmp_path, "--data", str(data))
    check = run_cli(["check", str(manifest)], tmp_path)
    assert check.returncode == 0, check.stderr
    x = samples(shape)
    got = float_outputs(manifest, x)
    expected = onnx_outputs(source, x)
    if name == "one_d":  # the final softmax is left out (a warning says so)
        got = torch.softmax(torch.as_tensor(got), 1).numpy()
    assert np.abs(got - expected).max() < 1e-5
    # the exporter folds a batchnorm into the Conv before it, not into a Gemm
    layers = yaml.safe_load(manifest.read_text())["model"]["layers"]
    ops = {layer["op"] for layer in layers}
    if name == "lenet":  # each ReLU after a max pool is the convolution's act
        assert [(layer["op"], layer.get("act")) for layer in layers[:4]] == [
            ("conv2d", "relu"), ("pool2d", None), ("conv2d", "relu"), ("pool2d", None)]
        return
    assert ops >= ({"conv2d", "add", "concat", "pool2d", "flatten", "linear"} if name == "two_d"
                   else {"conv1d", "pool1d", "linear", "batchnorm"})
    assert "groups: " in manifest.read_text()


# edgebuild models written by interchange.export (float form, not clamped: the import
# rejects the Q7 clamp, a Clip to [-1, 127/128]); batchnorm stays a BatchNormalization
EDGEBUILD_MODELS = {
    "residual": """
        input: [2, 8, 8]
        layers:
          - {name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, bias: false}
          - {name: bn1, op: batchnorm, act: relu}
          - {name: dw, op: conv2d, out: 8, groups: 8, kernel: 3, pad: 1, act: relu}
          - {name: pw, op: conv2d, out: 8, kernel: 1}
          - {name: res, op: add, inputs: [bn1, pw], act: relu}
          - {name: cat, op: concat, inputs: [res, dw]}
          - {name: pool, op: pool2d, mode: avg, size: 2}
          - {name: up, op: conv_transpose2d, out: 4}
          - {name: fc, op: linear, out: 5, flatten: true}
        """,
    "signal": """
        input: [4, 24]
        layers:
          - {name: conv1, op: conv1d, out: 6, kernel: 5, stride: 2, pad: 2}
          - {name: bn1, op: batchnorm, act: relu}
          - {name: pool, op: pool1d, mode: max, size: 3, stride: 2}
          - {name: grid, op: reshape, shape: [6, 1, 5]}
          - {name: img, op: conv2d, out: 4, kernel: [1, 3], act: abs}
          - {name: flat, op: flatten}
          - {name: fc1, op: linear, out: 8, act: relu}
          - {name: fc2, op: linear, out: 3}
        """,
}


@pytest.mark.parametrize("name", sorted(EDGEBUILD_MODELS))
def test_edgebuild_float_exports_import_and_compute_alike(tmp_path: Path, name: str):
    model = Model.model_validate(yaml.safe_load(textwrap.dedent(EDGEBUILD_MODELS[name])))
    torch.manual_seed(0)
    net = network.Net(model.input, model.layers, Mode("float", clamp=False))
    for sub in net.modules():
        if isinstance(sub, nn.BatchNorm1d | nn.BatchNorm2d):
            sub.running_mean.uniform_(-0.2, 0.2)
            sub.running_var.uniform_(0.5, 2.0)
    source = tmp_path / f"{name}.onnx"
    source.write_bytes(export.float_model(model.input, model.layers,
                                          network.state_numpy(net.eval()), clamp=False))
    manifest = imported(source, tmp_path)
    x = samples(model.input)
    assert np.abs(float_outputs(manifest, x) - onnx_outputs(source, x)).max() < 1e-5
    ops = [layer["op"] for layer in yaml.safe_load(manifest.read_text())["model"]["layers"]]
    # a linear layer's `flatten: true` comes back as a flatten layer before it
    assert [op for op in ops if op != "flatten"] == \
        [layer.op for layer in model.layers if layer.op != "flatten"]


def initializer(name: str, value: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def hand_built() -> bytes:
    """A graph as PyTorch writes one: Conv without bias + Add of a (1, C, 1, 1) bias +
    Relu; a Conv sharing that weight through an Identity, Clip(0, 6) with constant bounds;
    GlobalAveragePool; Reshape to (batch, -1) with the batch from Shape/Gather/Unsqueeze/
    Concat; MatMul + Add of a bias; Identity."""
    rng = np.random.default_rng(3)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Add", ["c", "b"], ["cb"], name="bias"),
        helper.make_node("Relu", ["cb"], ["r"], name="relu"),
        helper.make_node("Identity", ["w"], ["w2"], name="shared"),
        helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Constant", [], ["lo"], value=initializer("lo", np.array(0.0))),
        helper.make_node("Clip", ["c2", "lo", "six"], ["r6"], name="relu6"),
        helper.make_node("GlobalAveragePool", ["r6"], ["g"], name="gap"),
        helper.make_node("Shape", ["g"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="batch"),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0, name="target"),
        helper.make_node("Reshape", ["g", "target"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "m"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "mb"], ["logits"], name="matmul_bias"),
        helper.make_node("Identity", ["logits"], ["y"], name="out"),
    ]
    inits = [initializer("w", rng.normal(0, 0.3, (4, 4, 3, 3))),
             initializer("b", rng.normal(0, 0.1, (1, 4, 1, 1))),
             initializer("six", np.array(6.0)),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             initializer("m", rng.normal(0, 0.5, (4, 3))),
             initializer("mb", rng.normal(0, 0.1, (3,)))]
    graph = helper.make_graph(nodes, "hand", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 4, 6, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["N", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def test_hand_built_pytorch_patterns(tmp_path: Path):
    source = tmp_path / "hand.onnx"
    source.write_bytes(hand_built())
    manifest = imported(source, tmp_path)
    layers = yaml.safe_load(manifest.read_text())["model"]["layers"]
    assert [(layer["op"], layer.get("act", "none"), layer.get("bias", True)) for layer in layers] \
        == [("conv2d", "relu", True), ("conv2d", "relu", False), ("pool2d", "none", True),
            ("flatten", "none", True), ("linear", "none", True)]
    assert layers[-1]["wide"] is True
    x = samples((4, 6, 6))  # small activations: ReLU6's upper clip never acts
    assert np.abs(float_outputs(manifest, x) - onnx_outputs(source, x)).max() < 1e-5


def unsupported_model() -> bytes:
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Sigmoid", ["c"], ["s"], name="gate"),
             helper.make_node("Mul", ["c", "s"], ["m"], name="swish"),
             helper.make_node("Transpose", ["m"], ["t"], perm=[0, 1, 3, 2], name="turn"),
             helper.make_node("Pad", ["t", "pads"], ["p"], name="pad"),
             helper.make_node("MaxPool", ["p"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                              name="padded_pool")]
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)],
        [initializer("w", np.ones((2, 1, 3, 3))),
         numpy_helper.from_array(np.zeros(8, np.int64), "pads")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_unsupported_operators_are_listed_at_once(tmp_path: Path):
    source = tmp_path / "bad.onnx"
    source.write_bytes(unsupported_model())
    result = run_cli(["import-onnx", str(source)], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    for node in ("Sigmoid gate", "Mul swish", "Transpose turn", "Pad pad"):
        assert f"node '{node}': operator {node.split()[0]} is not supported" in result.stderr
    assert "node 'Conv conv'" not in result.stderr  # Conv imports; the pool after the
    assert "padded_pool" not in result.stderr  # unsupported ones is not judged
    assert not list(tmp_path.glob("*.yaml"))  # nothing written


def test_a_rejected_node_says_why(tmp_path: Path):
    """A supported operator used in a way edgebuild has no layer for."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                              name="padded")]
    graph = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 1, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    source = tmp_path / "pool.onnx"
    source.write_bytes(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    result = run_cli(["import-onnx", str(source)], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "node 'MaxPool padded': edgebuild pools without padding" in result.stderr


def test_epochs_zero_needs_init(tmp_path: Path):
    npz_data(tmp_path / "data.npz")
    (tmp_path / "edgebuild.yaml").write_text(textwrap.dedent("""\
        name: tiny
        dataset: {format: npz, path: data.npz}
        model:
          input: [1, 4, 4]
          layers:
            - {name: fc, op: linear, out: 3, flatten: true}
        train: {epochs: 0}
        """))
    result = run_cli(["check"], tmp_path)
    assert result.returncode == 2 and "train.epochs: 0 epochs train nothing" in result.stderr


def test_init_keys_the_train_stage_by_content(tmp_path: Path):
    """The float weights file keys `train` by its bytes (Stage.files), not by its path."""
    from edgebuild.pipeline.stages import STAGES

    npz_data(tmp_path / "data.npz")
    np.savez(tmp_path / "w.npz", **{"fc.weight": np.zeros((3, 16), np.float32),
                                    "fc.bias": np.zeros(3, np.float32)})
    (tmp_path / "edgebuild.yaml").write_text(textwrap.dedent("""\
        name: tiny
        dataset: {format: npz, path: data.npz}
        model:
          input: [1, 4, 4]
          layers:
            - {name: fc, op: linear, out: 3, flatten: true}
        train: {epochs: 0, init: w.npz}
        """))
    checked = validation.load(tmp_path / "edgebuild.yaml")
    assert STAGES["train"].files(checked) == [tmp_path / "w.npz"]
    config = STAGES["train"].config(checked)
    assert config["init"] is True and "init" not in config["train"]


E2E_MODEL = """
    input: [1, 4, 4]
    layers:
      - {name: conv1, op: conv2d, out: 6, kernel: 3, pad: 1, bias: false}
      - {name: bn1, op: batchnorm, act: relu}
      - {name: pool, op: pool2d, mode: max, size: 2}
      - {name: side, op: conv2d, out: 6, kernel: 1, inputs: [pool], act: relu}
      - {name: res, op: add, inputs: [pool, side]}
      - {name: cat, op: concat, inputs: [res, pool]}
      - {name: fc, op: linear, out: 3, flatten: true}
    """


@pytest.mark.slow
def test_import_then_build_with_post_training_quantization_through_the_kat(tmp_path: Path):
    """import -> build (qat: {enabled: false}) -> codegen -> kat: the C equals the integer
    reference on every test sample, and the float stage kept the imported weights."""
    model = Model.model_validate(yaml.safe_load(textwrap.dedent(E2E_MODEL)))
    torch.manual_seed(0)
    net = network.Net(model.input, model.layers, Mode("float", clamp=False)).eval()
    source = tmp_path / "small.onnx"
    source.write_bytes(export.float_model(model.input, model.layers,
                                          network.state_numpy(net), clamp=False))
    npz_data(tmp_path / "data.npz")
    manifest = imported(source, tmp_path, "--data", str(tmp_path / "data.npz"), "--name", "small")
    manifest.write_text(manifest.read_text().replace("qat: {enabled: true}",
                                                     "qat: {enabled: false}"))
    result = run_cli(["build", str(manifest), "--until", "kat"], manifest.parent)
    assert result.returncode == 0, result.stderr
    build = manifest.parent / "build" / "small"
    kat = json.loads((build / "kat" / "kat.json").read_text())
    assert kat["c_vs_reference"]["mismatches"] == 0 and kat["c_vs_reference"]["samples"] > 0
    evaluation = json.loads((build / "evaluate" / "evaluation.json").read_text())
    assert evaluation["int_vs_fakequant_mismatches"] == 0
    kept = arrays.load(build / "train" / "float.npz")
    given = arrays.load(manifest.parent / "small.float.npz")
    assert kept.keys() == given.keys()
    assert all(np.array_equal(kept[k], given[k]) for k in kept)
