"""The training loop shared by the `train` (float) and `qat` (fake-quant) stages.

Deterministic by construction: fixed seeds, `torch.use_deterministic_algorithms`, a fixed
thread count, and shuffling from a generator seeded per epoch — the same manifest on the
same machine gives the same checkpoint bytes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

from edgebuild.core.numerics import ACT_SCALE

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Optimizer, Schedule

# One intra-op thread: these models are tiny, and on a shared 2-core machine two OpenMP
# threads spin-wait against other processes (measured 0.27 s vs 4.8 s per digits epoch
# under load). It also keeps `-j N` stage parallelism from oversubscribing the cores.
THREADS = 1
EVAL_BATCH = 1024


@dataclass(frozen=True)
class Split:
    x: torch.Tensor  # float, the int8 inputs divided by 128
    y: torch.Tensor  # int64 class indices


@dataclass
class History:
    epochs: list[dict[str, float]] = field(default_factory=list)  # epoch, lr, losses, accuracies
    best_epoch: int = 0
    best_state: dict[str, torch.Tensor] | None = None


class Diverged(Exception):
    """The loss became NaN/inf; carries the epoch and the last good weights."""

    def __init__(self, epoch: int, history: History):
        self.epoch, self.history = epoch, history
        super().__init__(f"loss became NaN or infinite in epoch {epoch}")


def deterministic(seed: int) -> None:
    torch.manual_seed(seed)
    # torch.use_deterministic_algorithms(True) sets this flag and imports torch._inductor to
    # set its compiler's flag as well: 2 s of imports (dynamo, inductor) per training stage,
    # for a compiler edgebuild never runs. The eager ops read only this flag.
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # another torch: the public way, imports and all
        torch.use_deterministic_algorithms(True)
    else:
        setter(True, warn_only=False)
    torch.set_num_threads(THREADS)


def splits(arrays: dict[str, NDArray[Any]], dtype: torch.dtype = torch.float32) -> dict[str, Split]:
    return {part: Split(torch.as_tensor(arrays[f"x_{part}"].astype(np.float64) / ACT_SCALE,
                                        dtype=dtype),
                        torch.as_tensor(arrays[f"y_{part}"], dtype=torch.int64))
            for part in ("train", "val", "test")}


def make_optimizer(params: Iterable[torch.Tensor], optimizer: Optimizer,
                   lr: float | None = None) -> torch.optim.Optimizer:
    """`optimizer` is the manifest's Optimizer record (exactly one of sgd/adam/adamw)."""
    if optimizer.sgd is not None:
        o = optimizer.sgd
        return torch.optim.SGD(params, lr=lr or o.lr, momentum=o.momentum, nesterov=o.nesterov
                               and o.momentum > 0, weight_decay=o.weight_decay)
    adam = optimizer.adam or optimizer.adamw
    assert adam is not None  # the manifest's Optimizer holds exactly one of sgd, adam, adamw
    cls = torch.optim.Adam if optimizer.adam is not None else torch.optim.AdamW
    # fused=True: the fused CPU step computes sqrt(v) with the baseline kernels the pin
    # selects (correctly rounded). The default step's sqrt goes through MKL's vector math,
    # whose result differs between Intel and AMD processors even under MKL_CBWR, so the
    # same manifest trained to other bytes on another machine (benchmarks/cross_cpu.py).
    return cls(params, lr=lr or adam.lr, betas=adam.betas, weight_decay=adam.weight_decay,
               fused=True)


def make_schedule(opt: torch.optim.Optimizer, schedule: Schedule,
                  epochs: int) -> torch.optim.lr_scheduler.LRScheduler:
    if schedule.type == "multistep":
        return torch.optim.lr_scheduler.MultiStepLR(opt, list(schedule.milestones), schedule.gamma)
    if schedule.type == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs, eta_min=schedule.min_lr)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)


