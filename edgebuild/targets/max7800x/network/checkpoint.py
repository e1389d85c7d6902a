"""The quantized ai8x-training checkpoint (`.pth.tar`): its layers' integer weights, raw
biases, output shifts and weight widths.

Checkpoint arithmetic (see the manual's "Number Format" and the toolchain's checkpoint
reader): weights are stored as integers; a layer's bias b is used as
`floor(b / 2**(weight_bits - 1))` (an int8) times 128 in the accumulator; the layer's
`output_shift` is edgebuild's weight scale exponent (device total shift
`output_shift + 8 - weight_bits`, edgebuild shift `scale_exp - (bits - 1)`: the same scaling).
A ConvTranspose2d layer's weights keep PyTorch's (in, out, 3, 3) layout, as edgebuild's.

Leniency as the toolchain's: it binds the first N weight tensors of the state dict, in the
file's order, to the description's N layers with weights and ignores the rest (a published
checkpoint may hold an older copy of some layers beside the current ones); `checkpoint_layers`
takes the same first N and names what it leaves out. `save_checkpoint` writes the same format
back, so the toolchain (`ai8xize.py --checkpoint-file`) reads what edgebuild exports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray


@dataclass(frozen=True)
class CheckpointLayer:
    name: str  # module name, e.g. conv1
    key: str  # e.g. conv1.op.weight
    weight: NDArray[np.int64]
    bias: NDArray[np.int64] | None  # the raw stored value
    bias_key: str | None
    output_shift: int | None
    weight_bits: int | None


def load_checkpoint(path: Path) -> tuple[dict[Any, Any], str | None]:
    """torch.load with weights_only=True: tensors, plain data and the optimizer classes
    ai8x-training pickles (as class references; no code runs). The state dict is the file's
    own data: any keys and values (checkpoint_layers reads the tensors it needs)."""
    import pickle

    import torch

    display = str(path)
    if not path.is_file():
        raise UserError(Diagnostic(display, "checkpoint file not found"))
    allowed = [getattr(torch.optim, name) for name in (
        "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam")
        if hasattr(torch.optim, name)]
    try:
        with torch.serialization.safe_globals(allowed):
            data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()
        hint = next((line.strip() for line in first if "GLOBAL" in line), first[0] if first else "")
        hint = hint.rstrip(". ")
        raise UserError(Diagnostic(display, f"the checkpoint cannot be loaded safely: {hint}. "
                                            "edgebuild loads tensors, plain data and optimizer "
                                            "classes only; re-save the checkpoint with just "
                                            "`state_dict` and `arch`")) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise UserError(Diagnostic(display, f"not a PyTorch checkpoint: {exc}")) from None
    if isinstance(data, dict) and "state_dict" in data:
        state, arch = data["state_dict"], data.get("arch")
    elif isinstance(data, dict) and data and all(torch.is_tensor(t) for t in data.values()):
        state, arch = data, None
    else:
        raise UserError(Diagnostic(display, "the checkpoint has no `state_dict`"))
    if not isinstance(state, dict):
        raise UserError(Diagnostic(display, "the checkpoint's `state_dict` is not a mapping"))
    return state, arch if isinstance(arch, str) else None


def checkpoint_layers(path: Path, state: dict[Any, Any], wanted: int | None = None
                      ) -> tuple[list[CheckpointLayer], list[str]]:
    """The first `wanted` (None: all) weight tensors' layers in the file's order, and the
    keys of the weight tensors after them (ignored, as the toolchain ignores them)."""
    import numpy as np
    import torch

    display = str(path)
    problems: list[Diagnostic] = []
    layers = []
    ignored: list[str] = []
    taken = 0  # weight tensors bound so far (a 1-D batchnorm weight is no layer: not counted)
    for key, tensor in state.items():
        if not isinstance(key, str) or not key.endswith(".weight") or not torch.is_tensor(tensor):
            continue
        if wanted is not None and taken >= wanted:
            ignored.append(key)
            continue
        taken += tensor.dim() >= 2
        module = key[: -len(".weight")]
        if tensor.dim() < 2:
            problems.append(Diagnostic(display, f"{key} has shape {list(tensor.shape)}: a "
                                                "batchnorm layer? fuse batchnorm into the "
                                                "convolutions before synthesis (the checkpoint "
                                                "must be the quantized one)"))
            continue
        layer = module.rsplit(".", 1)[0] if "." in module else module
        weight = tensor.detach().to(torch.float64).numpy()
        if not np.all(np.isfinite(weight)) or not np.array_equal(weight, np.round(weight)):
            problems.append(Diagnostic(display, f"{key} holds non-integer weights: this is not a "
                                                "quantized checkpoint (run the toolchain's "
                                                "quantize.py, or use the QAT `-q` checkpoint)"))
            continue
        bias_key = f"{module}.bias"
        bias = state.get(bias_key)
        if bias is not None:
            bias = bias.detach().to(torch.float64).numpy()
            if not np.array_equal(bias, np.round(bias)):
                problems.append(Diagnostic(display, f"{bias_key} holds non-integer values: this "
                                                    "is not a quantized checkpoint"))
                continue
            bias = bias.astype(np.int64)
        layers.append(CheckpointLayer(
            layer, key, weight.astype(np.int64), bias, bias_key if bias is not None else None,
            _scalar(state.get(f"{layer}.output_shift")),
            _scalar(state.get(f"{layer}.weight_bits"))))
    if problems:
        raise UserError(problems)
    if not layers:
        raise UserError(Diagnostic(display, "the checkpoint's state_dict holds no layer weights "
                                            "(keys such as conv1.op.weight)"))
    return layers, ignored


def _scalar(tensor: torch.Tensor | None) -> int | None:
    if tensor is None:
        return None
    values = tensor.detach().flatten().tolist()
    return int(round(values[0])) if len(values) == 1 else None


def checkpoint_bytes(arch: str, layers: list[CheckpointLayer]) -> bytes:
    """A quantized checkpoint as ai8x-training's quantize.py writes one, in the file format
    the toolchain's loader reads: `arch` (compared with the description's, case-insensitive),
    `epoch` (the loader refuses a checkpoint without one) and `state_dict` with, per layer in
    the order the description's layers with weights run, `<name>.op.weight` (integers),
    `<name>.op.bias` (the raw value, see the module docstring), `<name>.output_shift`,
    `<name>.weight_bits` and `<name>.bias_bits` as one-element float tensors (how
    ai8x-training stores them). Tensors only: `torch.load(weights_only=True)` reads it."""
    import io

    import torch

    state: dict[str, torch.Tensor] = {}
    for layer in layers:
        state[layer.key] = torch.tensor(layer.weight, dtype=torch.float32)
        if layer.bias is not None:
            state[layer.bias_key or f"{layer.name}.op.bias"] = torch.tensor(
                layer.bias, dtype=torch.float32)
        for suffix, value in (("output_shift", layer.output_shift),
                              ("weight_bits", layer.weight_bits), ("bias_bits", 8)):
            if value is not None:
                state[f"{layer.name}.{suffix}"] = torch.tensor([float(value)])
    buffer = io.BytesIO()
    torch.save({"arch": arch, "epoch": 0, "state_dict": state}, buffer)
    return buffer.getvalue()
