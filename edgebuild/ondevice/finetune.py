"""The PyTorch side of on-device training: the same steps as the generated C, computed
independently with torch.autograd and torch.optim, to prove the C right step by step.

The frozen prefix is the numpy integer reference (bit-exact with the C int8 kernels, see
`evaluate`/`kat`), so both sides start each step from identical float32 boundary tensors;
from there the float part is written with torch.nn.functional, not with the C kernels'
geometry records, so that a wrong geometry in the generated code shows as a loss mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from edgebuild.core import boundedjson, numerics
from edgebuild.model import quantized
from edgebuild.ondevice import backward
from edgebuild.ondevice.operators import TrainKernel

if TYPE_CHECKING:
    from numpy.typing import NDArray
    from torch import Tensor
    from torch.optim import Optimizer

    from edgebuild.manifest.ondevice import DeviceAdam, DeviceSgd, Ondevice

# torch and torch.nn.functional reach this module's torch code as arguments (`torch`, `F`):
# ModuleType, whose attributes mypy reads as Any.

Floats = dict[str, "NDArray[np.float32]"]  # tensor name -> float32 (N, elements)


def boundary_values(model: quantized.QuantizedModel, graph: backward.TrainGraph,
                    x_int8: NDArray[np.integer[Any]]) -> Floats:
    """Float32 (N, elements) of every boundary tensor: the prefix's int8 output as q/128."""
    values: dict[str, list[NDArray[np.float32]]] = {}
    for start in range(0, len(x_int8), 256):
        batch = quantized.run_reference(model, x_int8[start:start + 256], keep_all=True)
        for name, _ in graph.boundary:
            part = batch[name].reshape(len(batch[name]), -1).astype(np.float32) / np.float32(128)
            values.setdefault(name, []).append(part)
    return {name: np.concatenate(parts) for name, parts in values.items()}


class FloatPart:
    """The trainable part as a torch function of its boundary tensors."""

    def __init__(self, graph: backward.TrainGraph, params: Floats, torch: ModuleType):
        self.graph, self.torch = graph, torch
        trainable = {n for n, _ in graph.parameters()}
        self.tensors = {name: torch.tensor(value, dtype=torch.float32,
                                           requires_grad=name in trainable)
                        for name, value in params.items()}
        self.trainable = [self.tensors[name] for name, _ in graph.parameters()]

    def forward(self, boundary: dict[str, Tensor]) -> Tensor:
        values = dict(boundary)
        for layer in self.graph.layers:
            values[layer.name] = self._layer(layer, values)
        return values[self.graph.output]

    def _layer(self, layer: backward.TrainLayer, values: dict[str, Tensor]) -> Tensor:
        import torch.nn.functional as F

        batch = values[layer.inputs[0]].shape[0]
        out: Tensor
        if layer.kernel is TrainKernel.add:
            # an add has two inputs or more: the sum is a tensor (never sum()'s start, 0)
            out = cast("Tensor", sum(values[name] for name in layer.inputs))
        elif layer.kernel is TrainKernel.concat:
            out = self.torch.cat([values[name] for name in layer.inputs], dim=1)
        elif layer.kernel is TrainKernel.pool:
            out = _pool(F, layer, values[layer.inputs[0]]).reshape(batch, -1)
        elif layer.fully_connected:
            assert layer.conv is not None  # a linear layer's 1 x 1 convolution (TrainLayer)
            out = F.linear(values[layer.inputs[0]], self._weight(layer).reshape(
                layer.conv.out_c, -1), self.tensors.get(f"{layer.name}.bias"))
        else:
            out = self._conv(F, layer, values[layer.inputs[0]])
        act, clamp = backward.unclamped(layer.act)
        return numerics.torch_clamp_float(out, act) if clamp else numerics.torch_activate(out, act)

    def _weight(self, layer: backward.TrainLayer) -> Tensor:
        return self.tensors[f"{layer.name}.weight"]

    def _conv(self, F: ModuleType, layer: backward.TrainLayer, x: Tensor) -> Tensor:
        batch = x.shape[0]
        if layer.pool is not None:
            x = _pool(F, layer, x)
        c = layer.conv
        assert c is not None  # a convolution's (TrainLayer)
        x = x.reshape(batch, c.in_c, c.in_h, c.in_w)
        out = F.conv2d(x, self._weight(layer), self.tensors.get(f"{layer.name}.bias"),
                       (c.stride_h, c.stride_w), (c.pad_h, c.pad_w), (c.dil_h, c.dil_w), c.groups)
        return out.reshape(batch, -1)


