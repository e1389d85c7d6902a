"""Placement (edgebuild/targets/max7800x/placement/): user placements checked, the rest chosen.

The mnist-extrasmall placement below is the reference model's network description
(ai8x-models/mnist-extrasmall/network.yaml): CHW input on processor 0, the other layers on
processors 4-11, ping-pong between 0 and 0x2000.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from devicemodels import conv, model, placed_ok, resolve

from edgebuild.targets.max7800x import placement
from edgebuild.targets.max7800x.placement import FIELDS, Region, collide

EXAMPLES = Path(__file__).resolve().parent.parent / "manifests"


MNIST = {
    "name": "mnist",
    "model": {"input": [1, 28, 28], "layers": [
        conv("conv1", 8, bias=False),
        conv("conv2", 8, pad=2, bias=False, pool={"mode": "max", "size": 2, "stride": 2}),
        conv("conv3", 8, bias=False, pool={"mode": "max", "size": 4, "stride": 4}),
        {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]},
    "target": {"device": "max78000"},
    "placement": {
        "conv1": {"processors": "0x0000000000000001", "data_format": "CHW", "out_offset": 0x2000},
        "conv2": {"processors": "0x0000000000000ff0", "out_offset": 0},
        "conv3": {"processors": "0x0000000000000ff0", "out_offset": 0x2000},
        "fc": {"processors": "0x0000000000000ff0", "out_offset": 0}},
}

RESIDUAL = {
    "name": "residual",
    "model": {"input": [3, 16, 16], "layers": [
        conv("conv1", 16), conv("conv2", 16),
        {"name": "sum", "op": "add", "inputs": ["conv1", "conv2"]},
        conv("conv3", 16, pool={"mode": "max", "size": 2}),
        {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}]},
    "target": {"device": "max78000"},
}


def problems(document: dict) -> list[placement.Problem]:
    _, _, result, found = resolve(document)
    assert result is None
    return found


def messages(document: dict) -> list[str]:
    return [p.message for p in problems(document)]


def with_placement(document: dict, **entries) -> dict:
    out = copy.deepcopy(document)
    for name, fields in entries.items():
        out.setdefault("placement", {}).setdefault(name, {}).update(fields)
    return out


def comparable(result: placement.Placement) -> dict:
    out = result.to_json()
    for layer in out["layers"]:
        layer.pop("origin")
    return out


def pinned_again(document: dict, result: placement.Placement, placed=()) -> None:
    """Giving the automatic result as the user's placement reproduces it exactly."""
    pinned = dict(copy.deepcopy(document), placement=result.to_manifest())
    again = placed_ok(pinned, placed)
    assert comparable(again) == comparable(result)
    assert all(v == "given" for layer in again.to_json()["layers"]
               for k, v in layer["origin"].items() if k in ("processors", "out_offset"))


# --- the reference network ----------------------------------------------------------------

def test_mnist_extrasmall_reference_placement_passes():
    result = placed_ok(MNIST)
    got = {p.name: p for p in result.layers}
    assert got["conv1"].processors == 0x1 and got["conv1"].data_format == "CHW"
    assert got["conv1"].output_processors == 0xff0  # the next layer's processors
    assert [got[n].in_offset for n in ("conv1", "conv2", "conv3", "fc")] == [0, 0x2000, 0, 0x2000]
    assert [got[n].out_offset for n in ("conv1", "conv2", "conv3", "fc")] == [0x2000, 0, 0x2000, 0]
    assert got["fc"].output_processors == 0x3ff  # 10 outputs on processors 0-9
    kernels = {n: (got[n].kernel.start, got[n].kernel.words) for n in got}
    # 3x3 8-bit kernels: one per 72-bit word; fc: 10 x 16 1x1 kernels, 9 per word
    assert kernels == {"conv1": (0, 8), "conv2": (0, 8), "conv3": (8, 8), "fc": (16, 18)}
    assert got["fc"].bias == placement.BiasSlot(0, 0, 10)
    assert got["conv1"].bias is None and got["fc"].in_passes == 1


