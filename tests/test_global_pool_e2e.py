"""global_pool end to end (issue 29, item 6): manifests whose classifier heads average and
max-pool a 1x106 series and a 7x9 image — sizes the old pool cap (64) and a hand-computed
window made awkward — built by `edgebuild build` in a temporary project (npz data written
here, a few epochs): the `kat` stage runs the C on every test sample on the host and on the
Cortex-M4 under QEMU against the integer reference, the int8 ONNX form equals the reference
layer by layer, on-device training steps through the pooling's gradient as PyTorch does,
and a MAX78000 build runs the 7x9 average on the accelerator's pooling (network description
and program). About 60 s."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import build_json

from edgebuild.core import arrays
from edgebuild.model import folding, policy, quantized
from edgebuild.ops.operator import Mode
from edgebuild.pipeline import validation
from edgebuild.targets import numbers
from edgebuild.train import network

pytestmark = pytest.mark.slow
onnxruntime = pytest.importorskip("onnxruntime")

COMMON = """\
train: {epochs: 15, batch: 16, optimizer: {adam: {lr: 0.01}}}
qat: {epochs: 2}
"""
HEAD = """\
    - {name: gap, op: global_pool, mode: avg}
    - {name: gmp, op: global_pool, mode: max, inputs: [c]}
    - {name: cat, op: concat, inputs: [gap, gmp]}
    - {name: fc, op: linear, out: 3, flatten: true, wide: true}
"""
MANIFESTS = {
    "gseries": """\
name: gseries
seed: 1
dataset: {format: npz, path: series.npz}
model:
  input: [2, 106]
  layers:
    - {name: c, op: conv1d, out: 8, kernel: 3, pad: 1, act: relu}
""" + HEAD + COMMON + """\
target: {device: cortex-m4}
ondevice: {trainable: [c, fc], batch: 4, steps: 3, epochs: 1}
""",
    "gimage": """\
name: gimage
seed: 1
dataset: {format: npz, path: image.npz}
model:
  input: [1, 7, 9]
  layers:
    - {name: c, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}
""" + HEAD + COMMON + """\
target: {device: cortex-m4}
""",
    "gaccel": """\
name: gaccel
seed: 1
dataset: {format: npz, path: image.npz}
model:
  input: [1, 7, 9]
  layers:
    - {name: c, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}
    - {name: gap, op: global_pool, mode: avg}
    - {name: fc, op: linear, out: 3, flatten: true, wide: true}
""" + COMMON + """\
target: {device: max78000}
""",
}
POOLS = {"gseries": ("gap", "gmp"), "gimage": ("gap", "gmp"), "gaccel": ("gap",)}


def write_data(directory: Path) -> None:
    """3 classes: sinusoids of 2, 6 and 10 cycles and rising amplitude over 2 x 106 steps;
    images brighter in the top rows, the left columns, or the bottom right corner."""
    rng = np.random.default_rng(0)
    n, y = 240, np.arange(240) % 3
    t = np.linspace(0, 1, 106)
    x = np.sin(2 * np.pi * (2 + 4 * y)[:, None, None] * t + rng.uniform(0, 6, (n, 2, 1)))
    x = x * (1 + y[:, None, None]) * 0.5 + 0.2 * rng.normal(size=(n, 2, 106))
    np.savez(directory / "series.npz", x=x.astype(np.float32), y=y)
    img = rng.normal(size=(n, 1, 7, 9)) * 0.5
    img[y == 0, :, :3, :] += 1.5
    img[y == 1, :, :, :3] += 1.5
    img[y == 2, :, 3:, 5:] += 1.5
    np.savez(directory / "image.npz", x=img.astype(np.float32), y=y)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("global_pool")
    (root / "manifests").mkdir()
    write_data(root / "manifests")
    for name, text in MANIFESTS.items():
        (root / "manifests" / f"{name}.yaml").write_text(text)
    result = build_json(root, "--cache-dir", str(root / "cache"))
    for name in MANIFESTS:
        statuses = {stage["status"] for stage in result[name].values()}
        assert statuses <= {"built", "restored"}, result[name]  # gaccel shares gimage's data
    return root


def read(project: Path, name: str, *parts: str) -> dict:
    return json.loads((project / "build" / name).joinpath(*parts).read_text())


def test_every_c_output_equals_the_reference_on_host_and_cortex_m4(project):
    for name in MANIFESTS:
        kat = read(project, name, "kat", "kat.json")
        data = arrays.load(project / "build" / name / "data" / "data.npz")
        assert kat["c_vs_reference"]["mismatches"] == 0
        assert kat["c_vs_reference"]["samples"] == len(data["x_test"]) > 40  # every sample
        m4 = kat["cortex_m4"]
        assert m4["kat"] == "pass" and m4["kernels"] == "optimized"
        layers = {layer["layer"]: layer for layer in m4["layers"]}
        for pool in POOLS[name]:
            assert layers[pool]["op"] == "global_pool"
            # the word-wide kernel beats the byte-by-byte reference kernel
            assert 0 < layers[pool]["instructions"] < layers[pool]["reference_instructions"]
        report = read(project, name, "report.json")["metrics"]
        assert report["int_vs_fakequant_mismatches"] == 0


def test_the_c_project_runs_the_global_pool_kernel(project):
    cnn = (project / "build" / "gseries" / "codegen" / "model" / "cnn.c").read_text()
    assert "EB_GLOBAL_POOL(&Q_gap, T_c, T_gap);" in cnn
    assert ".n = 106" in cnn and "EB_POOL_MAX" in cnn
    assert (project / "build" / "gseries" / "codegen" / "model" / "eb_global_pool.c").is_file()


def run_onnx(path: Path, x: np.ndarray, extra: tuple[str, ...] = ()) -> list[np.ndarray]:
    """The model's output, and the tensors `extra` names (layer outputs) made outputs too."""
    import onnx

    model = onnx.load(path)
    for name in extra:
        model.graph.output.append(onnx.ValueInfoProto(name=name))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, {"input": x})


