"""Fake-quant (PyTorch, integer mode) == numpy integer reference, exactly, per op, bit
width, activation and rounding mode — on small random tensors that include saturation,
negative rounding ties and the int8 extremes. No training, no compiler."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from edgebuild.core import numerics
from edgebuild.manifest import Manifest
from edgebuild.model import folding, policy, quantized
from edgebuild.ops.operator import Mode
from edgebuild.pipeline.stages.evaluate import fakequant_outputs
from edgebuild.pipeline.stages.quantize import quantize_layers
from edgebuild.train import network


def manifest_for(input_shape, layers, bits=8, rounding="half_up", **qat) -> Manifest:
    return Manifest.model_validate({
        "name": "t", "dataset": {"format": "sklearn-digits"},
        "model": {"input": list(input_shape), "layers": layers},
        "qat": {"weight_bits": bits, **qat}, "quantize": {"rounding": rounding}})


def random_state(manifest: Manifest, rng, weight_scale: float) -> dict:
    layers, _ = folding.fold_layers(manifest.model.layers)
    torch.manual_seed(int(rng.integers(1 << 30)))
    net = network.Net(manifest.model.input, layers, Mode("float"))
    state = network.state_numpy(net)
    return {k: (v * weight_scale * rng.uniform(0.5, 2.0)).astype(np.float32)
            for k, v in state.items()}


def int8_inputs(rng, count: int, shape) -> np.ndarray:
    x = rng.integers(-128, 128, size=(count, *shape))
    x.reshape(count, -1)[:, 0] = -128  # the extremes always occur
    x.reshape(count, -1)[:, -1] = 127
    return x.astype(np.int8)


def compare(manifest: Manifest, state: dict, x) -> tuple[np.ndarray, np.ndarray]:
    layers, _ = folding.fold_layers(manifest.model.layers)
    weights, rows = quantize_layers(layers, state, policy.resolve(manifest.qat, layers), manifest)
    params = {}
    for row in rows:
        bias = weights.get(f"{row.name}.bias")
        params[row.name] = quantized.QuantParams(
            weights[f"{row.name}.weight"].astype(np.int64),
            None if bias is None else bias.astype(np.int64), row.scale_exp, row.bits)
    model = quantized.QuantizedModel(tuple(manifest.model.input), layers, params,
                                     manifest.quantize.rounding.value)
    reference = quantized.run_reference(model, x)
    fake = fakequant_outputs(manifest, model, state, x)
    return reference.reshape(len(x), -1), fake.reshape(len(x), -1)


CASES = {
    "conv1d": ([4, 11], lambda act: [
        {"name": "a", "op": "conv1d", "out": 6, "kernel": 3, "pad": 1, "act": act},
        {"name": "b", "op": "conv1d", "out": 5, "kernel": 3, "stride": 2, "dilation": 2,
         "pool": {"mode": "avg", "size": 2, "stride": 1}, "wide": True}]),
    "conv2d": ([3, 7, 6], lambda act: [
        {"name": "a", "op": "conv2d", "out": 8, "kernel": 3, "pad": 1, "act": act,
         "pool": {"mode": "max", "size": 2, "stride": 1}},
        {"name": "b", "op": "conv2d", "out": 4, "kernel": [3, 2], "stride": [2, 1], "pad": [0, 1],
         "wide": True}]),
    "depthwise": ([6, 6, 5], lambda act: [
        {"name": "a", "op": "conv2d", "out": 6, "kernel": 3, "pad": 1, "groups": 6, "act": act,
         "pool": {"mode": "avg", "size": 2}},
        {"name": "b", "op": "linear", "out": 7, "flatten": True, "wide": True}]),
    "grouped1d": ([6, 12], lambda act: [  # depthwise with channel multiplier 2, then groups 2
        {"name": "a", "op": "conv1d", "out": 12, "kernel": 3, "pad": 1, "groups": 6,
         "act": act},
        {"name": "b", "op": "conv1d", "out": 4, "kernel": 3, "dilation": 2, "groups": 2,
         "wide": True}]),
    "conv_transpose2d": ([4, 5, 4], lambda act: [  # defaults: 3x3, stride 2, pad 1, output_pad 1
        {"name": "a", "op": "conv_transpose2d", "out": 6, "act": act,
         "pool": {"mode": "avg", "size": 2, "stride": 1}},
        {"name": "b", "op": "conv_transpose2d", "out": 4, "kernel": [2, 3], "stride": [1, 2],
         "pad": [0, 1], "output_pad": [0, 1], "dilation": [2, 1], "groups": 2, "wide": True}]),
    "linear": ([20], lambda act: [
        {"name": "a", "op": "linear", "out": 12, "act": act},
        {"name": "b", "op": "linear", "out": 5}]),
    "residual": ([4, 9], lambda act: [
        {"name": "a", "op": "conv1d", "out": 4, "kernel": 3, "pad": 1, "act": act},
        {"name": "b", "op": "conv1d", "out": 4, "kernel": 1, "bias": False},
        {"name": "s", "op": "add", "inputs": ["a", "b"], "act": act},
        {"name": "c", "op": "concat", "inputs": ["s", "input"]},
        {"name": "p", "op": "pool1d", "mode": "avg", "size": 3},
        {"name": "d", "op": "linear", "out": 3, "flatten": True, "wide": True}]),
}


@pytest.mark.parametrize("case,bits,act,rounding", list(itertools.product(
    sorted(CASES), (1, 2, 4, 8), ("none", "relu", "abs"), ("half_up", "floor"))))
def test_fakequant_equals_reference(case, bits, act, rounding):
    shape, layers = CASES[case]
    manifest = manifest_for(shape, layers(act), bits, rounding, bias_bits=12)
    rng = np.random.default_rng(hash((case, bits, act, rounding)) % (1 << 32))
    # A large scale forces saturation at the rails; a small one exercises tiny shifts.
    for weight_scale in (0.3, 4.0):
        state = random_state(manifest, rng, weight_scale)
        reference, fake = compare(manifest, state, int8_inputs(rng, 16, shape))
        assert np.array_equal(reference, fake), f"{case} b{bits} {act} {rounding} x{weight_scale}"


def test_saturation_actually_happens_in_the_cases():
    """Guard against a vacuous exactness test: the big-weight cases do hit both rails."""
    shape, layers = CASES["linear"]
    manifest = manifest_for(shape, [layers("none")[0]] , 8)
    rng = np.random.default_rng(0)
    state = random_state(manifest, rng, 4.0)
    state["a.bias"] = state["a.bias"] * 0 + 0.9  # push the outputs up against the rails
    reference, fake = compare(manifest, state, int8_inputs(rng, 64, shape))
    assert np.array_equal(reference, fake)
    assert (reference == 127).any() and (reference <= -100).any()


def test_shift_quantile_override_clips_weights_exactly():
    shape, layers = CASES["conv2d"]
    manifest = manifest_for(shape, layers("relu"), 4, overrides={"a": {"shift_quantile": 0.5,
                                                                      "weight_bits": 2}})
    rng = np.random.default_rng(3)
    reference, fake = compare(manifest, random_state(manifest, rng, 1.0), int8_inputs(rng, 8, shape))
    assert np.array_equal(reference, fake)


@pytest.mark.parametrize("rounding,expected", [("half_up", [-1, -1, 0, 1, 2, -2]),
                                               ("floor", [-2, -1, -1, 0, 1, -3])])
def test_round_shift_negative_ties(rounding, expected):
    acc = np.array([-3, -2, -1, 1, 3, -5])  # halves: -1.5, -1, -0.5, 0.5, 1.5, -2.5
    assert numerics.np_round_shift(acc, -1, rounding).tolist() == expected


def test_round_shift_left_is_exact_and_saturation_is_last():
    assert numerics.np_round_shift(np.array([-3, 5]), 2, "floor").tolist() == [-12, 20]
    # abs before saturation: |-200| saturates to 127, and rounding precedes abs
    out = numerics.np_requantize(np.array([-400, -5]), -1, "half_up", "abs")
    assert out.tolist() == [127, 2]  # -5/2 = -2.5 -> floor(-2.0) = -2 -> abs 2


@pytest.mark.parametrize("bits,limits", [(8, (-128, 127)), (4, (-8, 7)), (2, (-2, 1)),
                                         (1, (-1, 0))])
def test_weight_limits(bits, limits):
    assert numerics.weight_limits(bits) == limits
    w = np.linspace(-3, 3, 101)
    q = numerics.np_quantize_weights(w, 1, bits)
    assert q.min() == limits[0] and q.max() == limits[1]


def test_batchnorm_folding_is_equivalent():
    layers = [{"name": "c", "op": "conv2d", "out": 5, "kernel": 3, "pad": 1, "bias": False},
              {"name": "bn", "op": "batchnorm", "act": "relu"},
              {"name": "d", "op": "dropout", "p": 0.3},
              {"name": "fc", "op": "linear", "out": 4, "flatten": True, "wide": True}]
    manifest = manifest_for([2, 5, 5], layers)
    torch.manual_seed(0)
    net = network.Net(manifest.model.input, manifest.model.layers, Mode("float", clamp=False))
    with torch.no_grad():
        bn = net.blocks["bn"]
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.2, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.3, 0.3)
    net.eval()
    folded_layers, alias = folding.fold_layers(manifest.model.layers)
    assert [layer.op for layer in folded_layers] == ["conv2d", "linear"]
    assert folded_layers[0].act.value == "relu" and folded_layers[0].bias
    assert folded_layers[1].inputs == ("c",) and alias == {"bn": "c", "d": "c"}
    folded = network.Net(manifest.model.input, folded_layers, Mode("float", clamp=False))
    network.load_numpy(folded, folding.fold_state(network.state_numpy(net),
                                                  manifest.model.layers))
    folded.eval()
    x = torch.randn(6, 2, 5, 5)
    with torch.no_grad():
        assert torch.allclose(net(x), folded(x), atol=1e-5)


def test_batchnorm_folds_into_a_grouped_transposed_conv():
    """ConvTranspose2d weights are (in, out/groups, kh, kw): BN scales axis 1 per group."""
    layers = [{"name": "u", "op": "conv_transpose2d", "out": 4, "groups": 2, "bias": False},
              {"name": "bn", "op": "batchnorm", "act": "relu"}]
    manifest = manifest_for([2, 3, 3], layers)
    torch.manual_seed(1)
    net = network.Net(manifest.model.input, manifest.model.layers, Mode("float", clamp=False))
    with torch.no_grad():
        bn = net.blocks["bn"]
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.2, 2.0)
        bn.weight.copy_(torch.tensor([0.5, 1.0, 2.0, -1.5]))
        bn.bias.uniform_(-0.3, 0.3)
    net.eval()
    folded_layers, _ = folding.fold_layers(manifest.model.layers)
    folded = network.Net(manifest.model.input, folded_layers, Mode("float", clamp=False))
    network.load_numpy(folded, folding.fold_state(network.state_numpy(net),
                                                  manifest.model.layers))
    folded.eval()
    x = torch.randn(5, 2, 3, 3)
    with torch.no_grad():
        assert net.forward_all(x)[net.wiring[-1][0]].shape == (5, 4, 6, 6)
        assert net(x).shape == (5, 144)  # the output per sample, flat (as the C unloads it)
        assert torch.allclose(net(x), folded(x), atol=1e-5)


@pytest.mark.parametrize("method,expected", [
    ("max", 4.0),                     # max |w|
    ("scale", 4.0 * 0.5),             # max |w| x scale
    ("stddev", 2.0 * np.std([-4.0, 1.0, 0.5, -0.5, 2.0, 1.0])),  # stddevs x std(w)
    ("avgmax", (4.0 + 2.0) / 2),      # mean over output channels of each channel's max |w|
])
def test_post_training_clip_methods(method, expected):
    from edgebuild.manifest import Quantize
    from edgebuild.pipeline.stages.quantize import threshold

    weights = np.array([[-4.0, 1.0, 0.5], [-0.5, 2.0, 1.0]])  # two output channels
    config = Quantize(clip=method, scale=0.5, stddevs=2.0)
    assert threshold(weights, config, 1.0, qat=False) == pytest.approx(expected)
    # with QAT the scale always follows the trained weights (a quantile of |w|)
    assert threshold(weights, config, 1.0, qat=True) == pytest.approx(4.0)
