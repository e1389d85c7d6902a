"""An imported model keeps its input contract (issue 29, item 2).

A PyTorch model trained on inputs in [0, 1], exported to ONNX and imported with its data:
the data stage re-mapped the inputs onto [-1, 1] (the default minmax), the imported
weights saw 2x-1 and scored chance without a word. `import-onnx` now writes `normalize:
{method: none}`, so the float network sees what PyTorch saw, and a float model near chance
is a warning that names the input contract.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from conftest import run_cli

pytest.importorskip("onnx")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.onnx.export

nn = torch.nn


def _data(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Three classes of 8x8 images in [0, 1] (multiples of 1/128, which int8 holds
    exactly): class k is brighter in band k."""
    y = rng.integers(0, 3, count)
    x = rng.integers(0, 40, size=(count, 1, 8, 8)).astype(np.float32)
    for k in range(3):
        x[y == k, :, :, 2 * k:2 * k + 3] += 80
    return x / 128.0, y


def _trained(x: np.ndarray, y: np.ndarray) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 8 * 8, 3))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    inputs, labels = torch.as_tensor(x), torch.as_tensor(y)
    for _ in range(60):
        opt.zero_grad()
        nn.functional.cross_entropy(net(inputs), labels).backward()
        opt.step()
    return net.eval()


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, float]:
    """The imported project (manifest in `<root>/model/model.yaml`) and PyTorch's test
    accuracy on the same test split."""
    root = tmp_path_factory.mktemp("contract")
    rng = np.random.default_rng(0)
    (xtr, ytr), (xte, yte) = _data(300, rng), _data(200, rng)
    net = _trained(xtr, ytr)
    with torch.no_grad():
        accuracy = float((net(torch.as_tensor(xte)).argmax(1).numpy() == yte).mean())
    torch.onnx.export(net, torch.as_tensor(xtr[:1]), root / "model.onnx", dynamo=False)
    np.savez(root / "data.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
    result = run_cli(["import-onnx", "model.onnx", "-o", "model/model.yaml", "--data",
                      "data.npz"], root)
    assert result.returncode == 0, result.stderr
    return root / "model" / "model.yaml", accuracy


def _float_accuracy(manifest: Path) -> tuple[float, str]:
    result = run_cli(["build", "--until", "train", str(manifest.name)], manifest.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    name = yaml.safe_load(manifest.read_text())["name"]
    metrics = json.loads((manifest.parent / "build" / name / "train" / "metrics.json")
                         .read_text())
    return metrics["test_accuracy"], result.stderr


def test_the_imported_model_scores_what_pytorch_scores(imported):
    manifest, pytorch = imported
    written = yaml.safe_load(manifest.read_text())
    assert written["dataset"]["normalize"] == {"method": "none"}
    assert "normalize: {method: scale" in manifest.read_text()  # how to say otherwise
    accuracy, log = _float_accuracy(manifest)
    assert pytorch > 0.9
    assert accuracy == pytorch, (accuracy, pytorch)
    assert "near" not in log and "warning" not in log


def test_inputs_rescaled_against_the_contract_are_named_when_near_chance(imported, tmp_path):
    """The same model shown 2x-1 (the old default, minmax) and scaled far beyond its
    range: near chance, and the warning says to state the input contract."""
    manifest, _ = imported
    text = manifest.read_text().replace("normalize: {method: none}",
                                        "normalize: {method: scale, scale: 0.01, offset: 0.9}")
    assert text != manifest.read_text()
    broken = manifest.with_name("broken.yaml")
    broken.write_text(text.replace(f"name: {yaml.safe_load(text)['name']}", "name: broken"))
    accuracy, log = _float_accuracy(broken)
    (line,) = [line for line in log.splitlines() if line.startswith("warning: broken.train")]
    assert "within 5 points of always answering the commonest class" in line
    assert "dataset.normalize" in line and "method none" in line
