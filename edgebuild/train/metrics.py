"""What a training run reports (`metrics.json` of the `train` and `qat` stages, schema
schemas/artifacts/metrics.v1.schema.json): one row per epoch, the epoch kept and the
kept weights' test accuracy and loss.

`enabled` is written by QAT only (float training has no switch); a disabled QAT run
trained nothing: no epochs, best epoch 0, test accuracy null and no test loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core import boundedjson

if TYPE_CHECKING:
    from edgebuild.train.loop import History


@dataclass(frozen=True)
class Epoch:
    epoch: int  # from 1
    lr: float
    train_loss: float
    train_acc: float
    val_loss: float
    val_acc: float

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Epoch:
        return cls(data["epoch"], data["lr"], data["train_loss"], data["train_acc"],
                   data["val_loss"], data["val_acc"])


@dataclass(frozen=True)
class Metrics:
    best_epoch: int  # 0: no epoch was trained
    epochs: tuple[Epoch, ...]
    test_accuracy: float | None
    test_loss: float | None = None  # None: not written (nothing was trained)
    enabled: bool | None = None  # QAT's switch; None: not written (float training)

    @classmethod
    def of(cls, history: History, test_accuracy: float | None, test_loss: float | None = None,
           enabled: bool | None = None) -> Metrics:
        """From a train.loop.History (its epoch rows are this file's rows)."""
        return cls(history.best_epoch, tuple(Epoch.from_json(row) for row in history.epochs),
                   test_accuracy, test_loss, enabled)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"best_epoch": self.best_epoch,
                               "epochs": [epoch.to_json() for epoch in self.epochs],
                               "test_accuracy": self.test_accuracy}
        if self.test_loss is not None:
            out["test_loss"] = self.test_loss
        if self.enabled is not None:
            out["enabled"] = self.enabled
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Metrics:
        return cls(data["best_epoch"], tuple(Epoch.from_json(e) for e in data["epochs"]),
                   data["test_accuracy"], data.get("test_loss"), data.get("enabled"))

    @classmethod
    def load(cls, directory: Path) -> Metrics:
        """What the `train` or `qat` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "metrics.json"))
