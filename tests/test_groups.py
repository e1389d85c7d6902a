"""Grouped and depthwise convolution (`groups:` on conv1d/conv2d) through every facet of the
operator record: shapes, float and fake-quant vs the integer reference (tests/test_numerics),
C kernels (tests/test_kernels*.py, tests/test_linking.py), tiling, on-device training
(tests/test_ondevice.py: a depthwise layer trains), and here: the weight layout, the tiler's
windows and training geometry, the MAX7800x rules of each device profile, placement, and
the vendor's network description out and back in.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from edgebuild.core import document as yamlsource
from edgebuild.manifest import reading
from edgebuild.memory import tiling
from edgebuild.model import folding, policy
from edgebuild.model import graph as graphs
from edgebuild.ondevice.operators import OPERATORS as TRAINING
from edgebuild.ops import OPS
from edgebuild.targets.max7800x import layout, network

SEPARABLE_1D = [
    {"name": "c1", "op": "conv1d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
    {"name": "dw", "op": "conv1d", "out": 16, "groups": 16, "kernel": 3, "pad": 1, "act": "relu"},
    {"name": "pw", "op": "conv1d", "out": 16, "kernel": 1, "act": "relu"},
    {"name": "fc", "op": "linear", "out": 4, "flatten": True}]


def layer(spec: dict):
    return OPS[spec["op"]].params.model_validate(spec)


@pytest.mark.parametrize("spec,in_shape,weights,macs", [
    ({"name": "d", "op": "conv2d", "out": 8, "groups": 8, "kernel": 3, "pad": 1}, (8, 5, 6),
     (8, 1, 3, 3), 8 * 30 * 9),
    ({"name": "m", "op": "conv2d", "out": 16, "groups": 8, "kernel": 3, "pad": 1}, (8, 5, 6),
     (16, 1, 3, 3), 16 * 30 * 9),  # channel multiplier 2
    ({"name": "g", "op": "conv1d", "out": 6, "groups": 2, "kernel": 5, "pad": 2}, (4, 11),
     (6, 2, 5), 6 * 11 * 2 * 5),
])
def test_weight_layout_and_macs(spec, in_shape, weights, macs):
    op, value = OPS[spec["op"]], layer(spec)
    out = op.out_shape(value, [in_shape])
    assert op.weights.shape(value, in_shape) == weights
    assert op.macs(value, [in_shape], out) == macs
    assert op.param_count(value, [in_shape]) == weights[0] * weights[1] * \
        (weights[2] * weights[3] if len(weights) == 4 else weights[2]) + spec["out"]


def test_groups_must_divide_both_channel_counts():
    from edgebuild.core.geometry import ShapeError

    with pytest.raises(ShapeError, match="groups=3 must divide"):
        OPS["conv2d"].out_shape(layer({"name": "d", "op": "conv2d", "out": 8, "groups": 3}),
                                [(8, 5, 5)])


def test_tiles_and_training_kernels_see_the_groups():
    value = layer({"name": "d", "op": "conv1d", "out": 32, "groups": 16, "kernel": 3,
                   "pad": 1})
    (key, window), = OPS["conv1d"].windows(value, [(16, 40)], (32, 40))
    assert key == "tile" and window.groups == 16 and (window.in_h, window.in_w) == (40, 1)
    tile = tiling.choose("d", window, 300, True)
    assert tile is not None and tile.tiled and tile.channels % tiling.step(window) == 0
    geometry = TRAINING.for_op("conv1d").geometry(value, [(16, 40)], (32, 40))
    assert geometry.conv.groups == 16 and geometry.conv.in_c == 16


def manifest_text(device: str, layers: list[dict]) -> str:
    return textwrap.dedent("""\
        name: sep
        dataset: {format: sklearn-digits}
        model:
          input: [16, 32]
          layers:
        """) + "".join(f"    - {spec}\n".replace("'", "").replace("True", "true")
                       for spec in layers) + f"target: {{device: {device}}}\n"


def checked(tmp_path: Path, device: str, layers: list[dict] = SEPARABLE_1D):
    path = tmp_path / "sep.yaml"
    path.write_text(manifest_text(device, layers))
    document = yamlsource.load(path)
    manifest = reading.parse(document)
    return manifest


def test_max78000_refuses_depthwise_with_its_profile_rule(tmp_path):
    manifest = checked(tmp_path, "max78000")
    folded, _ = folding.fold_layers(manifest.model.layers)
    found = layout.problems(manifest, folded, {"c1": 8, "dw": 8, "pw": 8, "fc": 8})
    assert [(path, message) for path, message in found if path[-1] == "groups"] == [(
        ("model", "layers", 1, "groups"), "layer 'dw': groups 16 with 16 input and 16 output "
        "channels is not supported on max78000 (allowed: 1); use groups: 1 (a dense "
        "convolution); max78002 runs this layer as it is (`target.device: max78002`)")]


def test_max78002_places_depthwise_and_the_description_round_trips(tmp_path):
    manifest = checked(tmp_path, "max78002")
    folded, _ = folding.fold_layers(manifest.model.layers)
    bits = {name: p.weight_bits for name, p in policy.resolve(manifest.qat, folded).items()}
    _, placed, problems = layout.layout(manifest, folded, bits)
    assert problems == [] and placed is not None
    plans = {plan.name: plan for plan in placed.layers}
    assert plans["dw"].kernel.words == 1  # one 3-tap kernel per processor: its own channel
    assert plans["pw"].kernel.words == 2  # 16 one-tap kernels per processor
    text = network.export_network(manifest, placed.to_json())
    assert "    groups: 16\n" in text
    exported = tmp_path / "exported.yaml"
    exported.write_text(text)
    again = network.import_network(exported, input_shape=(16, 32), device="max78002",
                                   out_dir=tmp_path / "again", name="sep")
    reimported = reading.parse(yamlsource.load(again.manifest))
    layers = {spec.name: spec for spec in reimported.model.layers}
    assert (layers["dw"].op, layers["dw"].groups, layers["dw"].out) == ("conv1d", 16, 16)
    graph, problems = graphs.build(reimported.model.input, reimported.model.layers)
    assert not problems and graph.macs == graphs.build(manifest.model.input, folded)[0].macs