def test_mnist_json_and_text():
    result = placed_ok(MNIST)
    document = json.loads(json.dumps(result.to_json()))
    conv1 = document["layers"][0]
    assert conv1["processors"] == "0x0000000000000001"
    assert conv1["output_processors"] == "0x0000000000000ff0"
    assert conv1["origin"] == {"processors": "given", "output_processors": "auto",
                               "in_offset": "auto", "out_offset": "given",
                               "data_format": "given", "write_gap": "auto",
                               "read_gap": "auto", "bias_group": "auto", "streaming": "auto"}
    assert set(conv1["origin"]) == set(FIELDS)
    assert {r["tensor"] for r in document["data_memory"]} == {"input", "conv1", "conv2", "conv3",
                                                              "fc"}
    text = result.text()
    for fragment in ("placement on max78000", "kernel memory", "data memory", "bias memory",
                     "0x2000..0x2c3f conv1 (steps 0..1)", "quadrant 0: fc 0..9"):
        assert fragment in text


def test_mnist_automatic_placement_ping_pongs():
    document = copy.deepcopy(MNIST)
    del document["placement"]
    result = placed_ok(document)
    assert [p.out_offset for p in result.layers] == [0x4000, 0, 0x4000, 0]
    assert result.layers[0].data_format == "HWC" and result.layers[0].processors == 1
    pinned_again(document, result)


# --- mistakes, each with its message ------------------------------------------------------

def test_wrong_processor_count():
    document = with_placement(MNIST, conv2={"processors": "0xf0"})
    found = problems(document)
    assert found == [placement.Problem(("placement", "conv2", "processors"), (
        "layer 'conv2': processors 0x00000000000000f0 has 4 bits, but 8 input channels need 8 "
        "processors"))]


def test_output_over_its_own_input():
    found = problems(with_placement(MNIST, conv2={"out_offset": 0x2000}))
    assert found == [placement.Problem(("placement", "conv2", "out_offset"), (
        "layer 'conv2': output 'conv2' at 0x2000..0x23ff in data memory instance 1 overwrites "
        "the output of 'conv1' at 0x2000..0x2c3f (layer 'conv2' still reads it): output pixel "
        "0 overwrites input pixel 0, which output pixel 1 or a later one still reads")),
        placement.Problem(("placement", "conv3", "out_offset"), (  # and conv3 then over conv2
            "layer 'conv3': output 'conv3' at 0x2000..0x203f in data memory instance 1 "
            "overwrites the output of 'conv2' at 0x2000..0x23ff (layer 'conv3' still reads it): "
            "output pixel 0 overwrites input pixel 0, which output pixel 1 or a later one still "
            "reads"))]


def test_output_past_the_instance():
    placed_ok(with_placement(MNIST, conv3={"out_offset": 0x7fc0}))
    document = with_placement(MNIST, conv3={"out_offset": 0x7ff0})
    assert messages(document) == ["layer 'conv3': 'conv3' needs 0x7ff0..0x802f in data memory "
                                  "instance 1, beyond its 32768 bytes"]


def test_offsets_must_agree():
    found = problems(with_placement(MNIST, conv2={"in_offset": 0x1000}))
    assert found == [placement.Problem(("placement", "conv2", "in_offset"), (
        "layer 'conv2': in_offset 0x1000 conflicts with layer 'conv1': out_offset 0x2000"))]


def test_reader_and_writer_processors_must_agree():
    found = problems(with_placement(MNIST, conv1={"output_processors": "0xff"}))
    assert found == [placement.Problem(("placement", "conv2", "processors"), (
        "layer 'conv2' reads 'conv1' on processors 0x0000000000000ff0, but 'conv1' writes its "
        "output on 0x00000000000000ff"))]