@pytest.mark.parametrize("name", ["gseries", "gimage"])
def test_the_int8_onnx_equals_the_reference_layer_by_layer(project, name):
    build = project / "build" / name
    manifest = validation.load(project / "manifests" / f"{name}.yaml").manifest
    model = quantized.load(build / "quantize", manifest)
    x = arrays.load(build / "data" / "data.npz")["x_test"]
    values = quantized.run_reference(model, x, keep_all=True)
    got = run_onnx(build / "onnx" / "int8.onnx", x.astype(np.int8), POOLS[name])
    assert np.array_equal(got[0], values["fc"])
    for pool, tensor in zip(POOLS[name], got[1:], strict=True):
        assert tensor.dtype == np.int8 and np.array_equal(tensor, values[pool]), pool
        assert len(np.unique(tensor)) > 10  # not a trivially equal, saturated map


@pytest.mark.parametrize("name", ["gseries", "gimage"])
def test_the_float_and_fake_quant_onnx_equal_their_networks(project, name):
    build = project / "build" / name
    manifest = validation.load(project / "manifests" / f"{name}.yaml").manifest
    x = (arrays.load(build / "data" / "data.npz")["x_test"] / 128.0).astype(np.float32)
    net = network.Net(manifest.model.input, manifest.model.layers,
                      Mode("float", clamp=manifest.train.clamp_activations))
    network.load_numpy(net, arrays.load(build / "train" / "float.npz"))
    with torch.no_grad():
        expected = net.eval()(torch.as_tensor(x)).numpy()
    assert np.abs(run_onnx(build / "onnx" / "float.onnx", x)[0] - expected).max() < 1e-5
    layers, _ = folding.fold_layers(manifest.model.layers)
    policies = policy.resolve(manifest.qat, layers,
                              numbers.device_numbers(manifest.target.device.value))
    fake = network.Net(manifest.model.input, layers,
                       Mode("qat", numbers.training_rounding(manifest), policy=policies))
    network.load_numpy(fake, arrays.load(build / "qat" / "folded.npz"))
    with torch.no_grad():
        expected = fake.eval()(torch.as_tensor(x)).numpy()
    assert np.array_equal(run_onnx(build / "onnx" / "qat.onnx", x)[0], expected)


def test_on_device_training_steps_through_the_global_pools_as_pytorch(project):
    kat = read(project, "gseries", "ondevice_kat", "ondevice_kat.json")
    assert kat["steps"] == 3 and kat["within_tolerance"] is True
    assert kat["grad_max_rel_diff"] < 1e-4 and kat["weight_max_abs_diff"] < 1e-5


def test_max78000_pools_the_7x9_map_in_its_pooling_hardware(project):
    build = project / "build" / "gaccel"
    description = yaml.safe_load((build / "ai8x" / "network.yaml").read_text())
    gap = next(layer for layer in description["layers"] if layer["name"] == "gap")
    # one window over the map; a square stride (the device's rule) that moves it nowhere
    assert gap["op"] == "none" and gap["avg_pool"] == [7, 9] and gap["pool_stride"] == 9
    accelerator = read(project, "gaccel", "accelerator", "accelerator.json")
    assert accelerator["layers"] == 3 and accelerator["unsupported"] is None
    assert (build / "max7800x" / "cnn.c").is_file()
