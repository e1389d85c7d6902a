"""MAX7800x refusals say what AND how (issue 29, item 6): every limit `check` reports carries
advice (limits.Problem.advice, worded by targets/max7800x/advice.py) — a restructuring the
rule allows, a placement key, or another device, named only where that device's profile
allows the thing — and the text a user reads (layout.problems, `edgebuild check`) is the
problem followed by its advice. Each piece of advice is followed here to see that it holds:
the advised manifest passes that rule.
"""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

from conftest import run_cli
from devicemodels import conv, hardware, model, resolve

from edgebuild.model import folding
from edgebuild.targets.max7800x import layout, limits


def check(document: dict) -> list[limits.Problem]:
    manifest, hw, profile = hardware(document)
    return limits.check(hw, manifest, profile)


def texts(document: dict) -> list[str]:
    return [p.text for p in check(document)]


def on(document: dict, device: str) -> dict:
    out = copy.deepcopy(document)
    out["target"] = {"device": device}
    return out


def only(document: dict) -> limits.Problem:
    (problem,) = check(document)
    assert problem.advice and problem.text == f"{problem.message}; {problem.advice}"
    return problem


# --- convolutions -------------------------------------------------------------------------

def test_depthwise_on_max78000_points_to_max78002_and_to_a_dense_convolution():
    dw = model([conv("dw", 8, groups=8)])
    problem = only(dw)
    assert problem.path == ("model", "layers", 0, "groups")
    assert "use groups: 1 (a dense convolution)" in problem.advice
    assert "max78002 runs this layer as it is (`target.device: max78002`)" in problem.advice
    assert check(on(dw, "max78002")) == [] and check(model([conv("dw", 8)])) == []


def test_a_grouped_convolution_neither_device_runs_names_no_device():
    grouped = model([conv("g", 16, groups=4)], device_name="max78002")
    problem = only(grouped)
    assert "a depthwise convolution (groups = input = output channels)" in problem.advice
    assert "target.device" not in problem.advice
    assert "target.device" not in only(on(grouped, "max78000")).advice


def test_a_5x5_kernel_is_advised_stacked_3x3_convolutions_and_no_device():
    problem = only(model([conv("c", 8, kernel=5, pad=2)]))
    assert "use kernel 1 or 3; stacked 3x3 convolutions reach further" in problem.advice
    assert "target.device" not in problem.advice  # max78002 refuses it too
    assert check(model([conv("c", 8), conv("c2", 8)])) == []


def test_a_strided_convolution_is_advised_pooling():
    problem = only(model([conv("c", 8, stride=2)]))
    assert "use stride 1 and downsample by pooling instead" in problem.advice
    assert check(model([conv("c", 8, pool={"mode": "max", "size": 2})])) == []


def test_dilation_on_max78000_names_max78002():
    problem = only(model([conv("c", 8, dilation=2, pad=2)]))
    assert "use dilation 1" in problem.advice and "max78002 runs this layer" in problem.advice


def test_a_long_conv1d_kernel_is_advised_stacking_or_dilation():
    def conv1d(**fields):
        return model([{"name": "c", "op": "conv1d", "out": 8, **fields}], input_shape=(8, 64))
    problem = only(conv1d(kernel=11, pad=0))
    assert "use at most 9 taps: stack convolutions, or dilate a kernel of at most 3 taps " \
           "(dilation 1..1023)" in problem.advice
    assert check(conv1d(kernel=3, dilation=5, pad=0)) == []


# --- pooling --------------------------------------------------------------------------------

def test_a_large_pool_window_is_advised_two_steps_that_make_it_up():
    big = model([conv("c", 8, pool={"mode": "max", "size": 20})], input_shape=(8, 40, 40))
    size, stride = check(big)  # a window of 20 steps by 20 too
    assert size.path[-1] == "size" and stride.path[-1] == "stride"
    assert "pool in two steps, size 2x2 then 10x10" in size.advice
    assert "use a stride of at most 16" in stride.advice
    two = model([{"name": "p", "op": "pool2d", "mode": "max", "size": 2},
                 conv("c", 8, pool={"mode": "max", "size": 10})], input_shape=(8, 40, 40))
    assert check(two) == []
    prime = check(model([conv("c", 8, pool={"mode": "max", "size": 17, "stride": 1})],
                        input_shape=(8, 40, 40)))
    assert "17x17 has no two factors" not in prime[0].advice  # overlapping windows: no steps
    assert prime[0].advice == "use a window of at most 16 per side"
    prime = check(model([conv("c", 8, pool={"mode": "max", "size": 17})],
                        input_shape=(8, 40, 40)))
    assert "17x17 has no two factors of at most 16" in prime[0].advice