def test_65_channels_on_a_64_bit_map():
    document = model([conv("c", 8, kernel=1, pad=0)], input_shape=(65, 4, 4),
                     placement={"c": {"processors": "0xffffffffffffffff"}})
    assert messages(document) == ["layer 'c': processors 0xffffffffffffffff has 64 bits, but 65 "
                                  "input channels need 36 processors"]


def test_chw_needs_one_processor_per_memory_instance():
    document = with_placement(MNIST, conv1={"processors": "0x3"})
    document["model"]["input"] = [2, 28, 28]
    found = problems(document)
    assert found == [placement.Problem(("placement", "conv1", "processors"), (
        "layer 'conv1': CHW input needs each processor on its own data memory instance, but "
        "processors 0 and 1 share instance 0"))]
    document["placement"]["conv1"]["processors"] = "0x11"
    placed_ok(document)


def test_data_format_only_on_the_first_layer():
    assert messages(with_placement(MNIST, conv2={"data_format": "CHW"})) == [
        "layer 'conv2': data_format applies to the first layer only ('conv1'); every other "
        "layer reads HWC"]


def test_kernel_memory_exhausted():
    # 800 outputs in 13 passes of 64 output processors: 832 kernels (the last pass's unused
    # processors keep their columns, as in the vendor's tool and the program)
    document = model([conv("big", 800, bias=False)], input_shape=(64, 4, 4))
    found = problems(document)
    assert found == [placement.Problem(("model", "layers", 0), (
        "layer 'big': kernel memory runs out on processor 0: needs 832 words in one span "
        "from a start word shared by all its processors (a multiple of 4), but processor 0 "
        "has 768 of 768 words free on max78000 (also processors 1-63)"))]
    placed_ok(model([conv("big", 800, bias=False)], input_shape=(64, 4, 4),
                    device_name="max78002"))


def test_kernel_memory_packs_small_weights():
    document = model([conv("big", 800, bias=False)], input_shape=(64, 4, 4),
                     qat={"weight_bits": 4})
    result = placed_ok(document)  # two 3x3 4-bit kernels per 72-bit word, 832 kernels
    assert result.layers[0].kernel == placement.KernelSlot(0, 416)


def test_bias_memory_exhausted():
    layers = [conv("c", 16, kernel=1, pad=0),
              {"name": "fc", "op": "linear", "out": 500, "flatten": True}]
    # both bound to quadrant 0: the flattening layer is placed first (the vendor's order)
    document = model(layers, input_shape=(16, 2, 2), placement={
        "fc": {"processors": "0xffff", "bias_group": 0}, "c": {"bias_group": 0}})
    found = problems(document)
    assert found == [placement.Problem(("placement", "c", "bias_group"), (
        "layer 'c': bias memory runs out: 16 bias bytes do not fit in quadrant 0 (max78000 "
        "has 512 bytes per quadrant)"))]
    # unbound, the last layer's 500 outputs span every quadrant: each is available
    assert placed_ok(model(layers, input_shape=(16, 2, 2), placement={
        "fc": {"processors": "0xffff"}})).layer("c").bias_group == 1


def test_bias_group_must_name_a_used_quadrant():
    document = with_placement(MNIST, fc={"bias_group": 3})
    assert messages(document) == ["layer 'fc': bias_group 3 must name quadrants the network uses "
                                  "(available: 0)"]
    assert messages(with_placement(MNIST, conv2={"bias_group": 0})) == [
        "layer 'conv2' has no bias; remove bias_group"]


def test_placement_keys_must_name_hardware_layers():
    document = with_placement(MNIST, comv2={"out_offset": 0})
    assert messages(document) == ["placement key 'comv2' names no layer; did you mean 'conv2'? "
                                  "(hardware layers: conv1, conv2, conv3, fc)"]
    flat = copy.deepcopy(MNIST)
    flat["model"]["layers"][3:3] = [{"name": "flat", "op": "flatten"}]
    flat["placement"]["flat"] = {"out_offset": 0}
    assert messages(flat) == ["placement key 'flat' names a layer that is part of hardware layer "
                              "'fc' (the hardware flattens inside the linear layer); place 'fc' "
                              "instead"]
    residual = with_placement(RESIDUAL, sum={"out_offset": 0})
    assert messages(residual) == ["placement key 'sum' names a layer that is part of hardware "
                                  "layer 'conv3' (the element-wise add runs in-flight in the "
                                  "convolution); place 'conv3' instead"]


