"""Interop with the vendor's toolchain both ways: the quantized checkpoint edgebuild exports
beside ai8x/network.yaml is what ai8xize.py's loader reads, and `import-ai8x` reads
checkpoints as leniently as that loader (the first N weight layers) and takes the input shape
from the dataset a description names.

izer's loader (izer/checkpoint.py) is not run here (no vendor code in CI): the tests read the
file with torch alone and apply the loader's documented arithmetic to it.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch

from edgebuild.core import arrays
from edgebuild.core import document as yamlsource
from edgebuild.manifest import reading
from edgebuild.targets.max7800x import network
from edgebuild.targets.max7800x.network.quantized import _raw_bias

DATA = Path(__file__).resolve().parent / "data" / "ai8x"
MODEL = DATA / "mnist-extrasmall"
CHECKPOINT = MODEL / "checkpoint-q.pth.tar"


def _imported(tmp_path: Path, checkpoint: Path = CHECKPOINT, name: str = "m"):
    return network.import_network(MODEL / "network.yaml", checkpoint=checkpoint,
                                  sample=MODEL / "input.npy",
                                  expected=MODEL / "expected_output.npy",
                                  out_dir=tmp_path, name=name)


def _export(tmp_path: Path) -> tuple[str, bytes, dict]:
    """The imported model's description and checkpoint as `edgebuild build` exports them."""
    try:  # the placement.json form of an import
        from tests.test_ai8x import placement_of
    except ImportError:  # tests/ as plain rootdir modules
        from test_ai8x import placement_of  # type: ignore[no-redef]

    result = _imported(tmp_path / "a")
    manifest = reading.parse(yamlsource.load(result.manifest))
    weights = arrays.load(result.weights)
    quant = {"layers": [{"name": n, "bits": int(weights[f"{n}.bits"]),
                         "scale_exp": int(weights[f"{n}.scale_exp"])}
                        for n in ("conv1", "conv2", "conv3", "fc")]}
    placement = placement_of(result, manifest)
    text = network.export_network(manifest, placement, quant=quant)
    data = network.export_checkpoint(manifest.name, placement, weights, quant)
    return text, data, weights


def _izer_view(data: bytes) -> dict:
    """What izer's checkpoint loader takes from a file, by its rules: `arch`, `epoch` and
    `state_dict` required; weight keys `<layer>.<op>.weight` in file order; bias = floor(raw
    / 2**(weight_bits - 1)); `output_shift` one value."""
    checkpoint = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    assert {"arch", "epoch", "state_dict"} <= set(checkpoint)
    state = checkpoint["state_dict"]
    layers = []
    for key, tensor in state.items():
        layer, op, parameter = key.rsplit(".", 2) if key.count(".") >= 2 else (None, None, None)
        if parameter != "weight":
            continue
        bits = int(state[f"{layer}.weight_bits"].numpy().astype(np.int64)[0])
        bias = state.get(f"{layer}.{op}.bias")
        shift = state[f"{layer}.output_shift"].numpy().astype(np.int64)
        assert shift.shape == (1,)
        layers.append({
            "layer": layer, "weight": tensor.numpy().astype(np.int64), "bits": bits,
            "shift": int(shift[0]),
            "bias": None if bias is None else np.floor((bias / 2 ** (bits - 1)).numpy())
            .astype(np.int64)})
    return {"arch": checkpoint["arch"], "layers": layers}


def test_exported_checkpoint_is_what_the_toolchains_loader_reads(tmp_path):
    text, data, weights = _export(tmp_path)
    view = _izer_view(data)
    assert f"arch: {view['arch']}\n" in text  # the loader compares the two (case-insensitive)
    assert not view["arch"].startswith("edgebuild_")
    assert [layer["layer"] for layer in view["layers"]] == ["conv1", "conv2", "conv3", "fc"]
    vendor = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)["state_dict"]
    for layer in view["layers"]:
        name = layer["layer"]
        assert np.array_equal(layer["weight"], vendor[f"{name}.op.weight"].numpy())
        assert layer["bits"] == 8
        assert layer["shift"] == int(vendor[f"{name}.output_shift"][0])
        if f"{name}.bias" in weights:
            assert np.array_equal(layer["bias"] * 128, weights[f"{name}.bias"])
        else:
            assert layer["bias"] is None
    assert np.array_equal(view["layers"][3]["bias"],
                          np.floor(vendor["fc.op.bias"].numpy() / 128).astype(np.int64))


def test_exported_pair_reimports_to_the_same_weights(tmp_path):
    text, data, _ = _export(tmp_path)
    (tmp_path / "network.yaml").write_text(text)
    (tmp_path / network.CHECKPOINT_FILE).write_bytes(data)
    first = _imported(tmp_path / "c")
    again = network.import_network(tmp_path / "network.yaml",
                                   checkpoint=tmp_path / network.CHECKPOINT_FILE,
                                   sample=MODEL / "input.npy",
                                   expected=MODEL / "expected_output.npy",
                                   input_shape=(1, 28, 28), out_dir=tmp_path / "b", name="m")
    assert again.kat_matches is True
    assert again.weights.read_bytes() == first.weights.read_bytes()
    assert not [w for w in again.warnings if "arch" in w]  # the pair agrees on its arch


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_raw_bias_is_what_the_loader_floors_back(bits):
    b8 = np.arange(-128, 128)
    raw = _raw_bias("l", b8 * 128, bits)
    assert np.array_equal(np.floor(raw / 2 ** (bits - 1)).astype(np.int64), b8)


def test_checkpoint_with_a_stale_copy_of_its_layers_imports_as_the_toolchain_reads_it(tmp_path):
    """As in the vendor's kws20_v3: an old `module.`-prefixed copy of the layers, without
    bias, after the current ones. The first four weight tensors are bound; the rest named."""
    checkpoint = torch.load(CHECKPOINT, map_location="cpu", weights_only=False)
    state = dict(checkpoint["state_dict"])
    for name in ("conv1", "conv2", "conv3", "fc"):
        state[f"module.{name}.op.weight"] = state[f"{name}.op.weight"] * 0 + 1
    checkpoint["state_dict"] = state
    stale = tmp_path / "stale.pth.tar"
    torch.save(checkpoint, stale)
    plain = _imported(tmp_path / "plain")
    result = _imported(tmp_path / "stale", stale)
    assert result.kat_matches is True
    assert result.weights.read_bytes() == plain.weights.read_bytes()
    warning = next(w for w in result.warnings if "ignored" in w)
    assert "checkpoint's first 4 weight tensors are used and 4 after them ignored: " \
           "module.conv1.op.weight, module.conv2.op.weight, module.conv3.op.weight, " \
           "module.fc.op.weight" in warning


@pytest.mark.parametrize(("name", "shape"), [("faceid.yaml", [3, 160, 120]),
                                             ("cifar100-simple.yaml", [3, 32, 32])])
def test_input_shape_from_the_dataset_the_toolchains_sample_implies(tmp_path, name, shape):
    result = network.import_network(DATA / "networks" / name, out_dir=tmp_path)
    manifest = reading.parse(yamlsource.load(result.manifest))
    assert list(manifest.model.input) == shape
    assert any(f"input shape {shape} from the dataset" in w for w in result.warnings)