def test_a_global_pool_within_16x16_runs_on_the_pooling_hardware():
    gap = model([conv("c", 8), {"name": "gap", "op": "global_pool", "mode": "avg"},
                 {"name": "fc", "op": "linear", "out": 3, "flatten": True}],
                input_shape=(1, 7, 9))
    assert check(gap) == []
    _, hw, _ = hardware(gap)
    assert hw[1].op == "pool" and hw[1].pool.size == (7, 9) and hw[1].pool.stride == (9, 9)
    _, found, placed, problems = resolve(gap)
    assert found == [] and problems == [] and placed is not None


def test_a_global_pool_over_a_longer_map_is_advised_a_pool_before_it():
    def series(length: int, channels: int = 8) -> dict:
        return model([{"name": "c", "op": "conv1d", "out": channels, "kernel": 3, "pad": 1},
                      {"name": "gap", "op": "global_pool", "mode": "avg"},
                      {"name": "fc", "op": "linear", "out": 3, "flatten": True}],
                     input_shape=(2, length))
    problem = only(series(106))
    assert problem.path == ("model", "layers", 1)  # the layer: a global pool has no size
    assert problem.message == ("layer 'gap': a global pool over a map of 106 is not supported "
                               "on max78000 (its pooling window takes 1..16 per dimension)")
    assert "e.g. a pool1d of size 7 before it (106 -> 15)" in problem.advice
    assert "a cortex-m4 target runs it in software (`target.device: cortex-m4`)" in \
        problem.advice
    advised = series(106)
    advised["model"]["layers"].insert(1, {"name": "p", "op": "pool1d", "mode": "avg",
                                          "size": 7})
    assert check(advised) == []
    # more than 64 channels pool without a convolution only to 1x1: a global pool does
    assert check(series(16, channels=100)) == []
    image = model([conv("c", 8), {"name": "gap", "op": "global_pool", "mode": "max"}],
                  input_shape=(1, 40, 40))
    assert "a pool2d of size 3 before it (40x40 -> 13x13)" in only(image).advice


# --- sizes, counts, concatenation ---------------------------------------------------------------

def test_too_many_output_channels_are_advised_a_split_and_max78002():
    problems = check(model([conv("c", 1100, kernel=1, pad=0, bias=False)]))
    (problem,) = problems
    assert "two layers of at most 1024 each reading the same input, joined by a " \
           "`concat`" in problem.advice
    assert "max78002 runs this layer as it is" in problem.advice


def test_a_large_flatten_is_advised_pooling_or_a_global_pool():
    flat = model([{"name": "fc", "op": "linear", "out": 10, "flatten": True}],
                 input_shape=(16, 33, 33))
    problem = only(flat)
    assert "a global_pool, which leaves C values" in problem.advice
    assert "target.device" not in problem.advice  # both devices flatten at most 16384


def test_33_layers_are_advised_merging_and_max78002():
    layers = [conv(f"c{i}", 4, kernel=1, pad=0) for i in range(33)]
    problem = only(model(layers, input_shape=(4, 4, 4)))
    assert problem.advice.startswith("merge layers: a pooling fused into the next convolution")
    assert problem.advice.endswith("max78002 allows this (`target.device: max78002`)")


def test_a_concatenated_part_off_the_word_is_advised_its_fix():
    layers = [conv("a", 6), conv("b", 4, inputs=["input"]),
              {"name": "cat", "op": "concat", "inputs": ["a", "b"]}, conv("c", 4)]
    problem = only(model(layers))
    assert "give 'a' a multiple of 4 channels (its `out`), or list it last in `inputs`" in \
        problem.advice
    swapped = copy.deepcopy(layers)
    swapped[2]["inputs"] = ["b", "a"]
    assert check(model(swapped)) == []


def test_streaming_a_non_convolution_on_max78002_names_max78000():
    layers = [{"name": "p", "op": "pool2d", "mode": "max", "size": 2}, conv("c", 4)]
    document = model(layers, input_shape=(4, 200, 200), device_name="max78002",
                     placement={"p": {"streaming": True}, "c": {"streaming": True}})
    found = [p for p in check(document) if "cannot stream" in p.message]
    assert found and "stop streaming before it" in found[0].advice
    assert "max78000 allows this" in found[0].advice