def test_placement_keys_of_folded_layers():
    document = copy.deepcopy(MNIST)
    document["model"]["layers"][1:1] = [{"name": "bn", "op": "batchnorm", "act": "relu"},
                                        {"name": "drop", "op": "dropout"}]
    document["model"]["layers"][0]["act"] = "none"
    document["placement"].update(bn={"out_offset": 0}, drop={"out_offset": 0})
    assert messages(document) == [
        "placement key 'bn' names a batchnorm layer, which is folded into 'conv1'",
        "placement key 'drop' names a dropout layer, which is removed for inference"]


def test_every_problem_is_reported_at_once():
    document = with_placement(MNIST, conv9={"out_offset": 0}, conv3={"data_format": "HWC"},
                              conv2={"processors": "0xf0"})
    paths = [p.path for p in problems(document)]
    assert paths == [("placement", "conv9"), ("placement", "conv3", "data_format"),
                     ("placement", "conv2", "processors")]


def test_memory_problems_are_reported_together():
    layers = [conv("big", 800, bias=False), conv("c", 16, kernel=1, pad=0),
              {"name": "fc", "op": "linear", "out": 500, "flatten": True}]
    found = problems(model(layers, input_shape=(64, 2, 2), placement={
        "c": {"bias_group": 0}, "fc": {"bias_group": 0}}))
    assert [(p.path, p.message.split(":")[1].strip()) for p in found] == [
        (("model", "layers", 0), "kernel memory runs out on processor 0"),
        (("placement", "c", "bias_group"), "bias memory runs out")]


def test_data_memory_runs_out():
    document = model([conv("c1", 4), conv("c2", 4)], input_shape=(4, 90, 90),
                     placement={"c1": {"output_processors": "0xf"}})
    assert messages(document) == [
        "layer 'c1': data memory runs out: 'c1' needs 32400 bytes in data memory instance 0, "
        "but no free range of the 32768-byte instance is large enough (still needed: 'input' "
        "0x0000..0x7e8f in instance 0)"]
    placed_ok(model([conv("c1", 4), conv("c2", 4)], input_shape=(4, 90, 90)))


def test_write_gap_follows_the_readers():
    assert messages(with_placement(MNIST, conv2={"write_gap": 1})) == [
        "layer 'conv2': write_gap 1 is wrong; its readers need plain (not interleaved) data "
        "(max78000 cannot skip a gap as it reads: read_gap is a MAX78002 feature), so "
        "write_gap is 0"]


def test_a_max78002_reader_skips_a_write_gap_no_other_reader_needs():
    """izer's read_gap pattern: a layer writes every other word (write_gap 1) and its
    reader skips the gap as it reads (read_gap 1), without a copy layer."""
    document = with_placement(dict(MNIST, target={"device": "max78002"}),
                              conv2={"write_gap": 1})
    got = {p.name: p for p in placed_ok(document).layers}
    assert (got["conv2"].write_gap, got["conv3"].read_gap, got["fc"].read_gap) == (1, 1, 0)
    assert messages(with_placement(document, conv3={"read_gap": 0})) == [
        "layer 'conv3': read_gap 0 is wrong; its input is written with write_gap 1, so "
        "read_gap is 1"]


# --- automatic placement ------------------------------------------------------------------

