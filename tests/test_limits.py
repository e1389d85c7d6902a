"""Hardware layers (targets/max7800x/mapping.py) and device operator limits (limits.py).

Manifests are Python dicts; every limit comes from the device profiles, so the expected
messages quote the profile's figures for max78000 and max78002.
"""

from __future__ import annotations

import copy

import pytest
from devicemodels import conv, hardware, model

from edgebuild.targets.max7800x import limits
from edgebuild.targets.max7800x.hwlayer import manifest_index

# The mnist-extrasmall network of the reference models (ai85netextrasmall).
MNIST = {
    "name": "mnist",
    "model": {"input": [1, 28, 28], "layers": [
        conv("conv1", 8, bias=False),
        conv("conv2", 8, pad=2, bias=False, pool={"mode": "max", "size": 2, "stride": 2}),
        conv("conv3", 8, bias=False, pool={"mode": "max", "size": 4, "stride": 4}),
        {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]},
    "target": {"device": "max78000"},
}


def check(document: dict, profile=None) -> list[limits.Problem]:
    manifest, hw, default = hardware(document)
    return limits.check(hw, manifest, profile or default)


def messages(document: dict) -> list[str]:
    return [p.message for p in check(document)]


def on(document: dict, device_name: str) -> dict:
    out = copy.deepcopy(document)
    out["target"] = {"device": device_name}
    return out


# --- hardware layers ----------------------------------------------------------------------

def test_mnist_maps_to_four_hardware_layers():
    _, hw, _ = hardware(MNIST)
    assert [(h.name, h.op, h.inputs) for h in hw] == [
        ("conv1", "conv2d", ("input",)), ("conv2", "conv2d", ("conv1",)),
        ("conv3", "conv2d", ("conv2",)), ("fc", "linear", ("conv3",))]
    conv2, fc = hw[1], hw[3]
    assert conv2.in_shape == (8, 28, 28) and conv2.pooled_shape == (8, 14, 14)
    assert conv2.out_shape == (8, 16, 16) and conv2.pad == (2, 2)
    assert conv2.pool.size == (2, 2) and conv2.pool.stride == (2, 2)
    assert fc.flatten and fc.wide and fc.has_bias and fc.in_channels == 8
    assert fc.in_shape == (8, 4, 4) and fc.weight_bits == 8 and fc.kernel_elements == 1


def test_flatten_is_absorbed_by_the_linear_layer_that_reads_it():
    _, hw, _ = hardware(model([conv("c", 4), {"name": "flat", "op": "flatten"},
                               {"name": "fc", "op": "linear", "out": 3}]))
    assert [h.name for h in hw] == ["c", "fc"]
    assert hw[1].members == ("flat", "fc") and hw[1].flatten and hw[1].inputs == ("c",)
    assert hw[1].in_channels == 4 and hw[1].in_shape == (4, 8, 8)


def test_add_runs_in_flight_in_the_following_conv2d():
    layers = [conv("a", 8), conv("b", 8), {"name": "sum", "op": "add", "inputs": ["a", "b"]},
              conv("c", 8)]
    _, hw, _ = hardware(model(layers))
    # 'a' is also read by 'b', so a copy layer writes it interleaved for the add
    assert [(h.name, h.op, h.inputs) for h in hw] == [
        ("a", "conv2d", ("input",)), ("b", "conv2d", ("a",)),
        ("c_in0", "passthrough", ("a",)), ("c", "conv2d", ("c_in0", "b"))]
    assert hw[3].members == ("sum", "c") and hw[3].eltwise_operands == 2
    assert hw[3].eltwise == "sum" and hw[3].inflight and hw[2].synthetic
    assert hw[2].anchor == "sum"


def test_add_stays_a_layer_when_placed_by_name_or_before_a_conv1d():
    layers = [conv("a", 8), conv("b", 8), {"name": "sum", "op": "add", "inputs": ["a", "b"]},
              conv("c", 8)]
    _, hw, _ = hardware(model(layers), placed={"sum"})
    assert [h.name for h in hw] == ["a", "b", "sum_in0", "sum", "c"]
    assert hw[3].op == "add" and not hw[3].inflight
    conv1d = [{"name": n, "op": "conv1d", "out": 8, "kernel": 3, "pad": 1}
              for n in ("a", "b")] + [{"name": "sum", "op": "add", "inputs": ["a", "b"]},
                                      {"name": "c", "op": "conv1d", "out": 8}]
    _, hw, _ = hardware(model(conv1d, input_shape=(8, 16)))
    assert "sum" in [h.name for h in hw]  # the manual: 1-D convolutions without eltwise


def test_batchnorm_and_dropout_are_not_layers():
    layers = [conv("c", 8, act="none"), {"name": "bn", "op": "batchnorm", "act": "relu"},
              {"name": "drop", "op": "dropout", "p": 0.1}, conv("d", 8)]
    layers[2].pop("p")
    _, hw, _ = hardware(model(layers))
    assert [(h.name, h.inputs) for h in hw] == [("c", ("input",)), ("d", ("c",))]


def test_transposed_conv_is_a_weight_layer():
    _, hw, _ = hardware(model([{"name": "up", "op": "conv_transpose2d", "out": 4,
                                "pool": {"mode": "max", "size": 2}}]))
    (up,) = hw
    assert (up.op, up.kernel, up.stride, up.pad, up.output_pad) == (
        "conv_transpose2d", (3, 3), (2, 2), (1, 1), (1, 1))
    assert up.has_weights and up.kernel_elements == 9 and up.has_bias
    assert up.pooled_shape == (8, 4, 4) and up.out_shape == (4, 8, 8)


def test_a_reshape_keeping_channels_is_read_through():
    layers = [{"name": "c1", "op": "conv1d", "out": 4, "kernel": 1},
              {"name": "r", "op": "reshape", "shape": [4, 8, 8]},
              conv("c2", 4)]
    _, hw, _ = hardware(model(layers, input_shape=(2, 64)))
    assert [(h.name, h.inputs, h.in_shape) for h in hw] == [
        ("c1", ("input",), (2, 64)), ("c2", ("c1",), (4, 8, 8))]
    assert check(model(layers, input_shape=(2, 64))) == []


def test_reshapes_the_device_cannot_do_are_named():
    channels = [{"name": "r", "op": "reshape", "shape": [4, 32]},
                {"name": "c", "op": "conv1d", "out": 4, "kernel": 1}]
    text = "\n".join(messages(model(channels, input_shape=(2, 8, 8))))
    assert "layer 'r': a reshape from 2 to 4 channels (the hardware reshapes only height x " \
           "width = length, per channel: `in_dim`) cannot run on max78000" in text
    last = [conv("c", 4), {"name": "r", "op": "reshape", "shape": [4, 64]}]
    found = check(model(last))
    assert found[0].path == ("model", "layers", 1, "op")
    assert "a reshape that feeds no layer" in found[0].message


@pytest.mark.parametrize("device_name", ["max78000", "max78002"])
def test_conv_transpose2d_rules(device_name):
    def up(**fields):
        return model([{"name": "up", "op": "conv_transpose2d", "out": 8, **fields}],
                     device_name=device_name)
    assert check(up()) == [] and check(up(pad=2)) == []
    found = check(up(kernel=2, stride=1, pad=3, output_pad=0, groups=8))
    assert [p.path[-1] for p in found] == ["kernel", "pad", "stride", "output_pad", "groups"]
    text = "\n".join(p.message for p in found)
    for fragment in (f"kernel 2x2 is not supported for a transposed convolution on {device_name} "
                     "(allowed: 3x3)",
                     f"pad 3x3 is not supported on {device_name} (allowed: 0, 1, 2)",
                     f"stride 1x1 is not supported on {device_name} (allowed: 2)",
                     f"output_pad 0x0 is not supported on {device_name} (allowed: 1)",
                     "groups 8 with 8 input and 8 output channels"):
        assert fragment in text
    assert [p.path[-1] for p in check(up(dilation=2, output_pad=1))] == ["dilation"]


def test_manifest_index_points_at_model_layers():
    manifest, _, _ = hardware(MNIST)
    assert manifest_index(manifest.model.layers) == {"conv1": 0, "conv2": 1, "conv3": 2, "fc": 3}


# --- limits -------------------------------------------------------------------------------

@pytest.mark.parametrize("device_name", ["max78000", "max78002"])
def test_mnist_extrasmall_is_within_limits(device_name):
    assert check(on(MNIST, device_name)) == []


@pytest.mark.parametrize("device_name", ["max78000", "max78002"])
def test_5x5_kernel_runs_on_neither_device(device_name):
    document = on(MNIST, device_name)
    document["model"]["layers"][1]["kernel"] = 5
    problems = check(document)
    assert problems == [limits.Problem(
        ("model", "layers", 1, "kernel"),
        f"layer 'conv2': kernel 5x5 is not supported on {device_name} (allowed: 1x1, 3x3)")]


def test_33_layers_exceed_max78000_but_not_max78002():
    layers = [conv(f"c{i}", 4, kernel=1, pad=0) for i in range(33)]
    document = model(layers, input_shape=(4, 4, 4))
    assert messages(document) == ["the model needs 33 hardware layers, max78000 runs at most 32"]
    assert check(document)[0].path == ("model", "layers")
    assert check(on(document, "max78002")) == []


def test_every_violation_is_reported_at_once():
    layers = [conv("c1", 8, kernel=5, pad=3, stride=2, dilation=2, groups=2),
              conv("c2", 8, pool={"mode": "max", "size": [2, 2], "stride": [1, 2]}),
              conv("c3", 1100, kernel=1, pad=0, bias=True)]
    found = check(model(layers, input_shape=(8, 32, 32)))
    paths = [p.path for p in found]
    assert paths == [("model", "layers", 0, "kernel"), ("model", "layers", 0, "pad"),
                     ("model", "layers", 0, "stride"), ("model", "layers", 0, "dilation"),
                     ("model", "layers", 0, "groups"), ("model", "layers", 1, "pool", "stride"),
                     ("model", "layers", 2, "out"), ("model", "layers", 2, "bias")]
    text = "\n".join(p.message for p in found)
    for fragment in ("kernel 5x5", "pad 3x3 is not supported on max78000 (allowed: 0, 1, 2)",
                     "stride 2x2 is not supported on max78000 (allowed: 1)",
                     "dilation 2x2 is not supported on max78000 (allowed: 1..1)",
                     "groups 2 with 8 input and 8 output channels",
                     "pool stride 1x2 differs between dimensions",
                     "1100 output channels exceed max78000's limit of 1024",
                     "bias on 1100 output channels exceeds max78000's limit of 512"):
        assert fragment in text


def test_depthwise_runs_on_max78002_only():
    layers = [conv("dw", 8, groups=8)]
    assert "allowed: 1)" in messages(model(layers))[0]
    assert check(model(layers, device_name="max78002")) == []
    partial = [conv("g", 16, groups=4)]
    assert "groups = input = output channels" in messages(model(partial, device_name="max78002"))[0]


def test_conv1d_rules():
    def conv1d(**fields):
        return model([{"name": "c", "op": "conv1d", "out": 8, **fields}],
                     input_shape=(80, 64))
    assert check(conv1d(kernel=9, pad=2)) == []
    assert messages(conv1d(kernel=11)) == [
        "layer 'c': kernel 11 is not supported on max78000 (allowed: 1..9)"]
    assert messages(conv1d(kernel=3, dilation=7)) == []
    assert messages(conv1d(kernel=5, dilation=2)) == [
        "layer 'c': dilation 2 is not supported on max78000 with kernel 5 (allowed: 1..1)"]
    # a dilated span of more than 9 taps runs as a padded 3x3 conv2d over `dilation`
    # columns: no padding or pooling of its own there (both devices)
    def narrow(device_name, **fields):
        return model([{"name": "c", "op": "conv1d", "out": 8, **fields}],
                     input_shape=(8, 64), device_name=device_name)
    for device_name in ("max78000", "max78002"):
        assert messages(narrow(device_name, kernel=2, dilation=12)) == []
        assert messages(narrow(device_name, kernel=3, dilation=5, pad=1,
                               pool={"mode": "max", "size": 2, "stride": 2})) == [
            "layer 'c': pad 1 is not supported with dilation 5 (a span of more than 9 taps "
            "runs on the 2-D hardware); allowed: 0",
            "layer 'c': pooling is not supported with dilation 5 (a span of more than 9 taps "
            "runs on the 2-D hardware); pool in a layer of its own"]
    assert messages(conv1d(kernel=3, dilation=4, pad=1)) == []  # 9 taps: stretched
    # more than 64 input channels: padding must be 0 on max78002, any on max78000
    wide = on(conv1d(kernel=3, pad=1), "max78002")
    assert messages(wide) == ["layer 'c': pad 1 is not supported on max78002 with 80 input "
                              "channels (allowed: 0)"]


def test_pool_rules():
    big = {"mode": "max", "size": 17}
    assert messages(model([conv("c", 8, pool=big)], input_shape=(8, 40, 40)))[0] == (
        "layer 'c': pool size 17x17 is not supported on max78000 (allowed: 1..16 per dimension)")
    pool = [{"name": "p", "op": "pool2d", "mode": "avg", "size": 2}]
    assert messages(model(pool, input_shape=(100, 8, 8)))[0].startswith(
        "layer 'p': pooling 100 channels without a convolution is not supported on max78000")
    assert check(model(pool, input_shape=(100, 2, 2))) == []  # pooled to 1x1
    assert check(model(pool, input_shape=(100, 8, 8), device_name="max78002")) == []
    assert check(model(pool, input_shape=(64, 8, 8))) == []


def test_linear_and_flatten_limits():
    flat = model([{"name": "fc", "op": "linear", "out": 10, "flatten": True}],
                 input_shape=(16, 33, 33))
    assert messages(flat) == ["layer 'fc': flattening 16x33x33 = 17424 values exceeds "
                              "max78000's limit of 16384"]
    wide = model([{"name": "fc", "op": "linear", "out": 1100}], input_shape=(64,))
    assert messages(wide) == [
        "layer 'fc': 1100 output channels exceed max78000's limit of 1024",
        "layer 'fc': bias on 1100 output channels exceeds max78000's limit of 512; "
        "set `bias: false`",
        "layer 'fc': 1100 outputs exceed max78000's linear limit of 1024"]
    many = model([{"name": "fc", "op": "linear", "out": 10}], input_shape=(1030,))
    assert "1030 input features exceed max78000's linear limit of 1024" in messages(many)[-1]


def test_eltwise_limits():
    def residual(channels: int, operands: int, device_name="max78000"):
        layers = [conv(f"c{i}", channels) for i in range(operands)]
        for i in range(1, operands):
            layers[i]["inputs"] = ["input"]
        layers += [{"name": "sum", "op": "add", "inputs": [f"c{i}" for i in range(operands)]},
                   conv("out", 8)]
        return model(layers, input_shape=(8, 4, 4), device_name=device_name)
    assert check(residual(100, 2)) == []
    three = messages(residual(100, 3))
    assert three == ["layer 'sum': the element-wise operation runs in-flight in 'out' over 100 "
                     "channels, but max78000 allows at most 64 with 3 operands (64 channels, 128 "
                     "with two operands); put a passthrough layer between 'sum' and 'out' to run "
                     "it as a layer of its own"]
    assert check(residual(100, 3, "max78002")) == []
    found = check(residual(4, 17, "max78002"))
    assert [p.message for p in found] == ["layer 'sum': an element-wise operation of 17 operands "
                                          "is not supported on max78002 (allowed: 2..16)"]
    assert found[0].path == ("model", "layers", 17)


def test_concat_parts_are_whole_words():
    layers = [conv("a", 6), conv("b", 4, inputs=["input"]),
              {"name": "cat", "op": "concat", "inputs": ["a", "b"]}, conv("c", 4)]
    assert messages(model(layers)) == ["layer 'cat': concatenated input 'a' has 6 channels; on "
                                       "max78000 every part but the last needs a multiple of 4 "
                                       "channels"]
    layers[0]["out"] = 8
    assert check(model(layers)) == []


def test_weight_bits_come_from_the_profile():
    manifest, hw, profile = hardware(model([conv("c", 8)], qat={
        "overrides": {"c": {"weight_bits": 2}}}))
    narrow = profile.model_copy(update={"numbers": profile.numbers.model_copy(
        update={"weight_bits": (8,)})})
    assert limits.check(hw, manifest, narrow) == [limits.Problem(
        ("qat", "overrides", "c", "weight_bits"),
        "layer 'c': 2-bit weights are not supported on max78000 (allowed: 8)")]
    assert limits.check(hw, manifest, profile) == []


def test_unsupported_op_is_named():
    layers = [conv("c", 4), {"name": "flat", "op": "flatten"}]
    found = check(model(layers))
    assert found == [limits.Problem(("model", "layers", 1, "op"), (
        "layer 'flat': a flatten that does not feed a linear layer (the hardware flattens inside "
        "the linear layer) cannot run on max78000 (it runs conv1d, conv2d, conv_transpose2d, "
        "linear, pool, passthrough, add, concat, buffer)"))]  # the operator registry's order


def test_dimension_limit():
    document = model([conv("c", 4, kernel=1, pad=0)], input_shape=(1, 1100, 4))
    assert messages(document)[0] == ("layer 'c': input of 1100x4 exceeds max78000's limit of "
                                     "1023 rows or columns")


def test_large_data_needs_streaming():
    document = model([conv("c1", 4), conv("c2", 4, pool={"mode": "max", "size": 4})],
                     input_shape=(3, 100, 100))
    found = check(document)
    assert found == [limits.Problem(("model", "input"), (
        "the model input has 100x100 = 10000 values per channel, more than max78000 holds "
        "without streaming (8192 in HWC); set placement.c1.streaming: true")),
        limits.Problem(("model", "layers", 0), (
            "the output of 'c1' has 100x100 = 10000 values per channel, more than max78000 "
            "holds without streaming (8192 in HWC); set placement.c2.streaming: true"))]
    assert check(on(document, "max78002")) == []
    streamed = dict(document, placement={"c1": {"streaming": True}, "c2": {"streaming": True}})
    assert check(streamed) == []
    chw = dict(document, placement={"c1": {"data_format": "CHW", "streaming": True},
                                    "c2": {"streaming": True}})
    assert check(chw) == []


def test_the_last_streaming_layer_pads_on_max78000():
    layers = [conv("c1", 4), conv("c2", 4, pad=0)]
    document = model(layers, input_shape=(3, 16, 16),
                     placement={"c1": {"streaming": True}, "c2": {"streaming": True}})
    assert messages(document) == ["layer 'c2': the last streaming layer must use padding on "
                                  "max78000 (pad 0)"]
    assert check(on(document, "max78002")) == []  # not a MAX78002 rule
    ones = model([conv("c1", 4), conv("c2", 4, kernel=1, pad=0)], input_shape=(3, 16, 16),
                 placement={"c1": {"streaming": True}, "c2": {"streaming": True}})
    assert check(ones) == []  # an unpadded 1x1 becomes a padded 3x3 when streaming


def test_only_convolutions_stream_on_max78002():
    layers = [conv("c1", 4), {"name": "p", "op": "pool2d", "mode": "max", "size": 2},
              conv("c2", 4)]
    document = on(model(layers, input_shape=(3, 16, 16),
                        placement={n: {"streaming": True} for n in ("c1", "p", "c2")}),
                  "max78002")
    assert messages(document) == ["layer 'p': a pool layer cannot stream on max78002 (only "
                                  "conv1d, conv2d, conv_transpose2d do)"]


def test_streaming_rules():
    layers = [conv(f"c{i}", 4, kernel=1, pad=0) for i in range(10)]
    document = model(layers, input_shape=(4, 8, 8),
                     placement={f"c{i}": {"streaming": True} for i in range(1, 10)})
    found = check(document)
    assert found[0] == limits.Problem(("placement", "c1", "streaming"), (
        "layer 'c1': streaming layers must run first and in a row, but 'c0' before it does not "
        "stream"))
    assert found[-1] == limits.Problem(("placement", "c9", "streaming"),
                                       "9 layers stream, max78000 streams at most 8")
    fifo = model([conv("c", 4)], input_shape=(20, 8, 8), placement={"c": {"streaming": True}})
    assert messages(fifo) == ["layer 'c': 20 input channels exceed the 16 channels the max78000 "
                              "FIFOs stream in HWC"]