@torch.no_grad()
def evaluate(net: torch.nn.Module, split: Split) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) in eval mode."""
    net.eval()
    correct, loss = 0, 0.0
    for start in range(0, len(split.y), EVAL_BATCH):
        out = net(split.x[start:start + EVAL_BATCH])
        target = split.y[start:start + EVAL_BATCH]
        loss += float(F.cross_entropy(out.float(), target, reduction="sum"))
        correct += int((out.argmax(1) == target).sum())
    count = max(len(split.y), 1)
    return correct / count, loss / count


def _epoch(net: torch.nn.Module, data: Split, opt: torch.optim.Optimizer, batch: int,
           generator: torch.Generator, label: str) -> tuple[float, float]:
    from tqdm import tqdm

    net.train()
    order = torch.randperm(len(data.y), generator=generator)
    total, correct = torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64)
    bar = tqdm(range(0, len(order), batch), desc=label, file=sys.stderr, leave=False,
               disable=not sys.stderr.isatty())
    for start in bar:
        index = order[start:start + batch]
        out = net(data.x[index])
        loss = F.cross_entropy(out, data.y[index])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        with torch.no_grad():  # kept as tensors: no per-batch conversion to Python numbers
            total += loss.detach() * len(index)
            correct += (out.argmax(1) == data.y[index]).sum()
    return float(total) / len(order), int(correct) / len(order)


# An unset `epochs` is sized to the data: about this many optimizer steps, so that 50
# series train as long as 50,000 images do per step (10 epochs of 50 samples in batches of
# 64 were 10 steps: the UCR sets in issue 29 scored 16-26 %, below a 1-NN baseline).
TRAIN_STEPS, TRAIN_EPOCHS = 2000, (3, 500)
QAT_STEPS, QAT_EPOCHS = 500, (2, 200)


def auto_epochs(samples: int, batch: int, steps: int, bounds: tuple[int, int]) -> int:
    """Epochs giving about `steps` optimizer steps over `samples` in batches of `batch`."""
    per_epoch = max(1, -(-samples // batch))
    return min(max(-(-steps // per_epoch), bounds[0]), bounds[1])


def _score(row: dict[str, float], held_out: int) -> tuple[float, ...]:
    """What the kept epoch maximises: validation accuracy, then lower validation loss; with
    no validation split, lower loss on the training data (its accuracy saturates at 100 %
    long before the model stops improving)."""
    if held_out:
        return (row["val_acc"], -row["val_loss"])
    return (-row["val_loss"],)


def fit(net: torch.nn.Module, data: dict[str, Split], *, epochs: int, batch: int,
        opt: torch.optim.Optimizer, schedule: torch.optim.lr_scheduler.LRScheduler, seed: int,
        label: str, log: Callable[[str], None], patience: int | None = None) -> History:
    """Train, keeping the best epoch (`_score`); with `patience`, stop once that many
    epochs have passed without a better one."""
    history = History()
    best_key: tuple[float, ...] = (-math.inf,)
    held_out = len(data["val"].y)  # too few is the data stage's warning (stages.data)
    for epoch in range(1, epochs + 1):
        generator = torch.Generator().manual_seed(seed * 100003 + epoch)
        train_loss, train_acc = _epoch(net, data["train"], opt, batch, generator,
                                       f"{label} {epoch}/{epochs}")
        if not math.isfinite(train_loss):
            raise Diverged(epoch, history)
        val_acc, val_loss = evaluate(net, data["val"] if len(data["val"].y) else data["train"])
        row = {"epoch": epoch, "lr": opt.param_groups[0]["lr"], "train_loss": train_loss,
               "train_acc": train_acc, "val_loss": val_loss, "val_acc": val_acc}
        history.epochs.append(row)
        measured = "val" if held_out else "fit"  # no validation split: on training data
        log(f"{label} epoch {epoch:>3}/{epochs}  loss {train_loss:.4f}  acc {train_acc:.3f}  "
            f"{measured}_loss {val_loss:.4f}  {measured}_acc {val_acc:.3f}")
        if _score(row, held_out) > best_key:
            best_key = _score(row, held_out)
            history.best_epoch = epoch
            history.best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
        schedule.step()
        if patience is not None and epoch - history.best_epoch >= patience and epoch < epochs:
            log(f"{label}: stopping after epoch {epoch}: no better epoch in the last "
                f"{patience} (patience)")
            break
    return history