# Examples whose model a MAX7800x cannot run at all, with the device limits that say so
# (they target a CPU): kws_dscnn reads its 12 cepstra as a 1-channel image (a reshape that
# changes the channel count) and averages over a 6x12 window (two strides);
# motions_speechnet reads its 6 axes as a 1-channel image too and has 1x15, 6x1 and 1x5
# kernels, 0x7 padding, grouped convolutions and pools over 1x2 and 1x21 windows; speechnet
# the same with 14 electrodes (1x15, 14x1, 1x5, a 1x83 pool), and maps of 14x700 values
# per channel that the max78000 holds only streaming (problems at the layer itself, 0 and 1).
NOT_FOR_THE_ACCELERATOR = {
    "kws_dscnn": {"max78000": {"op", "groups", "stride"}, "max78002": {"op", "stride"}},
    "motions_speechnet": {"max78000": {"op", "kernel", "pad", "groups", "stride", "size"},
                          "max78002": {"op", "kernel", "pad", "groups", "stride", "size"}},
    "speechnet": {"max78000": {"op", "kernel", "pad", "groups", "stride", "size", 0, 1},
                  "max78002": {"op", "kernel", "pad", "groups", "stride", "size"}},
}


@pytest.mark.parametrize("device_name", ["max78000", "max78002"])
@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.glob("*.yaml")  # not TFLite's format:
                                         if "format: tflite" not in p.read_text()),  # no accelerator
                         ids=lambda p: p.stem)
def test_examples_place_automatically(path, device_name):
    if path.stem in NOT_FOR_THE_ACCELERATOR:
        document = yaml.safe_load(path.read_text())
        document["target"] = {"device": device_name}
        _, found, _, _ = resolve(document)
        assert {problem.path[-1] for problem in found} == \
            NOT_FOR_THE_ACCELERATOR[path.stem][device_name], found
        return
    document = yaml.safe_load(path.read_text())
    document["target"] = {"device": device_name}
    result = placed_ok(document)
    pinned_again(document, result)
    json.dumps(result.to_json())
    assert "data memory" in result.text()


def test_residual_places_automatically():
    result = placed_ok(RESIDUAL)
    got = {p.name: p for p in result.layers}
    assert list(got) == ["conv1", "conv2", "conv3_in0", "conv3", "fc"]
    copy_layer, second, merged = got["conv3_in0"], got["conv2"], got["conv3"]
    assert copy_layer.members == () and copy_layer.op == "passthrough"
    assert merged.members == ("sum", "conv3") and merged.inputs == ("conv3_in0", "conv2")
    # operands interleaved: write_gap 1, 4 bytes apart; the add reads from operand 0
    assert copy_layer.write_gap == second.write_gap == 1
    assert second.out_offset == copy_layer.out_offset + 4
    assert merged.in_offset == copy_layer.out_offset
    assert copy_layer.output_processors == second.output_processors == merged.processors
    assert got["conv1"].output_processors == second.processors == copy_layer.processors
    pinned_again(RESIDUAL, result)


def test_residual_on_max78002_skips_the_gap_instead_of_copying():
    document = dict(copy.deepcopy(RESIDUAL), target={"device": "max78002"})
    result = placed_ok(document)
    got = {p.name: p for p in result.layers}
    assert list(got) == ["conv1", "conv2", "conv3", "fc"]  # no copy layer
    assert got["conv3"].inputs == ("conv1", "conv2")
    assert (got["conv1"].write_gap, got["conv2"].write_gap) == (1, 1)
    assert got["conv2"].read_gap == 1 and got["conv2"].in_offset == got["conv1"].out_offset
    assert got["conv2"].out_offset == got["conv1"].out_offset + 4
    assert " 1 r1 " in result.text()
    pinned_again(document, result)
    assert messages(with_placement(document, conv2={"read_gap": 0})) == [
        "layer 'conv2': read_gap 0 is wrong; its input is written with write_gap 1, so "
        "read_gap is 1"]


def test_read_gap_is_a_max78002_feature():
    assert messages(with_placement(RESIDUAL, conv2={"read_gap": 1})) == [
        "layer 'conv2': read_gap is a MAX78002 feature; max78000 layers read plain data "
        "(remove read_gap; a passthrough copy re-formats interleaved data)"]


