"""Binding the checkpoint to the description: each layer with weights is checked against the
checkpoint layer in the same position (shapes, processor counts, weight width, output
shift), and its integer weights are taken in edgebuild's form (see `checkpoint` for the
arithmetic).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from edgebuild.targets.max7800x.network.built import Built
from edgebuild.targets.max7800x.network.checkpoint import CheckpointLayer
from edgebuild.targets.max7800x.network.hardware import LayerDocument
from edgebuild.targets.max7800x.network.spec import Reporter, Spec
from edgebuild.targets.max7800x.network.values import popcount

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


class Binder:
    """Binds the layers with weights, in order, to `bound` (spec position -> checkpoint
    layer). After the first layer that does not match its checkpoint layer, later ones are
    not checked: the description and the checkpoint are out of step, and every later
    message would repeat that."""

    def __init__(self, report: Reporter, built: Built, bound: dict[int, CheckpointLayer],
                 total_shift: tuple[int, int]):
        self.report = report
        self.built = built
        self.bound = bound
        self.total_shift = total_shift  # the device's range of output_shift + 8 - weight_bits
        self.stopped = False

    def bind(self, p: int, spec: Spec, layer: LayerDocument) -> bool:
        """Check the edgebuild layer just emitted for spec position `p` and take its
        weights (without a checkpoint: note what the description says about them)."""
        if p not in self.bound:
            self._unbound(spec, layer)
            return True
        if self.stopped:
            return False
        ck = self.bound[p]
        problems = self._mismatches(spec, layer, ck)
        if problems:
            what = (f"is bound to checkpoint layer {ck.name!r} ({ck.key} "
                    f"{list(ck.weight.shape)}), but")
            for problem in problems:
                self.report.layer_error(spec, None, f"{layer['op']} layer {what} {problem}; "
                                        "the description and the checkpoint do not match")
            self.stopped = True
            return False
        return self._quantize(spec, layer, ck)

    def _unbound(self, spec: Spec, layer: LayerDocument) -> None:
        """Without a checkpoint, `quantization` becomes a QAT weight width, and an
        `output_shift` is ignored (edgebuild chooses shifts when it quantizes)."""
        if spec.quantization is not None and spec.quantization != 8:
            self.built.weight_bits[layer["name"]] = spec.quantization
        if spec.output_shift is not None and not spec.wide:
            self.built.shifts_ignored.append(layer["name"])

    def _mismatches(self, spec: Spec, layer: LayerDocument, ck: CheckpointLayer) -> list[str]:
        """What differs between the layer and its checkpoint layer: the weights' shape
        first; only when that fits, the processor maps and `out_channels`."""
        w = ck.weight
        in_name = (layer.get("inputs") or [self.built.layers[-2]["name"]
                                           if len(self.built.layers) > 1 else "input"])[0]
        in_shape = self.built.shapes[in_name]
        transposed = layer["op"] == "conv_transpose2d"  # weights (in, out / groups, kh, kw)
        w_out = w.shape[1] * spec.groups if transposed else w.shape[0]
        problems = _shape_problems(spec, layer, w, in_name, in_shape)
        if not problems:
            problems = _count_problems(spec, in_shape[0], w_out)
        return problems

    def _quantize(self, spec: Spec, layer: LayerDocument, ck: CheckpointLayer) -> bool:
        """The layer's weights, weight width and shift, and its bias as edgebuild stores
        it (b x 128 of the 8-bit value the device adds)."""
        import numpy as np

        bits = self._weight_bits(spec, ck)
        if bits is None:
            return False
        shift = self._shift(spec, ck, bits)
        if shift is None:
            return False
        name = layer["name"]
        arrays = self.built.weights
        arrays[f"{name}.weight"] = ck.weight.astype(np.int8)
        arrays[f"{name}.scale_exp"] = np.array(shift, dtype=np.int64)
        arrays[f"{name}.bits"] = np.array(bits, dtype=np.int64)
        if ck.bias is None:
            return True
        stored_bits = ck.weight_bits if ck.weight_bits is not None else 8
        bias8 = np.floor_divide(ck.bias, 1 << (stored_bits - 1))
        if bias8.min() < -128 or bias8.max() > 127:
            self.report.layer_error(spec, None, (
                f"checkpoint bias {ck.bias_key} spans [{bias8.min()}, {bias8.max()}] after "
                f"division by 2^{stored_bits - 1}; the device stores 8-bit biases "
                "[-128, 127]"))
            return False
        arrays[f"{name}.bias"] = (bias8 * 128).astype(np.int32)
        return True

    def _weight_bits(self, spec: Spec, ck: CheckpointLayer) -> int | None:
        """The layer's weight width as the toolchain decides it: the description's
        `quantization` if given (a checkpoint trained at another width is taken at it when
        its weights fit, with a warning), else 1 for weights that are all zero, else the
        checkpoint's `weight_bits`, else 8; None after reporting weights outside the
        width."""
        from edgebuild.core.numerics import weight_limits

        bits = ck.weight_bits
        if bits is not None and bits not in (1, 2, 4, 8):
            self.report.layer_error(spec, None, f"checkpoint {ck.name}.weight_bits is {bits}; "
                                    "edgebuild imports 1, 2, 4 or 8-bit weights")
            return None
        if spec.quantization is not None:
            if bits is not None and spec.quantization != bits:
                if not _fits(ck.weight, spec.quantization):
                    self.report.layer_error(spec, "quantization", (
                        f"`quantization: {spec.quantization}` but the checkpoint's {ck.name} "
                        f"was trained with {bits}-bit weights"))
                    return None
                self.report.layer_warn(spec, "quantization", (
                    f"`quantization: {spec.quantization}` but the checkpoint's {ck.name} was "
                    f"trained with {bits}-bit weights; its weights fit, so they are taken as "
                    f"{spec.quantization}-bit weights (as the toolchain does)"))
            bits = spec.quantization
        elif not ck.weight.any():
            self.report.layer_warn(spec, None, (
                f"every weight of {ck.key} is zero; stored as 1-bit weights, as the "
                "toolchain stores them (the output shift follows that width)"))
            bits = 1
        if bits is None:
            bits = 8
            self.report.layer_warn(spec, None, f"the checkpoint has no {ck.name}.weight_bits; "
                                   "8-bit weights assumed, as the toolchain assumes them "
                                   "(give `quantization` to say otherwise)")
        low, high = weight_limits(bits)
        if ck.weight.min() < low or ck.weight.max() > high:
            self.report.layer_error(spec, None, (
                f"checkpoint weights {ck.key} span [{ck.weight.min()}, {ck.weight.max()}], "
                f"outside the {bits}-bit range [{low}, {high}]"))
            return None
        return bits

    def _shift(self, spec: Spec, ck: CheckpointLayer, bits: int) -> int | None:
        """The checkpoint's output shift, overridden by `output_shift` as in the toolchain;
        None after reporting a device shift out of range (a 32-bit output is not
        shifted)."""
        shift = ck.output_shift if ck.output_shift is not None else 0
        if spec.output_shift is not None and spec.output_shift != shift:
            self.report.layer_warn(spec, "output_shift", (
                f"`output_shift: {spec.output_shift}` overrides the checkpoint's {shift} (as in "
                "the toolchain)"))
            shift = spec.output_shift
        total = shift + 8 - bits
        low, high = self.total_shift
        if not (low <= total <= high) and not spec.wide:
            key = "output_shift" if spec.output_shift is not None else None
            self.report.layer_error(spec, key, (
                f"output shift {shift} with {bits}-bit weights gives a device shift of {total}, "
                f"outside {list(self.total_shift)}"))
            return None
        return shift


def _shape_problems(spec: Spec, layer: LayerDocument, w: NDArray[np.int64], in_name: str,
                    in_shape: tuple[int, ...]) -> list[str]:
    """The weights' kind, kernel and input size against the layer and what feeds it."""
    kind = {4: "conv2d", 3: "conv1d", 2: "linear"}.get(w.ndim, f"{w.ndim}-D")
    transposed = layer["op"] == "conv_transpose2d"
    w_in = w.shape[0] if transposed else w.shape[1] * spec.groups
    if kind != ("conv2d" if transposed else layer["op"]):
        return [f"the description makes it {layer['op']} and the checkpoint layer is {kind}"]
    if kind != "linear":
        kernel = layer["kernel"] if isinstance(layer["kernel"], tuple) else \
            ((layer["kernel"],) * (w.ndim - 2))
        if tuple(w.shape[2:]) != tuple(kernel):
            return [f"its kernel is {'x'.join(map(str, kernel))} in the description "
                    f"and {'x'.join(map(str, w.shape[2:]))} in the checkpoint"]
        if w_in != in_shape[0]:
            return [f"the checkpoint layer takes {w_in} input "
                    f"channels and the description feeds it {in_shape[0]} "
                    f"(from {in_name})"]
        return []
    if w.shape[1] != math.prod(in_shape):
        return [f"the checkpoint layer takes {w.shape[1]} inputs and the "
                f"description feeds it {math.prod(in_shape)} ({list(in_shape)} "
                f"from {in_name}{', flattened' if len(in_shape) > 1 else ''})"]
    return []


def _count_problems(spec: Spec, in_c: int, w_out: int) -> list[str]:
    """The processor maps and `out_channels` against the checkpoint's channel counts."""
    problems = []
    if popcount(spec.processors) > in_c:
        problems.append(f"its processors {spec.processors:#018x} "
                        f"({popcount(spec.processors)}) expect more than the {in_c} "
                        "input channels the checkpoint gives")
    if spec.output_processors is not None and popcount(spec.output_processors) > w_out:
        problems.append(f"its output_processors {spec.output_processors:#018x} "
                        f"({popcount(spec.output_processors)}) expect more than the "
                        f"{w_out} output channels the checkpoint gives")
    if spec.out_channels is not None and spec.out_channels != w_out:
        problems.append(f"out_channels is {spec.out_channels} and the checkpoint gives "
                        f"{w_out}")
    return problems


def _fits(weight: NDArray[np.int64], bits: int) -> bool:
    from edgebuild.core.numerics import weight_limits

    low, high = weight_limits(bits)
    return bool(weight.min() >= low and weight.max() <= high)