def test_advice_names_a_device_only_where_its_profile_allows_the_thing():
    """Every device an advice names raises no problem at that path (the same layers)."""
    documents = [model([conv("dw", 8, groups=8)]), model([conv("c", 8, dilation=2, pad=2)]),
                 model([conv("c", 1100, kernel=1, pad=0)]),
                 model([conv(f"c{i}", 4, kernel=1, pad=0) for i in range(33)],
                       input_shape=(4, 4, 4)),
                 model([conv("c", 8, kernel=5, pad=2, groups=2)])]
    named = 0
    for document in documents:
        for problem in check(document):
            for device in ("max78000", "max78002"):
                if f"`target.device: {device}`" in problem.advice:
                    named += 1
                    assert problem.path not in {p.path for p in check(on(document, device))}
    assert named >= 4


# --- placement ---------------------------------------------------------------------------------

def test_kernel_memory_running_out_is_advised_narrower_weights_and_max78002():
    document = model([conv("big", 800, bias=False)], input_shape=(64, 4, 4))
    _, _, _, problems = resolve(document)
    (problem,) = problems
    assert "qat.overrides.big.weight_bits: 4" in problem.advice
    assert "max78002 has 5120 words on processor 0 (`target.device: max78002`)" in \
        problem.advice
    advised = copy.deepcopy(document)
    advised["qat"] = {"overrides": {"big": {"weight_bits": 4}}}
    _, found, placed, problems = resolve(advised)
    assert found == [] and problems == [] and placed is not None


def test_bias_memory_running_out_is_advised():
    layers = [conv("c", 16, kernel=1, pad=0),
              {"name": "fc", "op": "linear", "out": 500, "flatten": True}]
    document = model(layers, input_shape=(16, 2, 2), placement={
        "fc": {"processors": "0xffff", "bias_group": 0}, "c": {"bias_group": 0}})
    _, _, _, problems = resolve(document)
    (problem,) = problems
    assert "`bias: false` on layers that can do without one, or another bias_group with room " \
           "(placement.<layer>.bias_group)" in problem.advice
    assert "max78002 has 2048 bias bytes per quadrant" in problem.advice


def test_data_memory_running_out_is_advised():
    document = model([conv("c1", 4), conv("c2", 4)], input_shape=(4, 90, 90),
                     placement={"c1": {"output_processors": "0xf"}})
    _, _, _, problems = resolve(document)
    (problem,) = problems
    assert "remove given in_offset/out_offset values" in problem.advice


def test_processors_that_disagree_are_advised_the_keys_that_align_them():
    layers = [conv("c", 8), {"name": "gap", "op": "global_pool", "mode": "avg"},
              {"name": "gmp", "op": "global_pool", "mode": "max", "inputs": ["c"]},
              {"name": "cat", "op": "concat", "inputs": ["gap", "gmp"]},
              {"name": "fc", "op": "linear", "out": 3, "flatten": True}]
    _, _, _, problems = resolve(model(layers, input_shape=(1, 7, 9)))
    (problem,) = [p for p in problems if "reads 'c' on processors" in p.message]
    assert "put both on the same processors: placement.gmp.processors:" in problem.advice


# --- what the user reads --------------------------------------------------------------------------

def test_layout_problems_are_the_problem_then_its_advice():
    manifest, hw, profile = hardware(model([conv("dw", 8, groups=8)]))
    folded, _ = folding.fold_layers(manifest.model.layers)
    (found,) = [text for path, text in layout.problems(manifest, folded, {"dw": 8})
                if path[-1] == "groups"]
    assert found.endswith("(allowed: 1); use groups: 1 (a dense convolution); max78002 runs "
                          "this layer as it is (`target.device: max78002`)")


DEPTHWISE = """\
    name: dw
    dataset: {format: sklearn-digits}
    model:
      input: [1, 8, 8]
      layers:
        - {name: c, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}
        - {name: dw, op: conv2d, out: 8, groups: 8, kernel: 3, pad: 1, act: relu}
        - {name: fc, op: linear, out: 10, flatten: true}
    target: {device: max78000}
    """


def test_check_prints_the_advice(tmp_path: Path):
    (tmp_path / "edgebuild.yaml").write_text(textwrap.dedent(DEPTHWISE))
    result = run_cli(["check"], tmp_path)
    assert result.returncode != 0
    assert "model.layers[1].groups: layer 'dw': groups 8 with 8 input and 8 output channels " \
           "is not supported on max78000 (allowed: 1); use groups: 1 (a dense convolution); " \
           "max78002 runs this layer as it is (`target.device: max78002`)" in result.stderr