def test_manual_residual_example_passes():
    """The first residual block of the manual's example (cifar100-ressimplenet): a
    passthrough re-formats layer 1's output with write_gap 1, layer 3 writes 4 bytes after
    it, and layer 4 adds both in-flight."""
    document = model([conv("l0", 16), conv("l1", 20),
                      {"name": "l2", "op": "passthrough", "inputs": ["l1"]},
                      conv("l3", 20, inputs=["l1"]),
                      {"name": "res", "op": "add", "inputs": ["l2", "l3"]}, conv("l4", 20)],
                     input_shape=(3, 32, 32), placement={
        "l0": {"processors": "0x7000000000000000", "out_offset": 0x2000, "data_format": "HWC"},
        "l1": {"processors": "0x0ffff00000000000", "out_offset": 0},
        "l2": {"processors": "0x00000000000fffff", "output_processors": "0x00000000000fffff",
               "out_offset": 0x2000, "write_gap": 1},
        "l3": {"in_offset": 0, "processors": "0x00000000000fffff", "out_offset": 0x2004,
               "write_gap": 1},
        "l4": {"in_offset": 0x2000, "out_offset": 0, "processors": "0x00000000000fffff"}})
    result = placed_ok(document, placed=document["placement"])
    assert [p.name for p in result.layers] == ["l0", "l1", "l2", "l3", "l4"]
    assert result.layer("l1").output_processors == 0xfffff
    assert result.layer("l4").members == ("res", "l4")
    broken = with_placement(document, l3={"out_offset": 0x2000})
    _, _, none, found = resolve(broken, placed=broken["placement"])
    assert none is None and [p.path for p in found] == [("placement", "l3", "out_offset")]


def test_placed_add_is_its_own_layer():
    document = with_placement(RESIDUAL, sum={})
    result = placed_ok(document, placed={"sum"})
    assert [p.name for p in result.layers] == ["conv1", "conv2", "sum_in0", "sum", "conv3", "fc"]
    assert result.layer("sum").op == "add"
    pinned_again(document, result, placed={"sum"})


def test_multi_pass_places_automatically():
    document = model([conv("c1", 100), conv("c2", 100, pool={"mode": "max", "size": 2}),
                      conv("c3", 130, kernel=1, pad=0),
                      {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}],
                     input_shape=(3, 16, 16))
    result = placed_ok(document)
    c1, c2, c3, fc = result.layers
    assert c1.output_processors.bit_count() == 52 and c1.out_passes == 2  # 100 -> 2 x 52
    assert c2.processors == c1.output_processors and c2.in_passes == 2
    assert c2.kernel.words == 208  # 2 x 52 output processors x 2 input passes of 3x3 kernels
    assert c3.output_processors.bit_count() == 44 and c3.out_passes == 3  # 130 -> 3 x 44
    # 10 outputs x 44 rows of 130 x 64 / 44 = 189 weights (the vendor rule's row length), 9 per word
    assert fc.in_passes == 3 and fc.kernel.words == 210
    pinned_again(document, result)


def test_concat_places_automatically():
    document = model([conv("squeeze", 4, kernel=1, pad=0, pool={"mode": "avg", "size": 2}),
                      conv("e1", 4, kernel=1, pad=0), conv("e3", 4, inputs=["squeeze"]),
                      {"name": "cat", "op": "concat", "inputs": ["e1", "e3"]},
                      {"name": "pool", "op": "pool2d", "mode": "max", "size": 2},
                      {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True}],
                     input_shape=(3, 32, 32))
    result = placed_ok(document)
    e1, e3, pool = result.layer("e1"), result.layer("e3"), result.layer("pool")
    assert pool.members == ("cat", "pool") and pool.inputs == ("e1", "e3")  # reads the concat
    assert e1.output_processors | e3.output_processors == pool.processors
    assert e1.output_processors < e3.output_processors  # earlier input on lower processors
    assert e1.out_offset == e3.out_offset == pool.in_offset
    assert pool.output_processors == pool.processors and pool.in_passes == 1
    pinned_again(document, result)


