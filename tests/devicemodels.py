"""Manifest documents and the hardware-layer view shared by the device tests
(test_limits.py, test_placement.py)."""

from __future__ import annotations

from edgebuild.manifest import Manifest
from edgebuild.model import graph as graphs
from edgebuild.model import policy
from edgebuild.model.folding import fold_layers
from edgebuild.targets.max7800x import profile as device
from edgebuild.targets.max7800x.mapping import map_layers


def conv(name: str, out: int, **fields) -> dict:
    return {"name": name, "op": "conv2d", "out": out, "kernel": 3, "pad": 1, "act": "relu",
            **fields}


def model(layers: list[dict], input_shape=(8, 8, 8), device_name: str = "max78000",
          **sections) -> dict:
    return {"name": "m", "model": {"input": list(input_shape), "layers": layers},
            "target": {"device": device_name}, **sections}


def hardware(document: dict, placed=()):
    """(manifest, hardware layers, profile) of a manifest document."""
    manifest = Manifest.model_validate(document)
    layers, _ = fold_layers(manifest.model.layers)
    graph, problems = graphs.build(manifest.model.input, layers)
    assert not problems, problems
    bits = {name: p.weight_bits for name, p in policy.resolve(manifest.qat, layers).items()}
    profile = device.profile(manifest.target.device.value)
    hw = map_layers(layers, graph, bits, placed, processors=profile.processors,
                    read_gap=profile.limits.read_gap)
    return manifest, hw, profile


def resolve(document: dict, placed=()):
    """(hardware layers, limit problems, placement or None, placement problems)."""
    from edgebuild.targets.max7800x import limits, placement

    manifest, hw, profile = hardware(document, placed)
    return hw, limits.check(hw, manifest, profile), *placement.resolve(hw, manifest, profile)


def placed_ok(document: dict, placed=()):
    """The placement of a document that must have no problem at all."""
    _, found, result, problems = resolve(document, placed)
    assert found == [] and problems == [], found + problems
    return result
