"""Accelerator targets (MAX7800x-style, see docs/targets/max7800x.md): the checks a manifest must
pass before any training, and the placement the plan stage records.

The order matters for the messages: the device's number format and operator limits are
checked first (all reported at once); placement (processors, data/kernel/bias memories)
is only attempted for a model the device can run at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.model import graph as graphs
from edgebuild.targets.max7800x import profile as devices

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from edgebuild.manifest import Layer, Manifest
    from edgebuild.targets.max7800x.hwlayer import HwLayer
    from edgebuild.targets.max7800x.limits import ManifestPath
    from edgebuild.targets.max7800x.placement import Placement
    from edgebuild.targets.max7800x.records import Profile


def number_rules(manifest: Manifest, profile: Profile) -> list[tuple[ManifestPath, str]]:
    """Manifest settings that contradict the device's fixed number format."""
    numbers, name = profile.numbers, profile.name
    found: list[tuple[ManifestPath, str]] = []
    if "rounding" in manifest.quantize.model_fields_set and \
            manifest.quantize.rounding.value != numbers.rounding:
        found.append((("quantize", "rounding"), (
            f"{name} rounds {numbers.rounding} (its arithmetic is fixed); remove "
            "quantize.rounding or choose a CPU target")))
    bias = (f"{name} stores a bias as a {numbers.bias_bits}-bit value added as "
            f"b x {1 << numbers.bias_scale_log2}; remove bias_bits")
    if "bias_bits" in manifest.qat.model_fields_set:
        found.append((("qat", "bias_bits"), bias))
    for layer, override in manifest.qat.overrides.items():
        if override.bias_bits is not None:
            found.append((("qat", "overrides", layer, "bias_bits"), bias))
    return found


def unsupported_ops(manifest: Manifest, layers: tuple[Layer, ...]
                    ) -> list[tuple[ManifestPath, str]]:
    """The layers whose op the device has no hardware operation for (operators.OPERATORS),
    at their `op` field."""
    from edgebuild.targets.max7800x.hwlayer import manifest_index
    from edgebuild.targets.max7800x.operators import unsupported

    index = manifest_index(manifest.model.layers)
    found: list[tuple[ManifestPath, str]] = []
    for layer in layers:
        reason = unsupported(layer)
        if reason is not None:
            path = ("model", "layers", index[layer.name], "op") if layer.name in index else (
                "model", "layers")
            found.append((path, f"layer {layer.name!r}: op {layer.op!r} cannot run on "
                          f"{manifest.target.device.value}: {reason}"))
    return found


def layout(manifest: Manifest, layers: tuple[Layer, ...], bits: dict[str, int],
           weights: Mapping[str, np.ndarray] | None = None
           ) -> tuple[tuple[HwLayer, ...], Placement | None, list[tuple[ManifestPath, str]]]:
    """(hardware layers, placement or None, problems) for an accelerator manifest; with the
    quantized `weights` (the plan stage, the program), equal tensors share memory and
    all-zero biases take none, as in the program (placement.sharing)."""
    from edgebuild.targets.max7800x import limits, mapping, placement

    refused = unsupported_ops(manifest, layers)
    if refused:
        return (), None, refused
    profile = devices.profile(manifest.target.device.value)
    graph, _ = graphs.build(manifest.model.input, layers)
    assert graph is not None  # the folded layers of a valid manifest build
    hw = mapping.map_layers(layers, graph, bits, placed=manifest.placement,
                            processors=profile.processors, read_gap=profile.limits.read_gap)
    found = [(p.path, p.text) for p in limits.check(hw, manifest, profile)]
    if found:
        return hw, None, found
    sharing = None
    if weights is not None:
        from edgebuild.targets.max7800x.placement.kernelmemory import streamed
        from edgebuild.targets.max7800x.program import duplicates
        streams = [layer.name in manifest.placement and manifest.placement[layer.name].streaming
                   for layer in hw]
        sharing = duplicates.sharing(hw, weights, streamed(streams))
    result, problems = placement.resolve(hw, manifest, profile, sharing)
    return hw, result, [(p.path, p.text) for p in problems]


def problems(manifest: Manifest, layers: tuple[Layer, ...], bits: dict[str, int]
             ) -> list[tuple[ManifestPath, str]]:
    """Every rule of the target device the manifest breaks, as (path, message)."""
    device = manifest.target.device.value
    if not devices.is_accelerator(device):
        if manifest.placement:
            return [(("placement",), (
                f"placement applies to accelerator devices ({', '.join(devices.DEVICE_NAMES)}); "
                f"target.device is {device}"))]
        return []
    found = number_rules(manifest, devices.profile(device))
    _, _, placed = layout(manifest, layers, bits)
    return found + placed