def test_placed_concat_is_its_own_layer():
    document = model([conv("e1", 4, kernel=1, pad=0), conv("e3", 4, inputs=["input"]),
                      {"name": "cat", "op": "concat", "inputs": ["e1", "e3"]},
                      conv("c", 8)], input_shape=(3, 8, 8))
    assert [p.name for p in placed_ok(document).layers] == ["e1", "e3", "c"]
    document = with_placement(document, cat={})
    result = placed_ok(document, placed={"cat"})
    assert [p.name for p in result.layers] == ["e1", "e3", "cat", "c"]
    assert result.layer("cat").inputs == ("e1", "e3") and result.layer("c").inputs == ("cat",)
    pinned_again(document, result, placed={"cat"})


def wide_concat(first: int = 48, second: int = 48, shared: bool = False) -> dict:
    """Two convolutions concatenated into more than 64 channels, then a convolution."""
    layers = [conv("a", first), conv("b", second, inputs=["input"]),
              {"name": "cat", "op": "concat", "inputs": ["a", "b"]}, conv("c", 16)]
    if shared:  # `a` is also read on its own
        layers.append(conv("d", 8, inputs=["a"]))
    return model(layers, input_shape=(3, 8, 8))


def test_concatenation_beyond_64_channels_reads_one_input_per_pass():
    document = wide_concat()
    result = placed_ok(document)
    a, b, c = result.layer("a"), result.layer("b"), result.layer("c")
    assert c.members == ("cat", "c") and (c.in_channels, c.in_passes) == (96, 2)
    assert c.processors.bit_count() == 48
    assert a.output_processors == b.output_processors == c.processors
    assert (a.write_gap, b.write_gap) == (1, 1)  # interleaved: pass k reads word k
    assert b.out_offset == a.out_offset + 4 and c.in_offset == a.out_offset
    assert c.kernel.words == 16 * 2  # 16 outputs x 2 passes of 3x3 kernels
    pinned_again(document, result)


def test_concatenation_beyond_64_channels_copies_a_shared_input():
    result = placed_ok(wide_concat(shared=True))
    names = [p.name for p in result.layers]
    assert names == ["a", "b", "c_in0", "c", "d"]  # `a` is also read plain by `d`
    copy = result.layer("c_in0")
    assert copy.op == "passthrough" and copy.inputs == ("a",) and copy.write_gap == 1
    assert result.layer("c").inputs == ("c_in0", "b")
    assert result.layer("a").write_gap == 0


def test_concatenation_beyond_64_channels_needs_full_passes():
    assert messages(wide_concat(40, 56)) == [
        "layer 'c' reads 96 concatenated channels in passes of 48 processors, one input per "
        "pass, so every input but the last needs exactly 48 channels (the last at most 48), "
        "but 'a' has 40"]
    placed_ok(wide_concat(48, 44))  # the last pass may be partial (92 -> 2 x 48)


def test_user_processors_pull_the_producer_output():
    document = with_placement(RESIDUAL, fc={"processors": "0x00000000ffff0000"})
    result = placed_ok(document)
    assert result.layer("conv3").output_processors == 0xffff0000
    pinned_again(document, result)


# --- word progressions --------------------------------------------------------------------

def words(region: Region) -> set[int]:
    return {region.start + region.stride * k + j for k in range(region.count)
            for j in range(region.width)}


def test_collide_matches_brute_force():
    shapes = [(4, 4, 5), (8, 4, 3), (12, 4, 4), (8, 8, 2), (16, 4, 2)]
    for stride_a, width_a, count_a in shapes:
        for stride_b, width_b, count_b in shapes:
            for start_b in range(0, 48, 4):
                a = Region("a", 0, 8, stride_a, count_a, width_a, 0, 0)
                b = Region("b", 0, start_b, stride_b, count_b, width_b, 0, 0)
                expected = bool(words(a) & words(b))
                assert collide(a, b) == expected == collide(b, a), (a, b)
