"""Help for small data and low bit widths: a validation split too small to pick an epoch
is warned about, `split: {val: 0}` names its metric honestly, and a layer that saturates
a large share of its activations is named with its share."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import NPZ_MANIFEST, npz_data, run_cli, write

from edgebuild.pipeline.stages.quantize import SATURATION_WARNING_PCT, saturation_warnings


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
    assert "val_acc" in result.stderr


def test_no_validation_split_says_the_metric_is_on_training_data(tmp_path):
    project = _project(tmp_path, "\n  split: {val: 0, test: 0.2}")
    result = run_cli(["build", "--until", "train"], project)
    assert result.returncode == 0, result.stderr
    assert "fit_acc" in result.stderr and "val_acc" not in result.stderr
    assert "validation split holds" not in result.stderr


def test_saturation_above_the_threshold_names_the_layer_and_share():
    rows = [SimpleNamespace(name="conv1", bits=4, wide=False, saturated_pct=41.5),
            SimpleNamespace(name="conv2", bits=8, wide=False,
                            saturated_pct=SATURATION_WARNING_PCT),
            SimpleNamespace(name="fc", bits=8, wide=True, saturated_pct=None)]
    (warning,) = saturation_warnings(rows)  # type: ignore[arg-type]
    assert warning.startswith("warning: layer conv1 (4-bit weights) saturates 41.5% ")
    assert "qat.overrides.conv1.weight_bits" in warning
