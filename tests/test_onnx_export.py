"""ONNX out (issue 19, item 8; the `onnx` stage since issue 30): float.onnx, qat.onnx and int8.onnx,
run with onnxruntime against what they export — the float PyTorch network, the fake-quant
network and the integer reference — on real samples (sklearn digits) from a built 2-D and
1-D model, and on random-weight models covering every operator and rounding mode.

Expected agreement: float within float32 summation order (< 1e-5); fake-quant exactly
(every sum is an integer multiple of one unit below 2^24, exact in float32 in any order,
and the rounding is applied by Floor before QuantizeLinear); integer exactly (integer ops
only).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

onnxruntime = pytest.importorskip("onnxruntime")

from edgebuild.core import arrays, numerics  # noqa: E402
from edgebuild.interchange import export  # noqa: E402
from edgebuild.manifest import Model, Qat  # noqa: E402
from edgebuild.model import folding, policy, quantized  # noqa: E402
from edgebuild.model import graph as graphs  # noqa: E402
from edgebuild.ops import OPS  # noqa: E402
from edgebuild.ops.operator import Mode, Unsupported  # noqa: E402
from edgebuild.pipeline import validation  # noqa: E402
from edgebuild.targets import numbers  # noqa: E402
from edgebuild.train import network  # noqa: E402

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import run_cli
except ImportError:
    from conftest import run_cli

COMMON = """\
seed: 1
dataset: {format: sklearn-digits, split: {val: 0.1, test: 0.2}}
train: {epochs: 2, batch: 64}
qat: {epochs: 1}
target: {device: host, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""

# conv, batchnorm, depthwise, pointwise, residual add, concat, max and average pooling (a
# window of 9: not a power of two), dropout, a wide linear classifier
TWO_D = """\
name: two_d
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1}
    - {name: bn1, op: batchnorm, act: relu}
    - {name: dw, op: conv2d, out: 8, groups: 8, kernel: 3, pad: 1, act: relu}
    - {name: pw, op: conv2d, out: 8, kernel: 1}
    - {name: res, op: add, inputs: [bn1, pw], act: relu}
    - {name: cat, op: concat, inputs: [res, dw]}
    - {name: pool, op: pool2d, mode: max, size: 2}
    - {name: avg, op: pool2d, mode: avg, size: 3, stride: 1}
    - {name: drop, op: dropout, p: 0.1}
    - {name: fc, op: linear, out: 10, flatten: true, wide: true}
"""

# the digits as 8 channels x 8 steps: conv1d with batchnorm, a depthwise conv1d with fused
# average pooling, pool1d (window 3), linear layers; floor rounding
ONE_D = """\
name: one_d
model:
  input: [1, 8, 8]
  layers:
    - {name: rows, op: reshape, shape: [8, 8]}
    - {name: conv1, op: conv1d, out: 12, kernel: 3, pad: 1}
    - {name: bn1, op: batchnorm, act: relu}
    - {name: dw, op: conv1d, out: 12, groups: 12, kernel: 3, pad: 1, act: relu, pool: {mode: avg, size: 2}}
    - {name: avg, op: pool1d, mode: avg, size: 3, stride: 1}
    - {name: flat, op: flatten}
    - {name: fc1, op: linear, out: 16, act: relu}
    - {name: fc2, op: linear, out: 10}
quantize: {rounding: floor}
"""

MODELS = {"two_d": TWO_D, "one_d": ONE_D}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both manifests built through `onnx` (tiny epochs)."""
    root = tmp_path_factory.mktemp("onnx_export")
    (root / "manifests").mkdir()
    for name, text in MODELS.items():
        (root / "manifests" / f"{name}.yaml").write_text(text + COMMON)
    result = run_cli(["build", "--until", "onnx", "--cache-dir", str(root / "cache")], root)
    assert result.returncode == 0, result.stderr
    return root


def session(path: Path | bytes) -> onnxruntime.InferenceSession:
    source = str(path) if isinstance(path, Path) else path
    return onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])


def run(path: Path | bytes, x: np.ndarray) -> np.ndarray:
    return session(path).run(None, {"input": x})[0]


def samples(root: Path, name: str) -> np.ndarray:
    return arrays.load(root / "build" / name / "data" / "data.npz")["x_test"]


def checked(root: Path, name: str) -> validation.Checked:
    return validation.load(root / "manifests" / f"{name}.yaml")


def fake_quant_net(manifest, state) -> tuple[network.Net, dict]:
    """The QAT stage's network over the folded layers, in float32 as it trained."""
    layers, _ = folding.fold_layers(manifest.model.layers)
    policies = policy.resolve(manifest.qat, layers,
                              numbers.device_numbers(manifest.target.device.value))
    net = network.Net(manifest.model.input, layers,
                      Mode("qat", numbers.training_rounding(manifest), policy=policies))
    network.load_numpy(net, state)
    return net.eval(), policies


@pytest.mark.parametrize("name", sorted(MODELS))
def test_float_onnx_matches_the_pytorch_network(built: Path, name: str):
    manifest = checked(built, name).manifest
    net = network.Net(manifest.model.input, manifest.model.layers,
                      Mode("float", clamp=manifest.train.clamp_activations))
    network.load_numpy(net, arrays.load(built / "build" / name / "train" / "float.npz"))
    x = (samples(built, name) / 128.0).astype(np.float32)
    with torch.no_grad():
        expected = net.eval()(torch.as_tensor(x)).numpy()
    got = run(built / "build" / name / "onnx" / "float.onnx", x)
    assert got.shape == expected.shape and len(x) > 300
    assert np.abs(got - expected).max() < 1e-5


@pytest.mark.parametrize("name", sorted(MODELS))
def test_qat_onnx_equals_the_fake_quant_network(built: Path, name: str):
    manifest = checked(built, name).manifest
    net, _ = fake_quant_net(manifest, arrays.load(built / "build" / name / "qat" / "folded.npz"))
    x = (samples(built, name) / 128.0).astype(np.float32)
    with torch.no_grad():
        expected = net(torch.as_tensor(x)).numpy()
    got = run(built / "build" / name / "onnx" / "qat.onnx", x)
    assert np.array_equal(got, expected), np.abs(got - expected).max()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_onnx_equals_the_integer_reference(built: Path, name: str):
    ok = checked(built, name)
    model = quantized.load(built / "build" / name / "quantize", ok.manifest)
    x = samples(built, name)
    expected = quantized.run_batched(model, x).reshape(len(x), -1)
    got = run(built / "build" / name / "onnx" / "int8.onnx", x.astype(np.int8))
    assert got.dtype == (np.int32 if name == "two_d" else np.int8)
    assert np.array_equal(got, expected)
    assert len(np.unique(got)) > 20  # not a saturated, trivially equal output


@pytest.mark.parametrize("name", sorted(MODELS))
def test_exports_are_byte_reproducible(built: Path, name: str):
    """Exporting the stage's checkpoints again, in this process, gives the stage's bytes."""
    manifest = checked(built, name).manifest
    stage = built / "build" / name
    float_bytes = export.float_model(manifest.model.input, manifest.model.layers,
                                     arrays.load(stage / "train" / "float.npz"),
                                     manifest.train.clamp_activations)
    assert float_bytes == (stage / "onnx" / "float.onnx").read_bytes()
    state = arrays.load(stage / "qat" / "folded.npz")
    net, policies = fake_quant_net(manifest, state)
    exps = {layer: numerics.torch_scale_exponent(network.parameter(net, layer, "weight"),
                                                 p.shift_quantile, p.shift_limits)
            for layer, p in policies.items()}
    qat_bytes = export.qat_model(manifest.model.input, net.layers, state, exps, policies,
                                 numbers.training_rounding(manifest))
    assert qat_bytes == (stage / "onnx" / "qat.onnx").read_bytes()
    int8_bytes = export.int8_model(quantized.load(stage / "quantize", manifest))
    assert int8_bytes == (stage / "onnx" / "int8.onnx").read_bytes()


def test_the_files_say_what_they_are(built: Path):
    import onnx

    model = onnx.load(built / "build" / "two_d" / "onnx" / "int8.onnx")
    assert model.producer_name == "edgebuild" and model.opset_import[0].version >= 17
    assert {p.key: p.value for p in model.metadata_props} == {
        "edgebuild.form": "int8", "edgebuild.rounding": "half_up"}
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8
    kinds = {node.op_type for node in model.graph.node}
    assert {"ConvInteger", "MatMulInteger"} <= kinds and "Conv" not in kinds
    qat = onnx.load(built / "build" / "two_d" / "onnx" / "qat.onnx")
    assert {"QuantizeLinear", "DequantizeLinear"} <= {node.op_type for node in qat.graph.node}


def test_a_no_op_build_does_not_import_onnx(built: Path):
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "edgebuild", "build",
                             "--cache-dir", str(built / "cache"), "--until", "onnx"],
                            cwd=built, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    imported = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert not {m for m in imported if m.partition(".")[0] in ("onnx", "onnxruntime")}


