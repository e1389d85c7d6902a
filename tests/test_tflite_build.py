"""`edgebuild import-tflite` and the build of a model in TFLite's number format (issue 31):
int8 models the tests write (tests/tflite_models.py: random shapes, kernels, strides, zero
points, residual ADDs) imported with LiteRT's outputs as the known answer, then built for
the Cortex-M4: the generated C (host, and the dual-MAC kernels under QEMU) gives LiteRT's
integers on every sample, and the report says so. The MLPerf Tiny models build as the
examples (manifests/mlperf_*.yaml, tests/test_examples.py).

Refusals: unsupported operators (all named, exit 2, nothing written), TFLite's format on an
accelerator, softmax and asymmetric padding in edgebuild's own format.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tflite_models
from conftest import run_cli

pytestmark = pytest.mark.slow


def written(tmp_path: Path, seed: int) -> Path:
    graph = tflite_models.random_chain(np.random.default_rng(seed))
    return tflite_models.write_file(graph, tmp_path / f"chain{seed}.tflite")


@pytest.mark.parametrize("seed", [2, 4, 10])
def test_an_imported_model_builds_bit_exact_on_host_and_cortex_m4(tmp_path, seed):
    pytest.importorskip("ai_edge_litert.interpreter")
    model = written(tmp_path, seed)
    imported = run_cli(["import-tflite", str(model), "--name", "chain", "--device",
                        "cortex-m4"], tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "LiteRT's reference kernels" in imported.stderr
    built = run_cli(["build", "chain.yaml"], tmp_path)
    assert built.returncode == 0, built.stderr
    report = json.loads((tmp_path / "build" / "chain" / "report.json").read_text())
    metrics = report["metrics"]
    # the C against the known answer the import took from LiteRT, every sample
    assert metrics["c_vs_reference"] == {"samples": 8, "mismatches": 0}
    assert metrics["cortex_m4"]["kat"] == "pass"
    assert metrics["int_vs_fakequant_mismatches"] is None  # no fake-quant network here


def pruned_pointwise(tmp_path: Path) -> Path:
    """Two 1x1 convolutions whose first has all-zero weight rows (TensorFlow's converter
    keeps pruned and dead channels so; MLPerf VWW has hundreds): two with a bias near 2^30,
    as VWW's, three with small ones; 15 live channels of 20 (an odd number) on a 5x7 map
    (a last partial block of pixels)."""
    net = tflite_models._Net(np.random.default_rng(31), [(1, 5, 7, 24)])
    x = net.conv("input", 20, (1, 1), (1, 1), "VALID", (1, 1), "RELU")
    x = net.conv(x, 10, (1, 1), (1, 1), "VALID", (1, 1), "NONE")
    graph = net.graph([x], False)
    weights, bias = (graph.tensor(name) for name in graph.ops[0].inputs[1:3])
    w, b = np.array(weights.data), np.array(bias.data)
    w[[1, 2, 5, 11, 17]] = 0
    b[[1, 2]] = (1 << 30) + np.array([12345, -6789])
    changed = {weights.name: w, bias.name: b}
    tensors = tuple(replace(t, data=changed[t.name]) if t.name in changed else t
                    for t in graph.tensors)
    return tflite_models.write_file(replace(graph, tensors=tensors), tmp_path / "pruned.tflite")


def test_pruned_channels_build_bit_exact_on_host_and_cortex_m4(tmp_path):
    """The optimized 1x1 convolution skips all-zero weight rows (their constant written
    once): LiteRT's outputs on every sample, host and Cortex-M4."""
    pytest.importorskip("ai_edge_litert.interpreter")
    model = pruned_pointwise(tmp_path)
    imported = run_cli(["import-tflite", str(model), "--name", "pruned", "--device",
                        "cortex-m4"], tmp_path)
    assert imported.returncode == 0, imported.stderr
    built = run_cli(["build", "pruned.yaml"], tmp_path)
    assert built.returncode == 0, built.stderr
    metrics = json.loads((tmp_path / "build" / "pruned" / "report.json").read_text())["metrics"]
    assert metrics["c_vs_reference"] == {"samples": 8, "mismatches": 0}
    assert metrics["cortex_m4"]["kat"] == "pass"


