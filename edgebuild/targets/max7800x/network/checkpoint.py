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
from edgebuild.targets.max7800x.network import checkpointfile
from edgebuild.targets.max7800x.network.checkpointfile import shown

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
    ai8x-training pickles (as class references; no code runs), from a file checked first
    (checkpointfile). The state dict is the file's own data: any keys and values
    (checkpoint_layers reads the tensors it needs)."""
    import torch

    display = str(path)
    allowed = [getattr(torch.optim, name) for name in (
        "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam")
        if hasattr(torch.optim, name)]
    data = checkpointfile.load(path, allowed)
    if isinstance(data, dict) and "state_dict" in data:
        state, arch = data["state_dict"], data.get("arch")
    elif isinstance(data, dict) and data and all(torch.is_tensor(t) for t in data.values()):
        state, arch = data, None
    else:
        raise UserError(Diagnostic(display, "the checkpoint has no `state_dict`"))
    if not isinstance(state, dict):
        raise UserError(Diagnostic(display, "the checkpoint's `state_dict` is not a mapping"))
    return state, arch if isinstance(arch, str) else None


def most_values() -> tuple[int, str]:
    """(the most values any MAX7800x device holds, that device): its kernel memory at 1 bit
    per weight and its bias memory. A checkpoint tensor, or the layers' tensors together,
    beyond that is no network a device runs, and is refused before it becomes an array."""
    from edgebuild.targets.max7800x import profile as devices

    def values(name: str) -> int:
        device = devices.profile(name)
        kernel = device.kernel_memory
        words = sum(kernel.words_of(p) for p in range(device.processors))
        return words * kernel.word_bits + device.bias_memory.instances * device.bias_memory.bytes

    return max((values(name), name) for name in devices.DEVICE_NAMES)


def checkpoint_layers(path: Path, state: dict[Any, Any], wanted: int | None = None
                      ) -> tuple[list[CheckpointLayer], list[str]]:
    """The first `wanted` (None: all) weight tensors' layers in the file's order, and the
    keys of the weight tensors after them (ignored, as the toolchain ignores them)."""
    import torch

    reader = _Reader(str(path), state)
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
        layer = reader.layer(key, tensor)
        if layer is not None:
            layers.append(layer)
    if reader.problems:
        raise UserError(reader.problems)
    if not layers:
        raise UserError(Diagnostic(reader.display, "the checkpoint's state_dict holds no layer "
                                                   "weights (keys such as conv1.op.weight)"))
    return layers, ignored


class _Reader:
    """Reads the checkpoint's layers, one weight key at a time, collecting every problem,
    and counting the values made into arrays against `most_values` (so a checkpoint of
    many layers each within it is refused too, before it is all in memory)."""

    def __init__(self, display: str, state: dict[Any, Any]) -> None:
        self.display, self.state = display, state
        self.problems: list[Diagnostic] = []
        self.most, self.device = most_values()
        self.read = 0

    def layer(self, key: str, tensor: torch.Tensor) -> CheckpointLayer | None:
        """The layer of weight `key`, or None (a problem noted)."""
        import numpy as np

        module = key[: -len(".weight")]
        if tensor.dim() < 2:
            self._problem(f"{shown(key)} has shape {list(tensor.shape)[:8]}: a batchnorm "
                          "layer? fuse batchnorm into the convolutions before synthesis (the "
                          "checkpoint must be the quantized one)")
            return None
        weight = self._values(key, tensor)
        if weight is None:
            return None
        if not np.all(np.isfinite(weight)) or not np.array_equal(weight, np.round(weight)):
            self._problem(f"{shown(key)} holds non-integer weights: this is not a quantized "
                          "checkpoint (run the toolchain's quantize.py, or use the QAT `-q` "
                          "checkpoint)")
            return None
        bias_key = f"{module}.bias"
        usable, bias = self._bias(bias_key)
        if not usable:
            return None
        layer = module.rsplit(".", 1)[0] if "." in module else module
        return CheckpointLayer(
            layer, key, weight.astype(np.int64), bias, bias_key if bias is not None else None,
            self._scalar(f"{layer}.output_shift"), self._scalar(f"{layer}.weight_bits"))

    def _bias(self, key: str) -> tuple[bool, NDArray[np.int64] | None]:
        """(False when a problem is noted, the layer's bias or None: it has none)."""
        import numpy as np

        value = self.state.get(key)
        if value is None:
            return True, None
        bias = self._values(key, value)
        if bias is None:
            return False, None
        if not np.array_equal(bias, np.round(bias)):
            self._problem(f"{shown(key)} holds non-integer values: this is not a quantized "
                          "checkpoint")
            return False, None
        return True, bias.astype(np.int64)

    def _values(self, key: str, tensor: Any) -> NDArray[np.float64] | None:
        """The tensor as float64 values, once its size is found within what a device
        holds (alone and with the tensors read before it); None: a problem noted."""
        import torch

        if not torch.is_tensor(tensor):
            self._problem(f"{shown(key)} is a {type(tensor).__name__}, not a tensor")
            return None
        kind = checkpointfile.kind_problem(tensor)
        if kind is not None:
            self._problem(f"{shown(key)} {kind}")
            return None
        size = checkpointfile.size_problem(tensor, self.most - self.read)
        if size is not None:  # stop here: no tensor after it becomes an array
            before = f", and the tensors before it have {self.read:,}" if self.read else ""
            self._problem(f"{shown(key)} {size}; the largest MAX7800x device "
                          f"({self.device}) holds {self.most:,} values in all (kernel memory "
                          f"at 1 bit per weight, and bias memory){before}")
            raise UserError(self.problems)
        self.read += tensor.numel()
        return tensor.detach().to(torch.float64).numpy()

    def _scalar(self, key: str) -> int | None:
        """A one-value tensor's value, rounded (None: missing, or not one finite number)."""
        import math

        import torch

        tensor = self.state.get(key)
        if not torch.is_tensor(tensor) or tensor.numel() != 1 or \
                checkpointfile.kind_problem(tensor) is not None:
            return None
        value = float(tensor.detach().reshape(-1)[0])
        return int(round(value)) if math.isfinite(value) else None

    def _problem(self, message: str) -> None:
        self.problems.append(Diagnostic(self.display, message))


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