# --- every operator, every form, random weights --------------------------------------------

# Every op's example (ops/operator.py: Example), and these models of options the examples
# leave out: conv_transpose2d (groups, strides, dilation, output_pad, crop), abs
# activation, a buffer (clips), reshape, passthrough, wide conv1d, fused max pooling
VARIANTS = {
    "transposed": """
        input: [4, 5, 6]
        layers:
          - {name: up, op: conv_transpose2d, out: 6, groups: 2, kernel: [3, 2], stride: [3, 2], pad: [0, 1], output_pad: [2, 0], dilation: [1, 2]}
          - {name: up2, op: conv_transpose2d, out: 4, kernel: 1, stride: 1, pad: 0, output_pad: 0, act: abs, pool: {mode: avg, size: 2}}
          - {name: same, op: passthrough}
          - {name: fc, op: linear, out: 3, flatten: true}
        """,
    "stream": """
        input: [2, 6]
        layers:
          - {name: frame, op: conv1d, out: 4, kernel: 6}
          - {name: bn, op: batchnorm, act: relu}
          - {name: buf, op: buffer, length: 5}
          - {name: t, op: conv1d, out: 3, kernel: 5, wide: true}
        """,
    "image": """
        input: [12, 16]
        layers:
          - {name: img, op: reshape, shape: [3, 4, 16]}
          - {name: c, op: conv2d, out: 6, kernel: [3, 5], stride: [1, 2], pad: [1, 2], pool: {mode: max, size: [1, 2]}}
          - {name: bn, op: batchnorm, act: abs}
          - {name: gap, op: pool2d, mode: avg, size: [4, 2]}
          - {name: out, op: conv2d, out: 5, kernel: 1, wide: true}
        """,
    # global pooling of a 1-D map of 106 steps and of a 7x9 image, average and maximum
    "global_1d": """
        input: [3, 106]
        layers:
          - {name: c, op: conv1d, out: 8, kernel: 3, pad: 1, act: relu}
          - {name: gap, op: global_pool, mode: avg}
          - {name: gmp, op: global_pool, mode: max, inputs: [c]}
          - {name: cat, op: concat, inputs: [gap, gmp]}
          - {name: fc, op: linear, out: 5, flatten: true, wide: true}
        """,
    "global_2d": """
        input: [2, 7, 9]
        layers:
          - {name: c, op: conv2d, out: 6, kernel: 3, pad: 1}
          - {name: gap, op: global_pool, mode: avg}
          - {name: gmp, op: global_pool, mode: max, inputs: [c]}
          - {name: cat, op: concat, inputs: [gap, gmp]}
          - {name: fc, op: linear, out: 5, flatten: true, wide: true}
        """,
}