@pytest.mark.parametrize(("generator", "seed"), [("random_pool", 10), ("random_chain", 7)])
def test_same_padded_pooling_builds_bit_exact(tmp_path, generator, seed):
    """Pooling whose SAME padding pads the input (an average 3x3 stride (2, 1), a max 3x3
    stride 1): windows count the input's values only, as TFLite's; host and Cortex-M4."""
    pytest.importorskip("ai_edge_litert.interpreter")
    graph = getattr(tflite_models, generator)(np.random.default_rng(seed))
    model = tflite_models.write_file(graph, tmp_path / "padded.tflite")
    imported = run_cli(["import-tflite", str(model), "--name", "padded", "--device",
                        "cortex-m4"], tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "pad: 1" in (tmp_path / "padded.yaml").read_text()
    built = run_cli(["build", "padded.yaml"], tmp_path)
    assert built.returncode == 0, built.stderr
    metrics = json.loads((tmp_path / "build" / "padded" / "report.json").read_text())["metrics"]
    assert metrics["c_vs_reference"] == {"samples": 8, "mismatches": 0}
    assert metrics["cortex_m4"]["kat"] == "pass"


def test_padded_pooling_is_refused_in_edgebuild_s_own_format(tmp_path):
    (tmp_path / "m.yaml").write_text(
        "name: m\ndataset: {format: sklearn-digits}\nmodel:\n  input: [1, 8, 8]\n"
        "  layers:\n    - {name: p, op: pool2d, mode: avg, size: 3, stride: 2, pad: 1}\n"
        "    - {name: f, op: flatten}\n    - {name: o, op: linear, out: 10}\n")
    result = run_cli(["check", "m.yaml"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "m.yaml:6:" in result.stderr and "model.layers[0].pad:" in result.stderr
    assert "only in TFLite's number format" in result.stderr


def test_the_known_answer_is_litert_s(tmp_path):
    """The expected outputs the import writes are LiteRT's for the samples it writes."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from edgebuild.tflite import translation

    model = written(tmp_path, 2)
    assert run_cli(["import-tflite", str(model), "--name", "m"], tmp_path).returncode == 0
    x = np.load(tmp_path / "m" / "input.npy")
    expected = np.load(tmp_path / "m" / "expected.npy")
    graph = tflite_models.random_chain(np.random.default_rng(2))
    nhwc = translation.to_nhwc(x.astype(np.int8))
    litert = tflite_models.run_litert(tflite_models.write(graph), [nhwc])[0]
    assert np.array_equal(litert.reshape(len(x), -1), expected)
    assert len(x) == 8 and x.min() == -128 and x.max() == 127  # the ramp covers the range


def test_import_is_deterministic_and_never_overwrites(tmp_path):
    model = written(tmp_path, 4)
    assert run_cli(["import-tflite", str(model), "-o", "a"], tmp_path).returncode == 0
    assert run_cli(["import-tflite", str(model), "-o", "b"], tmp_path).returncode == 0
    for name in ("chain4.yaml", "chain4/weights.npz", "chain4/input.npy", "chain4/expected.npy"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    (tmp_path / "a" / "chain4.yaml").write_text("name: mine\n")
    again = run_cli(["import-tflite", str(model), "-o", "a"], tmp_path)
    assert again.returncode == 2 and "not overwritten" in again.stderr
    assert (tmp_path / "a" / "chain4.yaml").read_text() == "name: mine\n"


def test_unsupported_operators_are_all_named_and_nothing_is_written(tmp_path):
    rng = np.random.default_rng(0)
    graph = tflite_models.random_unsupported(rng, "TANH")
    graph2 = tflite_models.random_unsupported(rng, "LOGISTIC")
    model = tflite_models.write_file(graph, tmp_path / "tanh.tflite")
    result = run_cli(["import-tflite", str(model), "-o", "out"], tmp_path)
    assert result.returncode == 2
    assert "(TANH)" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    other = tflite_models.write_file(graph2, tmp_path / "logistic.tflite")
    second = run_cli(["import-tflite", str(other)], tmp_path)
    assert second.returncode == 2 and "(LOGISTIC)" in second.stderr


def test_a_file_that_is_no_model_is_one_error(tmp_path):
    (tmp_path / "x.tflite").write_bytes(b"not a model at all")
    result = run_cli(["import-tflite", "x.tflite"], tmp_path)
    assert result.returncode == 2 and "not a TFLite model" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_refuses_what_the_formats_cannot_compute(tmp_path):
    model = written(tmp_path, 4)
    assert run_cli(["import-tflite", str(model), "--name", "m"], tmp_path).returncode == 0
    text = (tmp_path / "m.yaml").read_text()
    (tmp_path / "m.yaml").write_text(text.replace("device: host", "device: max78000"))
    result = run_cli(["check", "m.yaml"], tmp_path)
    assert result.returncode == 2 and "not tflite's" in result.stderr, result.stderr
    # edgebuild's own format has no softmax and no asymmetric padding
    own = tmp_path / "own.yaml"
    own.write_text("""name: own
model:
  input: [1, 8, 8]
  layers:
    - {name: c, op: conv2d, out: 2, kernel: 3, pad: 0, pad_end: 1}
    - {name: f, op: linear, out: 3, flatten: true}
    - {name: p, op: softmax}
dataset: {format: sklearn-digits}
""")
    result = run_cli(["check", "own.yaml"], tmp_path)
    assert result.returncode == 2
    assert "softmax has an integer form only in TFLite's number format" in result.stderr
    assert "asymmetric padding" in result.stderr


def test_a_model_with_float_input_and_output_builds(tmp_path):
    """QUANTIZE on the input and DEQUANTIZE on the output: the manifest takes the int8
    tensors between them; the known answer's floats are brought onto their int8 grids."""
    pytest.importorskip("ai_edge_litert.interpreter")
    graph = tflite_models.random_conv(np.random.default_rng(3), float_io=True)
    model = tflite_models.write_file(graph, tmp_path / "f.tflite")
    imported = run_cli(["import-tflite", str(model), "--name", "f"], tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "float32, quantized first" in (tmp_path / "f.yaml").read_text()
    built = run_cli(["build", "f.yaml"], tmp_path)
    assert built.returncode == 0, built.stderr
    metrics = json.loads((tmp_path / "build" / "f" / "report.json").read_text())["metrics"]
    assert metrics["c_vs_reference"]["mismatches"] == 0
