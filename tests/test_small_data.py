"""Help for small data and low bit widths: a validation split too small to pick an epoch
is warned about (once, by the data stage, naming the build), `split: {val: 0}` names its
metric honestly, and an int8 accuracy drop names the layers that saturate with their share."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import NPZ_MANIFEST, npz_data, run_cli, write

from edgebuild.pipeline.stages.evaluate import accuracy_drop
from edgebuild.pipeline.stages.quantize import SATURATION_WARNING_PCT


def _project(root, split: str = ""):
    npz_data(root / "data.npz")
    text = NPZ_MANIFEST.replace("path: data.npz", f"path: data.npz{split}")
    write(root / "edgebuild.yaml", text)
    return root


def test_a_tiny_validation_split_is_warned_about(tmp_path):
    result = run_cli(["build", "--until", "train"], _project(tmp_path))
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stderr.splitlines() if "validation split holds" in line]
    assert len(warning) == 1 and "dataset.split: {val: 0}" in warning[0], result.stderr
    assert warning[0].startswith("warning: tiny.data: the validation split holds 6 samples")
    assert "val_acc" in result.stderr


def test_no_validation_split_says_the_metric_is_on_training_data(tmp_path):
    project = _project(tmp_path, "\n  split: {val: 0, test: 0.2}")
    result = run_cli(["build", "--until", "train"], project)
    assert result.returncode == 0, result.stderr
    assert "fit_acc" in result.stderr and "val_acc" not in result.stderr
    assert "validation split holds" not in result.stderr


def test_an_accuracy_drop_names_the_saturating_layers_and_their_share():
    rows = [SimpleNamespace(name="conv1", bits=4, wide=False, saturated_pct=41.5),
            SimpleNamespace(name="conv2", bits=8, wide=False,
                            saturated_pct=SATURATION_WARNING_PCT),
            SimpleNamespace(name="fc", bits=8, wide=True, saturated_pct=None)]
    warning = accuracy_drop(0.95, 0.80, rows)  # type: ignore[arg-type]
    assert warning is not None
    assert warning.startswith("int8 accuracy 0.8000 is 15.00 points below float 0.9500")
    assert "conv1 (4-bit weights, 41.5%)" in warning and "conv2" not in warning
    assert "qat.overrides.conv1.weight_bits" in warning


def test_saturation_without_an_accuracy_drop_is_no_warning():
    """A layer may learn to use the rails: the shipped examples keep their float accuracy
    with a third of some layer's outputs there, and a warning would say they are broken."""
    rows = [SimpleNamespace(name="conv3", bits=8, wide=False, saturated_pct=41.2)]
    assert accuracy_drop(0.96, 0.95, rows) is None  # type: ignore[arg-type]
    assert accuracy_drop(0.96, 0.93, []) is not None  # a drop alone is still said
    assert "qat.epochs" in (accuracy_drop(0.96, 0.93, []) or "")
