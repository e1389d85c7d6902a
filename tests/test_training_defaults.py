"""Training defaults sized to the data: unset epochs give about a fixed number of optimizer
steps, the kept epoch is the best by validation accuracy (by training loss without a
validation split), and `train.patience` stops a run that no longer improves."""

from __future__ import annotations

import pytest
import torch
from conftest import NPZ_MANIFEST, npz_data, run_cli, write

from edgebuild.train import loop


@pytest.mark.parametrize(("samples", "batch", "expected"), [
    (50, 64, 500),      # one step per epoch: capped at 500 epochs
    (100, 16, 286),     # 7 steps per epoch: 2000 / 7, rounded up
    (54000, 64, 3),     # 844 steps per epoch: at least 3 epochs
])
def test_unset_epochs_give_about_2000_steps(samples, batch, expected):
    assert loop.auto_epochs(samples, batch, loop.TRAIN_STEPS, loop.TRAIN_EPOCHS) == expected


def _data(seed: int = 0) -> dict[str, loop.Split]:
    """Random labels: nothing to learn, so the loss stops improving after a few epochs."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 8, generator=generator)
    y = torch.randint(0, 2, (64,), generator=generator)
    empty = loop.Split(x[:0], y[:0])
    return {"train": loop.Split(x, y), "val": empty, "test": loop.Split(x, y)}


def _fit(epochs: int, lr: float, patience: int | None, lines: list[str]) -> loop.History:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)
    return loop.fit(net, _data(), epochs=epochs, batch=16, opt=opt, schedule=schedule, seed=1,
                    label="t", log=lines.append, patience=patience)


def test_without_a_validation_split_the_kept_epoch_has_the_lowest_training_loss():
    history = _fit(12, 0.5, None, [])
    losses = [row["val_loss"] for row in history.epochs]  # measured on the training data
    assert history.best_epoch == 1 + losses.index(min(losses))


def test_patience_stops_a_run_that_no_longer_improves():
    lines: list[str] = []
    history = _fit(200, 5.0, 3, lines)  # a rate that makes the loss jump about
    assert len(history.epochs) == history.best_epoch + 3 < 200
    assert any("stopping after epoch" in line and "patience" in line for line in lines)


def test_a_build_with_unset_epochs_says_how_many_it_chose(tmp_path):
    npz_data(tmp_path / "data.npz")
    text = NPZ_MANIFEST.replace("train: {epochs: 1, batch: 16}\nqat: {epochs: 1}",
                                "train: {batch: 16}")
    assert "epochs" not in text
    write(tmp_path / "edgebuild.yaml", text)
    result = run_cli(["build", "--until", "qat"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: epochs unset: 500 (about 2000 steps of batch 16 over" in result.stderr
    assert "qat: epochs unset:" in result.stderr