def _pool(F: ModuleType, layer: backward.TrainLayer, x: Tensor) -> Tensor:
    """The layer's pooling (its own, or its convolution's fused input pooling)."""
    pool = layer.pool
    assert pool is not None  # the caller pools a layer that has a pool
    x = x.reshape(x.shape[0], pool.in_c, pool.in_h, pool.in_w)
    apply = F.max_pool2d if layer.pool_mode == "max" else F.avg_pool2d
    return apply(x, (pool.k_h, pool.k_w), (pool.stride_h, pool.stride_w))


def loss_function(kind: str, classes: int, torch: ModuleType
                  ) -> Callable[[Tensor, Tensor], Tensor]:
    import torch.nn.functional as F

    if kind == "mse":
        return lambda out, labels: F.mse_loss(out, F.one_hot(labels, classes).to(torch.float32))
    return F.cross_entropy


def learning_rate(spec: Ondevice) -> float:
    """The optimizer's learning rate, once `auto` has been resolved (with_learning_rate)."""
    lr = spec.optimizer.settings.lr
    if lr == "auto":
        raise ValueError("ondevice.optimizer lr is auto: resolve it first (with_learning_rate)")
    return lr


def optimizer_for(spec: Ondevice, tensors: list[Tensor], torch: ModuleType) -> Optimizer:
    settings = spec.optimizer.settings
    lr = learning_rate(spec)
    if spec.optimizer.kind == "adam":
        adam = cast("DeviceAdam", settings)  # the `adam` key's settings
        # fused: its sqrt is the correctly rounded one; the unfused step's goes through MKL's
        # vector math, which rounds by CPU vendor (train.loop.make_optimizer)
        return torch.optim.Adam(tensors, lr=lr, betas=tuple(adam.betas), eps=adam.eps,
                                fused=True)
    sgd = cast("DeviceSgd", settings)  # `sgd`, the other form the device runs (unsupported())
    return torch.optim.SGD(tensors, lr=lr, momentum=sgd.momentum, foreach=False)


TRIAL_STEPS = 200  # steps of each learning rate's trial run (at most one epoch)
NEAR = 1.05  # losses within 5 % of the lowest count as equally good


