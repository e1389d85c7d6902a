"""Assemble the accelerator program of a placed, quantized model.

Inputs are edgebuild's own records: the hardware layers and their placement
(targets.max7800x.layout), the integer weights as the quantize stage stores them
(`<layer>.weight` int8 per weight, `<layer>.bias` = int8 bias x 128, `<layer>.scale_exp` =
the output shift), the manifest layers (for activations), one sample input (C, H, W) and the
integer reference's output of the last layer for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from edgebuild.targets.max7800x.program import bias as biases
from edgebuild.targets.max7800x.program import duplicates, sequence
from edgebuild.targets.max7800x.program import kernels as kmem
from edgebuild.targets.max7800x.program import stream as streams
from edgebuild.targets.max7800x.program.data import expected_words, input_words
from edgebuild.targets.max7800x.program.device import Device, device
from edgebuild.targets.max7800x.program.geometry import (
    Geometry,
    device_weights,
    geometry,
)
from edgebuild.targets.max7800x.program.program import Program
from edgebuild.targets.max7800x.program.registers import (
    LayerContext,
    Write,
    init_writes,
    layer_writes,
    start_writes,
)

if TYPE_CHECKING:
    from edgebuild.manifest import Layer, Manifest
    from edgebuild.targets.max7800x.hwlayer import HwLayer
    from edgebuild.targets.max7800x.placement import Placement
    from edgebuild.targets.max7800x.records import Profile


def for_manifest(manifest: Manifest, bits: Mapping[str, int],
                 weights: Mapping[str, np.ndarray], sample: np.ndarray,
                 expected: np.ndarray) -> Program:
    """The program of a MAX7800x manifest: its layers placed as the plan stage places them
    (`bits`: each layer's weight width), `weights` as quantize stores them, one sample
    input (C, H, W) and the integer reference's output for it. A manifest the plan stage
    refused (placement problems) is a ValueError here."""
    from edgebuild.model import folding
    from edgebuild.targets.max7800x import layout
    from edgebuild.targets.max7800x import profile as devices

    layers, _ = folding.fold_layers(manifest.model.layers)
    hw, placed, problems = layout.layout(manifest, layers, dict(bits), weights)
    if problems or placed is None:
        raise ValueError(f"{manifest.name}: cannot place the layers: {problems}")
    profile = devices.profile(manifest.target.device.value)
    missing = [f"layer {layer.name!r}: {what}" for layer in hw if (what := not_generated(layer))]
    if missing:
        raise NotImplementedError("; ".join(missing))
    hw, plans = sequence.run_order(hw, placed.layers)
    return generate(device(profile.family), profile, hw, replace(placed, layers=plans),
                    {layer.name: layer for layer in layers}, weights, sample, expected)


NOT_GENERATED_OPS = ("reshape",)


def not_generated(layer: HwLayer) -> str | None:
    """What the program generator cannot program yet in a layer the accelerator can run
    (None: nothing). Refusing is better than a program that computes something else."""
    if layer.op in NOT_GENERATED_OPS:
        return f"{layer.op} (reshape layers)"
    if layer.op != "conv1d" and any(d != 1 for d in layer.dilation or ()):
        return f"dilated {layer.op}: the device allows it, but the vendor's tool refuses " \
            "`dilation` > 1 except for conv1d, so there are no register values to match " \
            "(a known limit)"
    if layer.groups != 1 and not layer.depthwise:
        return "grouped convolution other than depthwise"
    return None


def _relu(layers: Mapping[str, Layer], name: str) -> bool:
    act = getattr(layers.get(name), "act", None)
    return getattr(act, "value", act) == "relu"


def geometries(hw: tuple[HwLayer, ...], placement: Placement, layers: Mapping[str, Layer],
               weights: Mapping[str, np.ndarray]) -> list[Geometry]:
    out = []
    for i, (layer, plan) in enumerate(zip(hw, placement.layers, strict=True)):
        # the register holds the stored shift plus 8 - weight width: a narrower weight's
        # products are that much smaller (the vendor's checkpoint loader adds it likewise)
        shift = int(weights.get(f"{layer.name}.scale_exp", np.array(0))) \
            + 8 - (layer.weight_bits or 8)
        out.append(geometry(layer, plan, shift, _relu(layers, layer.name), first=i == 0))
    return streams.padded_1x1(out)


def groups_used(layers: list[Geometry]) -> list[int]:
    """Quadrants any layer reads with, or the last layer writes to."""
    used = layers[-1].output_processors
    for g in layers:
        used |= g.processors
    return [q for q in range(4) if used >> 16 * q & 0xFFFF]


def generate(dev: Device, profile: Profile, hw: tuple[HwLayer, ...], placement: Placement,
             layers: Mapping[str, Layer], weights: Mapping[str, np.ndarray],
             sample: np.ndarray, expected: np.ndarray) -> Program:
    geo = geometries(hw, placement, layers, weights)
    groups = groups_used(geo)
    kernel_list = [device_weights(g, weights[f"{g.name}.weight"])
                   if layer.has_weights and f"{g.name}.weight" in weights else None
                   for g, layer in zip(geo, hw, strict=True)]
    widths = tuple(profile.kernel_memory.words_of(p) for p in range(profile.processors))
    memory, kslots = kmem.place(geo, kernel_list, widths, shared_kernels(placement))
    bias_list = [duplicates.stored_bias(weights.get(f"{g.name}.bias")) for g in geo]
    bslots = [plan.bias for plan in placement.layers]
    image = biases.image(geo, bias_list, bslots)
    stream = streams.streams(dev, geo)
    configure = tuple((g.name, tuple(layer_writes(dev, g, LayerContext(
        i, kslots[i], biases.register_view(bslots[i]), groups, stream[i]))))
        for i, g in enumerate(geo))
    last = geo[-1]
    out = expected.reshape(last.out_channels, *last.out_dim)
    fifo = streams.uses_fifo(geo)
    return Program(
        init=tuple(init_writes(dev, groups, len(geo), any(f"{g.name}.bias" in weights for g in geo),
                               fifo)),
        configure=configure,
        start=tuple(start_writes(dev, groups, fifo, geo[0].big_data)), kernels=_kernel_runs(dev, memory),
        bias=tuple((dev.bias_address(q), tuple(values)) for q, values in sorted(image.items())),
        input=() if fifo else tuple((a, tuple(w)) for a, w in input_words(dev, geo[0], sample)),
        fifo_setup=(Write(dev.fifo_control, streams.fifo_control(dev, geo[0]), "FIFO control"),)
        if fifo else (),
        fifo=tuple(tuple(w) for w in streams.fifo_words(geo[0], sample)) if fifo else (),
        expected=tuple((a, v, m) for a, (v, m) in sorted(expected_words(dev, last, out).items())),
        summary=tuple(g.description() for g in geo),
        output_shape=(last.out_channels, *last.out_dim), output_bits=last.output_width,
        input_shape=(geo[0].in_channels, *_plane(sample)),
        input_format="CHW" if geo[0].big_data else "HWC")


def shared_kernels(placement: Placement) -> tuple[int, ...]:
    """Per layer, the layer whose kernels it runs with, as the placement decided it
    (placement.sharing: equal kernels of equal width on the same processors stored once):
    the first layer with the same slot on the same processors (two layers' own slots never
    share a column)."""
    plans = placement.layers
    return tuple(next((j for j in range(i) if plan.kernel is not None
                       and plans[j].kernel == plan.kernel
                       and plans[j].processors == plan.processors), i)
                 for i, plan in enumerate(plans))


def _plane(sample: np.ndarray) -> tuple[int, int]:
    """(rows, columns) of a sample (C, H, W), (C, L) or (C,)."""
    rest = tuple(int(v) for v in sample.shape[1:]) + (1, 1)
    return rest[0], rest[1]


def _kernel_runs(dev: Device, memory: kmem.KernelMemory
                 ) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Runs of consecutive used columns per processor, each as the loader's stream: the 9
    bytes of every kernel back to back, big-endian in 32-bit words, the last word padded."""
    runs = []
    for p, columns in memory.words().items():
        chunk: list[list[int]] = []
        start = previous = -2
        for col, data in columns:
            if col != previous + 1 and chunk:
                runs.append((dev.kernel_address(p, start), _stream(chunk)))
                chunk = []
            if not chunk:
                start = col
            chunk.append(data)
            previous = col
        if chunk:
            runs.append((dev.kernel_address(p, start), _stream(chunk)))
    return tuple(runs)


def _stream(kernels: list[list[int]]) -> tuple[int, ...]:
    flat = [b for kernel in kernels for b in kernel]
    flat += [0] * (-len(flat) % 4)
    return tuple(int.from_bytes(bytes(flat[i:i + 4]), "big") for i in range(0, len(flat), 4))