RANDOM_NETS: dict[str, dict] = {
    **{f"example_{name}": op.example.model() for name, op in OPS.items()},
    **{name: yaml.safe_load(textwrap.dedent(text)) for name, text in VARIANTS.items()},
}


def random_net(fields: dict) -> tuple[Model, network.Net]:
    model = Model.model_validate(fields)
    torch.manual_seed(0)
    net = network.Net(model.input, model.layers, Mode("float"))
    for module in net.modules():  # statistics a trained batchnorm would have
        if isinstance(module, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    return model, net.eval()


@pytest.mark.parametrize("name", sorted(RANDOM_NETS))
@pytest.mark.parametrize("rounding", ["half_up", "floor", "half_up/trunc"])
def test_every_form_of_every_op(name: str, rounding: str, tmp_path: Path):
    model, net = random_net(RANDOM_NETS[name])
    unsupported = [(layer, OPS[layer.op].onnx) for layer in model.layers
                   if isinstance(OPS[layer.op].onnx, Unsupported)]
    if unsupported:  # no form to compare: the export refuses the model with the op's reason
        lines: list[str] = []
        export.write(tmp_path, "float.onnx", lambda: export.float_model(
            model.input, model.layers, network.state_numpy(net), True), lines.append)
        layer, facet = unsupported[0]
        assert not (tmp_path / "float.onnx").exists()
        assert lines == [f"no float.onnx: layer '{layer.name}' ({layer.op}): {facet.reason}"]
        return
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (64, *graphs.sample_shape(model.input, model.layers)))
    state = network.state_numpy(net)
    with torch.no_grad():
        expected = net(torch.as_tensor(x / 128.0, dtype=torch.float32)).numpy()
    got = run(export.float_model(model.input, model.layers, state, True),
              (x / 128.0).astype(np.float32))
    assert np.abs(got - expected).max() < 1e-5

    layers, _ = folding.fold_layers(model.layers)
    folded = folding.fold_state(state, model.layers)
    policies = policy.resolve(Qat(weight_bits=4), layers)
    fake = network.Net(model.input, layers, Mode("qat", rounding, policy=policies))
    network.load_numpy(fake, folded)
    exps = {layer: numerics.torch_scale_exponent(network.parameter(fake, layer, "weight"),
                                                 p.shift_quantile, p.shift_limits)
            for layer, p in policies.items()}
    with torch.no_grad():
        expected = fake.eval()(torch.as_tensor(x / 128.0, dtype=torch.float32)).numpy()
    got = run(export.qat_model(model.input, layers, folded, exps, policies, rounding),
              (x / 128.0).astype(np.float32))
    assert np.array_equal(got, expected)

    integer = quantized.QuantizedModel(tuple(model.input), layers,
                                       export.fake_quant_params(folded, exps, policies), rounding)
    expected = quantized.run_reference(integer, x).reshape(len(x), -1)
    got = run(export.int8_model(integer), x.astype(np.int8))
    assert np.array_equal(got, expected)
    assert len(np.unique(got)) > 10


def test_an_op_without_export_skips_the_file_with_its_reason(monkeypatch, tmp_path: Path):
    import dataclasses

    model, net = random_net(RANDOM_NETS["image"])
    reason = "a reason long enough for the registry's test of reasons"
    monkeypatch.setitem(OPS, "pool2d", dataclasses.replace(OPS["pool2d"],
                                                           onnx=Unsupported(reason)))
    lines: list[str] = []
    export.write(tmp_path, "float.onnx", lambda: export.float_model(
        model.input, model.layers, network.state_numpy(net), True), lines.append)
    assert not (tmp_path / "float.onnx").exists()
    assert lines == [f"no float.onnx: layer 'gap' (pool2d): {reason}"]