def with_learning_rate(spec: Ondevice, graph: backward.TrainGraph, params: Floats,
                       train: Split, seed: int) -> tuple[Ondevice, dict[str, float | None]]:
    """`spec` with a learning rate: its own, or for `auto` the largest of
    AUTO_LEARNING_RATES whose short run on the training split (the C's algorithm, in torch)
    ends with a mean training loss within 5 % of the lowest; and that loss per rate tried
    (None: it diverged), empty when the manifest gave the rate. A rate that diverges on the
    trial is never picked."""
    from edgebuild.manifest.ondevice import AUTO_LEARNING_RATES

    if spec.optimizer.settings.lr != "auto":
        return spec, {}
    boundary, labels = train
    steps = min(TRIAL_STEPS, -(-len(labels) // spec.batch))
    batches = fixed_batches(steps, spec.batch, len(labels), seed + 2)
    start = split_loss(spec, graph, params, boundary, labels)
    tried: dict[str, float | None] = {}
    for lr in AUTO_LEARNING_RATES:
        candidate = _with_lr(spec, lr)
        trace = run_steps(candidate, graph, params, boundary, labels, batches, record=False)
        end = None
        if divergence(trace.losses, start) is None:
            end = split_loss(spec, graph, {**params, **trace.weights[-1]}, boundary, labels)
        tried[f"{lr:g}"] = None if end is None or not np.isfinite(end) else round(end, 6)
    finite = {lr: loss for lr, loss in tried.items() if loss is not None}
    if not finite:
        raise Diverged(f"ondevice: fine-tuning diverged with every learning rate tried "
                       f"({', '.join(tried)}, {spec.optimizer.kind}, batch {spec.batch}); give "
                       f"ondevice.optimizer a smaller lr, a larger ondevice.batch or train "
                       f"fewer layers")
    # the largest rate within NEAR of the lowest loss: as good on the trial, faster after it
    lowest = min(finite.values())
    best = max((lr for lr, loss in finite.items() if loss <= NEAR * lowest), key=float)
    return _with_lr(spec, float(best)), tried


def _with_lr(spec: Ondevice, lr: float) -> Ondevice:
    optimizer = spec.optimizer.model_copy(update={
        spec.optimizer.kind: spec.optimizer.settings.model_copy(update={"lr": lr})})
    return spec.model_copy(update={"optimizer": optimizer})


@dataclass(frozen=True)
class Trace:
    losses: list[float]
    gradients: list[Floats]  # per step: the gradient of every trainable tensor
    weights: list[Floats]  # per step: every trainable tensor after the update


# A verification step proves something only if its loss and every gradient are well above
# float32 noise: a loss of 0 compares zeros, and a zero gradient compares nothing.
LOSS_FLOOR = 1e-4
GRADIENT_FLOOR = 1e-5  # of a tensor's largest |gradient| (ondevice_kat's floor is 1e-6)


class VerificationError(ValueError):
    """No batch gives a verification step a loss and every trainable tensor a gradient."""


@dataclass(frozen=True)
class LossTrace:
    """The PyTorch loss of every step and the training rows of every batch (`trace.json`
    of the `ondevice` stage, schema schemas/artifacts/trace.v1.schema.json); the gradients
    and final weights are in `trace.npz`."""

    losses: tuple[float, ...]
    batches: tuple[tuple[int, ...], ...]  # batch k: rows of the training split

    def to_json(self) -> dict[str, Any]:
        return {"losses": list(self.losses), "batches": [list(b) for b in self.batches]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LossTrace:
        return cls(tuple(data["losses"]), tuple(tuple(b) for b in data["batches"]))

    @classmethod
    def load(cls, directory: Path) -> LossTrace:
        return cls.from_json(boundedjson.read(directory / "trace.json"))


@dataclass(frozen=True)
class FineTune:
    """Held-out accuracy under drift before and after `epochs` of on-device training
    (`finetune.json` of the `ondevice` stage, schema schemas/artifacts/finetune.v1.schema.json),
    and the deployed int8 model's accuracy on the same data for comparison."""

    epochs: int
    steps: int
    accuracy_before: float
    accuracy_after: float
    final_loss: float | None  # None: no step was run (zero epochs)
    start_loss: float | None = None  # the training split's mean loss before the first step
    end_loss: float | None = None  # the mean loss of the last WINDOW steps
    frozen_int8_accuracy: float | None = None  # filled in by the stage
    learning_rate: float | None = None  # filled in by the stage: the rate trained with
    learning_rates_tried: dict[str, float | None] | None = None  # `auto`: loss per rate

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FineTune:
        return cls(data["epochs"], data["steps"], data["accuracy_before"],
                   data["accuracy_after"], data["final_loss"], data["start_loss"],
                   data["end_loss"], data["frozen_int8_accuracy"], data["learning_rate"],
                   data["learning_rates_tried"])

    @classmethod
    def load(cls, directory: Path) -> FineTune:
        return cls.from_json(boundedjson.read(directory / "finetune.json"))


class Stepper:
    """The C program's algorithm in torch: a batch's loss and gradients, then the update."""

    def __init__(self, spec: Ondevice, graph: backward.TrainGraph, params: Floats,
                 boundary: Floats, labels: NDArray[np.integer[Any]]):
        import torch

        self.torch, self.graph, self.boundary, self.labels = torch, graph, boundary, labels
        self.part = FloatPart(graph, params, torch)
        self.optimizer = optimizer_for(spec, self.part.trainable, torch)
        self.loss_fn = loss_function(spec.loss.value, graph.output_size, torch)

    def gradients(self, rows: NDArray[np.int64]) -> tuple[float, Floats]:
        """The loss of batch `rows` and every trainable tensor's gradient (no update)."""
        self.optimizer.zero_grad(set_to_none=False)
        inputs = {name: self.torch.from_numpy(v[rows]) for name, v in self.boundary.items()}
        labels = self.torch.from_numpy(self.labels[rows].astype(np.int64))
        loss = self.loss_fn(self.part.forward(inputs), labels)
        loss.backward()
        return float(loss.detach()), {
            name: tensor.grad.detach().numpy().copy() for (name, _), tensor
            in zip(self.graph.parameters(), self.part.trainable, strict=True)}

    def update(self) -> Floats:
        """Apply the gradients of the last `gradients`; the trainable tensors after it."""
        self.optimizer.step()
        return self.weights()

    def weights(self) -> Floats:
        return {name: tensor.detach().numpy().copy()
                for (name, _), tensor in zip(self.graph.parameters(), self.part.trainable,
                                             strict=True)}

    def sample_losses(self) -> NDArray[np.float64]:
        """Every sample's loss under the current weights (no gradients)."""
        return _sample_losses(self.part, self.loss_fn, self.boundary, self.labels)


def _sample_losses(part: FloatPart, loss_fn: Callable[[Tensor, Tensor], Tensor],
                   boundary: Floats, labels: NDArray[np.integer[Any]]) -> NDArray[np.float64]:
    torch = part.torch
    with torch.no_grad():
        out = part.forward({name: torch.from_numpy(v) for name, v in boundary.items()})
        targets = torch.from_numpy(labels.astype(np.int64))
        losses = [float(loss_fn(out[i:i + 1], targets[i:i + 1])) for i in range(len(labels))]
    return np.asarray(losses, dtype=np.float64)


def split_loss(spec: Ondevice, graph: backward.TrainGraph, params: Floats, boundary: Floats,
               labels: NDArray[np.integer[Any]]) -> float:
    """The mean loss of a split under `params` (no optimizer: any learning rate, auto too)."""
    import torch

    part = FloatPart(graph, params, torch)
    loss_fn = loss_function(spec.loss.value, graph.output_size, torch)
    return float(_sample_losses(part, loss_fn, boundary, labels).mean())


def run_steps(spec: Ondevice, graph: backward.TrainGraph, params: Floats, boundary: Floats,
              labels: NDArray[np.integer[Any]], batches: list[NDArray[np.int64]],
              record: bool = True) -> Trace:
    """The C program's steps: batch k is rows `batches[k]` of `boundary`/`labels`;
    `record`: keep every step's gradients and weights (else only the last weights)."""
    stepper = Stepper(spec, graph, params, boundary, labels)
    losses: list[float] = []
    gradients: list[Floats] = []
    weights: list[Floats] = []
    for rows in batches:
        loss, grads = stepper.gradients(rows)
        losses.append(loss)
        stepper.optimizer.step()
        if record:
            gradients.append(grads)
            weights.append(stepper.weights())
    return Trace(losses, gradients, weights if record else [stepper.weights()])


def informative(loss: float, gradients: Floats) -> list[str]:
    """Why a step would prove nothing: a loss below LOSS_FLOOR, trainable tensors whose
    gradient is below GRADIENT_FLOOR everywhere; empty when it proves something."""
    found = [] if loss >= LOSS_FLOOR else [f"loss {loss:.3g}"]
    return found + [f"no gradient for {name}" for name, g in gradients.items()
                    if not float(np.max(np.abs(g), initial=0.0)) >= GRADIENT_FLOOR]


def verification_steps(spec: Ondevice, graph: backward.TrainGraph, params: Floats,
                       boundary: Floats, labels: NDArray[np.integer[Any]], seed: int
                       ) -> tuple[list[NDArray[np.int64]], Trace]:
    """The batches the C program runs and PyTorch's trace of them. Each step takes the
    next rows of a seeded order; a batch whose loss or some tensor's gradient is ~0 (a
    model sure of those samples, a layer all of whose units are off for them) would
    compare zeros, so the step takes the samples the model gets most wrong instead, and
    a VerificationError says why when even they give no gradient."""
    stepper = Stepper(spec, graph, params, boundary, labels)
    order = fixed_batches(spec.steps, spec.batch, len(labels), seed)
    batches: list[NDArray[np.int64]] = []
    losses: list[float] = []
    gradients: list[Floats] = []
    weights: list[Floats] = []
    for step, rows in enumerate(order):
        loss, grads = stepper.gradients(rows)
        if informative(loss, grads):
            rows = np.argsort(-stepper.sample_losses(), kind="stable")[:spec.batch]
            loss, grads = stepper.gradients(rows)
            if why := informative(loss, grads):
                raise VerificationError(
                    f"verification step {step + 1} of {spec.steps}: even the "
                    f"{spec.batch} training sample(s) with the highest loss give "
                    f"{', '.join(why)}, so comparing the C with PyTorch would compare zeros; "
                    f"train layers whose units are active for the data, or give data the "
                    f"model gets wrong (ondevice.drift)")
        batches.append(rows.astype(np.int64))
        losses.append(loss)
        gradients.append(grads)
        weights.append(stepper.update())
    return batches, Trace(losses, gradients, weights)


def fixed_batches(count: int, batch: int, samples: int, seed: int) -> list[NDArray[np.int64]]:
    """`count` batches of `batch` row indices: seeded permutations of the samples, one
    after the other (an epoch boundary may fall inside a batch)."""
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(samples)
                            for _ in range(-(-count * batch // samples))])
    return [order[k * batch:(k + 1) * batch] for k in range(count)]


def accuracy(graph: backward.TrainGraph, params: Floats, boundary: Floats,
             labels: NDArray[np.integer[Any]]) -> float:
    import torch

    part = FloatPart(graph, params, torch)
    with torch.no_grad():
        out = part.forward({name: torch.from_numpy(v) for name, v in boundary.items()})
    return float((out.argmax(dim=1).numpy() == labels).mean())


# boundary tensors and labels of one split
Split = tuple[Floats, "NDArray[np.integer[Any]]"]


# Fine-tuning has diverged when the loss is not finite, or when the mean loss over a window
# of steps is GROWTH times what the training split's loss was before the first step.
GROWTH = 10.0
WINDOW = 50  # steps (one sample's loss alone is too noisy at batch 1)
LOSS_REFERENCE_FLOOR = 0.01  # a nearly perfect start may double without diverging


class Diverged(ValueError):
    """Fine-tuning diverged; the message is one line with the settings and what to try."""


def divergence(losses: list[float], start: float) -> str | None:
    """How the losses of fine-tuning diverged from the split's loss `start`, or None."""
    for step, loss in enumerate(losses):
        if not np.isfinite(loss):
            return f"the loss is {loss} at step {step + 1} of {len(losses)}"
    reference = max(start, LOSS_REFERENCE_FLOOR)
    width = min(WINDOW, len(losses))
    ends = [*range(width, len(losses), width), len(losses)] if losses else []
    for end in ends:
        mean = float(np.mean(losses[end - width:end]))
        if mean > GROWTH * reference:
            return (f"the mean loss of steps {end - width + 1}-{end} is {mean:.3g}, "
                    f"{mean / reference:.0f}x the {start:.3g} it started at")
    return None


def _diverged(spec: Ondevice, graph: backward.TrainGraph, why: str) -> Diverged:
    settings = spec.optimizer.settings
    lr = learning_rate(spec)
    momentum = getattr(settings, "momentum", 0.0)
    layers = len(graph.trainable)
    return Diverged(
        f"ondevice: fine-tuning diverged ({why}) with {spec.optimizer.kind} lr {lr:g}"
        + (f" momentum {momentum:g}" if momentum else "")
        + f", batch {spec.batch}, {layers} trainable layer{'s' if layers != 1 else ''}; try "
          f"ondevice.optimizer lr {lr / 10:g}, a larger ondevice.batch or fewer trainable "
          f"layers")


def fine_tune(spec: Ondevice, graph: backward.TrainGraph, params: Floats, train: Split,
              test: Split, seed: int) -> FineTune:
    """Accuracy on the held-out split before and after `epochs` of on-device training on
    the training split (both with the field drift applied): the C code's algorithm, run in
    torch because it is verified equal to the C step by step. Raises Diverged."""
    boundary, labels = train
    steps = spec.epochs * (-(-len(labels) // spec.batch))
    batches = fixed_batches(steps, spec.batch, len(labels), seed + 1)
    before = accuracy(graph, params, *test)
    if not steps:
        return FineTune(spec.epochs, steps, round(before, 4), round(before, 4), None)
    start = split_loss(spec, graph, params, boundary, labels)
    trace = run_steps(spec, graph, params, boundary, labels, batches, record=False)
    if why := divergence(trace.losses, start):
        raise _diverged(spec, graph, why)
    after = accuracy(graph, {**params, **trace.weights[-1]}, *test)
    return FineTune(spec.epochs, steps, round(before, 4), round(after, 4),
                    round(trace.losses[-1], 6), round(start, 6),
                    round(float(np.mean(trace.losses[-min(WINDOW, steps):])), 6))
