"""The manifest's `ondevice` section: which layers fine-tune on the device, and how.

A deployed model keeps training in the field (a new user's EMG signals, a drifted IMU):
the frozen prefix runs the int8 inference kernels, the trainable suffix runs float32
forward and backward passes generated from this section (see edgebuild/backward.py).

`trainable` takes one of three forms:
- a list of layer names: exactly those layers train;
- `{last: N}`: the last N layers that have weights;
- `{budget: 24KiB}`: the most layers (counted from the output) whose training memory fits.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from edgebuild.core.fields import Bytes, Identifier, Strict


class Last(Strict):
    last: int = Field(strict=True, ge=1, le=512, description="the last N layers with weights")


class Budget(Strict):
    budget: Bytes = Field(description="training memory (RAM) the chosen layers may use")


class Scope(StrEnum):
    """What of a trainable layer is updated."""

    all = "all"
    bias = "bias"


# `lr: auto` (the default): the ondevice stage tries these on the training split and keeps
# the largest whose training loss after a short run is within 5 % of the lowest
# (edgebuild.ondevice.finetune.with_learning_rate).
AUTO_LEARNING_RATES = (0.1, 0.03, 0.01, 0.003, 0.001)
LR_DESCRIPTION = ("learning rate; auto: the build tries " + ", ".join(map(str, AUTO_LEARNING_RATES))
                  + " on the training split and keeps the largest whose loss after a short "
                    "run is within 5 % of the lowest (finetune.json says which)")
LearningRate = Annotated[float, Field(gt=0, le=10)] | Literal["auto"]


class DeviceSgd(Strict):
    lr: LearningRate = Field(default="auto", description=LR_DESCRIPTION)
    momentum: float = Field(default=0.0, ge=0, lt=1)
    nesterov: bool = Field(default=False, description="not supported on the device")
    weight_decay: float = Field(default=0.0, ge=0, le=1, description="not supported on the device")


class DeviceAdam(Strict):
    lr: LearningRate = Field(default="auto", description=LR_DESCRIPTION)
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (
        0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0, le=1)
    weight_decay: float = Field(default=0.0, ge=0, le=1, description="not supported on the device")
    amsgrad: bool = Field(default=False, description="not supported on the device")


class DeviceOptimizer(Strict):
    """Exactly one of the keys, e.g. `{sgd: {lr: 0.05, momentum: 0.9}}`. The keys mirror
    torch.optim so a training optimizer can be copied; options the generated C does not
    implement are refused at check time (see `unsupported`)."""

    sgd: DeviceSgd | None = None
    adam: DeviceAdam | None = None
    adamw: DeviceAdam | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DeviceOptimizer:
        chosen = [k for k in ("sgd", "adam", "adamw") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"choose exactly one optimizer of sgd, adam (got {chosen or 'none'})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("sgd", "adam", "adamw") if getattr(self, k) is not None)

    @property
    def settings(self) -> DeviceSgd | DeviceAdam:
        return getattr(self, self.kind)


class Loss(StrEnum):
    cross_entropy = "cross_entropy"
    mse = "mse"


class Drift(Strict):
    """A simulated field shift of the input data (per-channel sensor gain and offset, in
    real units of the normalized input), so that before/after accuracy can be shown."""

    gain: float = Field(default=0.3, ge=0, le=0.95,
                        description="per-channel gain drawn from [1 - gain, 1 + gain]")
    offset: float = Field(default=0.2, ge=0, le=1,
                          description="per-channel offset drawn from [-offset, offset]")


FORMS = "a list of layer names, {last: N} or {budget: 40KiB}"


def _form(value: object) -> object:
    """Refuse anything but the three forms up front, so the message names them."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("last", "budget"):
        return value
    found = f"keys {', '.join(map(str, value))}" if isinstance(value, dict) else repr(value)
    raise ValueError(f"write {FORMS}; got {found}")


def _kind(value: object) -> str:
    """The form of raw YAML (validation) or of a record (serialization)."""
    if isinstance(value, list | tuple):
        return "names"
    return "last" if isinstance(value, Last) or (isinstance(value, dict) and "last" in value) \
        else "budget"


TrainableLayers = Annotated[
    Annotated[list[Identifier], Tag("names")] | Annotated[Last, Tag("last")]
    | Annotated[Budget, Tag("budget")],
    Discriminator(_kind), BeforeValidator(_form)]


class Ondevice(Strict):
    trainable: TrainableLayers = Field(description=FORMS)
    scope: dict[Identifier, Scope] = Field(
        default={}, description="per trainable layer: all (weights and bias, default) or bias")
    optimizer: DeviceOptimizer = DeviceOptimizer(sgd=DeviceSgd())
    loss: Loss = Loss.cross_entropy
    batch: int = Field(strict=True, default=8, ge=1, le=1024)
    steps: int = Field(strict=True, default=8, ge=1, le=1000,
                       description="training steps the C code runs and compares with PyTorch")
    epochs: int = Field(strict=True, default=5, ge=0, le=1000,
                        description="fine-tuning epochs over the (drifted) training split for "
                                    "the before/after accuracy in the report")
    drift: Drift | None = Field(default=Drift(), description="field shift applied to the data "
                                                             "used on the device; null: none")
    weights: str | None = Field(default=None, min_length=1,
                                description="a weight-only file (.wof) with the starting "
                                            "trainable weights, e.g. read back from a device")


# The settings of DeviceOptimizer that the generated C implements (everything else is an
# error at check time, never silently ignored).
SUPPORTED: dict[str, str] = {"sgd": "sgd with lr and momentum", "adam": "adam with lr, betas, eps"}


def unsupported(optimizer: DeviceOptimizer) -> list[tuple[tuple[str | int, ...], str]]:
    """(path below `ondevice.optimizer`, message) for each option the device cannot do."""
    kind, settings = optimizer.kind, optimizer.settings
    allowed = "; ".join(SUPPORTED.values())
    if kind not in SUPPORTED:
        return [((kind,), f"{kind} is not supported on the device (supported: {allowed})")]
    found: list[tuple[tuple[str | int, ...], str]] = []
    for field, off in (("nesterov", False), ("weight_decay", 0.0), ("amsgrad", False)):
        if getattr(settings, field, off) != off:
            found.append(((kind, field), f"{field} is not supported on the device "
                                         f"(supported: {allowed})"))
    return found


