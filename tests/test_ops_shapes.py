"""Shape inference, parameter and MAC counts of every op, through edgebuild.model.graph.build."""

from __future__ import annotations

import math
import random

import pytest

from edgebuild.manifest import Model
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import Role


def build(input_shape, *layers):
    model = Model.model_validate({"input": list(input_shape), "layers": list(layers)})
    return graphs.build(model.input, model.layers)


def ok(input_shape, *layers) -> graphs.Graph:
    graph, problems = build(input_shape, *layers)
    assert problems == [], problems
    assert graph is not None
    return graph


def node(graph: graphs.Graph, name: str) -> graphs.Node:
    return next(n for n in graph.nodes if n.name == name)


def problem(input_shape, *layers) -> graphs.GraphProblem:
    """The single problem a broken model reports (and no graph)."""
    graph, problems = build(input_shape, *layers)
    assert graph is None
    assert len(problems) == 1, problems
    return problems[0]


def assert_names_layer(p: graphs.GraphProblem, index: int, name: str, op: str, *words: str):
    assert p.index == index
    assert f"layer {name!r} ({op})" in p.message, p.message
    for word in words:
        assert word in p.message, p.message


def conv2d(name="c", **fields):
    return {"name": name, "op": "conv2d", **fields}


def conv1d(name="c", **fields):
    return {"name": name, "op": "conv1d", **fields}


# --- conv2d --------------------------------------------------------------------------------


def test_conv2d_same_padding():
    g = ok((1, 8, 8), conv2d(out=8, kernel=3, pad=1))
    n = g.nodes[0]
    assert n.in_shapes == ((1, 8, 8),) and n.out_shape == (8, 8, 8)
    assert n.params == 8 * 1 * 9 + 8 == 80
    assert n.macs == 8 * 64 * 9 == 4608
    assert n.inputs == ("input",) and n.op == "conv2d"


def test_conv2d_valid_no_bias():
    n = ok((3, 10, 12), conv2d(out=4, kernel=3, bias=False)).nodes[0]
    assert n.out_shape == (4, 8, 10)
    assert n.params == 4 * 3 * 9
    assert n.macs == 4 * 80 * 3 * 9


def test_conv2d_stride():
    n = ok((2, 9, 9), conv2d(out=6, kernel=3, stride=2, pad=1)).nodes[0]
    assert n.out_shape == (6, 5, 5)
    assert n.params == 6 * 2 * 9 + 6
    assert n.macs == 6 * 25 * 2 * 9


def test_conv2d_rectangular_kernel_stride_pad():
    n = ok((1, 20, 11), conv2d(out=2, kernel=[5, 1], stride=[2, 1], pad=[2, 0])).nodes[0]
    assert n.out_shape == (2, (20 + 4 - 5) // 2 + 1, 11)  # (2, 10, 11)
    assert n.params == 2 * 5 + 2
    assert n.macs == 2 * 10 * 11 * 5


def test_conv2d_dilation():
    n = ok((1, 16, 16), conv2d(out=1, kernel=3, dilation=2)).nodes[0]
    assert n.out_shape == (1, 12, 12)  # span 5
    assert n.params == 10  # dilation adds no weights
    assert n.macs == 144 * 9


def test_conv2d_depthwise():
    n = ok((16, 8, 8), conv2d(out=16, kernel=3, pad=1, groups=16)).nodes[0]
    assert n.out_shape == (16, 8, 8)
    assert n.params == 16 * 1 * 9 + 16
    assert n.macs == 16 * 64 * 9


def test_conv2d_grouped():
    n = ok((8, 6, 6), conv2d(out=12, kernel=1, groups=4)).nodes[0]
    assert n.out_shape == (12, 6, 6)
    assert n.params == 12 * 2 + 12
    assert n.macs == 12 * 36 * 2


def test_conv2d_fused_max_pool_pools_the_input_first():
    # MAX78000: pool 8x8 -> 4x4, then the 3x3 pad-1 conv runs on 4x4.
    n = ok((8, 8, 8), conv2d(out=16, kernel=3, pad=1, pool={"mode": "max", "size": 2})).nodes[0]
    assert n.in_shapes == ((8, 8, 8),)
    assert n.out_shape == (16, 4, 4)
    assert n.params == 16 * 8 * 9 + 16 == 1168
    assert n.macs == 16 * 16 * 8 * 9  # MACs at the pooled resolution, not 8x8


def test_conv2d_fused_pool_stride_and_rectangle():
    pool = {"mode": "avg", "size": [3, 2], "stride": [2, 1]}
    n = ok((4, 9, 6), conv2d(out=4, kernel=1, pool=pool)).nodes[0]
    assert n.out_shape == (4, 4, 5)
    assert n.macs == 4 * 20 * 4


def test_conv2d_pool_then_conv_differs_from_conv_then_pool():
    fused = ok((1, 8, 8), conv2d(out=1, kernel=3, pool={"mode": "max", "size": 2})).nodes[0]
    assert fused.out_shape == (1, 2, 2)  # pool 8->4, conv 4->2 (conv first would give 3)


# --- conv1d --------------------------------------------------------------------------------


def test_conv1d_basic():
    n = ok((12, 25), conv1d(out=32, kernel=3, pad=1)).nodes[0]
    assert n.out_shape == (32, 25)
    assert n.params == 32 * 12 * 3 + 32
    assert n.macs == 32 * 25 * 12 * 3


def test_conv1d_stride_dilation_pad():
    n = ok((2, 50), conv1d(out=3, kernel=5, stride=3, pad=2, dilation=2, bias=False)).nodes[0]
    assert n.out_shape == (3, (50 + 4 - 9) // 3 + 1)  # 16
    assert n.params == 3 * 2 * 5
    assert n.macs == 3 * 16 * 2 * 5


def test_conv1d_depthwise_and_fused_pool():
    layer = conv1d(out=6, kernel=3, groups=6, pad=1, pool={"mode": "avg", "size": 2})
    n = ok((6, 25), layer).nodes[0]
    assert n.out_shape == (6, 12)
    assert n.params == 6 * 3 + 6
    assert n.macs == 6 * 12 * 3


def test_conv1d_fused_pool_with_stride():
    n = ok((1, 20), conv1d(out=1, kernel=1, pool={"mode": "max", "size": 4, "stride": 2})).nodes[0]
    assert n.out_shape == (1, 9)


# --- pools, flatten, linear, add, concat, batchnorm, dropout -------------------------------


def test_pool2d():
    g = ok((3, 9, 8), {"name": "p", "op": "pool2d", "mode": "max", "size": 2},
           {"name": "q", "op": "pool2d", "mode": "avg", "size": [2, 1], "stride": [1, 2]})
    assert node(g, "p").out_shape == (3, 4, 4)
    assert node(g, "q").out_shape == (3, 3, 2)
    assert g.params == 0 and g.macs == 0


def test_pool1d():
    g = ok((5, 30), {"name": "p", "op": "pool1d", "mode": "avg", "size": 4},
           {"name": "q", "op": "pool1d", "mode": "max", "size": 3, "stride": 1})
    assert node(g, "p").out_shape == (5, 7)
    assert node(g, "q").out_shape == (5, 5)
    assert g.params == 0 and g.macs == 0


def test_flatten_is_channel_major_product():
    g = ok((4, 3, 5), {"name": "f", "op": "flatten"})
    assert g.output.out_shape == (60,) and g.params == 0 and g.macs == 0
    assert ok((7,), {"name": "f", "op": "flatten"}).output.out_shape == (7,)


def test_linear():
    g = ok((20,), {"name": "fc", "op": "linear", "out": 5})
    assert g.output.out_shape == (5,)
    assert g.output.params == 105 and g.output.macs == 100
    g = ok((20,), {"name": "fc", "op": "linear", "out": 5, "bias": False})
    assert g.output.params == 100


def test_linear_with_flatten_flag():
    n = ok((8, 8, 8), {"name": "fc", "op": "linear", "out": 10, "flatten": True}).nodes[0]
    assert n.out_shape == (10,)
    assert n.params == 5130 and n.macs == 5120


def test_linear_after_flatten_layer():
    g = ok((2, 3, 4), {"name": "f", "op": "flatten"}, {"name": "fc", "op": "linear", "out": 3})
    assert g.output.in_shapes == ((24,),) and g.output.params == 75 and g.output.macs == 72


def test_linear_requires_flatten_for_non_flat_input():
    for shape in ((8, 8, 8), (4, 10)):
        p = problem(shape, {"name": "fc", "op": "linear", "out": 10})
        assert_names_layer(p, 0, "fc", "linear", "flat input", "flatten: true",
                           str(list(shape)))


def test_batchnorm_and_dropout_keep_shape():
    g = ok((6, 5, 5), conv2d(out=4, kernel=3), {"name": "bn", "op": "batchnorm"},
           {"name": "drop", "op": "dropout", "p": 0.2})
    assert node(g, "bn").out_shape == node(g, "drop").out_shape == (4, 3, 3)
    assert node(g, "bn").params == 8 and node(g, "bn").macs == 0
    assert node(g, "drop").params == 0 and node(g, "drop").macs == 0
    g = ok((9,), {"name": "fc", "op": "linear", "out": 7}, {"name": "bn", "op": "batchnorm"},
           {"name": "drop", "op": "dropout"})
    assert node(g, "bn").out_shape == g.output.out_shape == (7,)
    assert node(g, "bn").params == 14
    assert ok((3, 7), {"name": "d", "op": "dropout"}).output.out_shape == (3, 7)


def test_add_residual():
    g = ok((8, 6, 6),
           conv2d("a", out=8, kernel=3, pad=1),
           conv2d("b", out=8, kernel=3, pad=1),
           {"name": "sum", "op": "add", "inputs": ["a", "b"]},
           {"name": "skip", "op": "add", "inputs": ["input", "sum", "a"]})
    assert node(g, "b").inputs == ("a",)
    assert node(g, "sum").inputs == ("a", "b")
    assert node(g, "sum").out_shape == (8, 6, 6)
    assert node(g, "skip").in_shapes == ((8, 6, 6),) * 3
    assert node(g, "sum").params == node(g, "sum").macs == 0
    assert g.params == 2 * (8 * 8 * 9 + 8)


def test_concat_channels():
    g = ok((3, 8, 8),
           conv2d("a", out=4, kernel=3, pad=1),
           conv2d("b", inputs=["input"], out=5, kernel=1),
           {"name": "cat", "op": "concat", "inputs": ["a", "b", "input"]},
           conv2d("after", out=2, kernel=1))
    assert node(g, "b").inputs == ("input",)
    assert node(g, "cat").out_shape == (12, 8, 8)
    assert node(g, "after").in_shapes == ((12, 8, 8),)
    assert node(g, "after").params == 2 * 12 + 2


def test_concat_1d():
    g = ok((2, 10), conv1d("a", out=3, kernel=1), {"name": "cat", "op": "concat",
                                                    "inputs": ["input", "a"]})
    assert g.output.out_shape == (5, 10)


def test_inputs_default_to_previous_layer():
    g = ok((1, 8, 8), conv2d("a", out=2, kernel=3), conv2d("b", out=2, kernel=3))
    assert node(g, "b").inputs == ("a",) and node(g, "b").in_shapes == ((2, 6, 6),)


def test_graph_totals_and_json():
    import json

    g = ok((1, 8, 8), conv2d("conv1", out=8, kernel=3, pad=1),
           {"name": "fc", "op": "linear", "out": 10, "flatten": True})
    assert g.params == 80 + 5130 and g.macs == 4608 + 5120
    assert g.output.name == "fc"
    data = json.loads(json.dumps(g.to_json()))
    assert data["input"] == [1, 8, 8] and data["params"] == 5210 and data["macs"] == 9728
    assert [n["out_shape"] for n in data["nodes"]] == [[8, 8, 8], [10]]
    table = graphs.table(g)
    assert "conv1" in table and "5210" in table and "9728" in table


def test_every_op_module_is_registered():
    """Each `Operator` an ops/ module defines is in the registry (ops/__init__.py), under
    its name: an op module that is not registered is never used."""
    import importlib
    import pkgutil

    import edgebuild.ops
    from edgebuild.ops.operator import Operator

    registered = {id(op) for op in OPS.values()}
    for info in pkgutil.iter_modules(edgebuild.ops.__path__):
        module = importlib.import_module(f"edgebuild.ops.{info.name}")
        for attribute, value in vars(module).items():
            if isinstance(value, Operator):
                assert id(value) in registered, (
                    f"ops/{info.name}.py defines {attribute} (op {value.name!r}) but the "
                    f"registry lacks it: add {info.name}.{attribute} to OPS in "
                    "edgebuild/ops/__init__.py")
    assert all(OPS[name].name == name for name in OPS)


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_example_counts_params_and_macs_by_role(name):
    """Each op's example (ops/operator.py: Example): a compute op has parameters and
    multiply-accumulates, an op without weights neither (batchnorm's statistics fold)."""
    op = OPS[name]
    g = ok(op.example.input, *op.example.layers)
    for n in g.nodes:
        if n.op == name:
            assert (n.params > 0) == (op.computes or op.role is Role.folded), (name, n.params)
            assert (n.macs > 0) == op.computes, (name, n.macs)
            assert all(d >= 1 for d in n.out_shape), n.out_shape


def test_passthrough_is_the_identity_in_shape_torch_and_reference():
    import numpy as np
    import torch

    from edgebuild.ops.operator import Mode

    layer = OPS["passthrough"].params(name="copy", op="passthrough")
    assert OPS["passthrough"].out_shape(layer, [(3, 5, 7)]) == (3, 5, 7)
    x = np.arange(-60, 45, dtype=np.int64).reshape(1, 3, 5, 7)
    assert np.array_equal(OPS["passthrough"].reference(layer, None, [x], "half_up"), x)
    t = torch.ones(2, 3, 4)
    assert OPS["passthrough"].torch.forward(layer, None, [t], Mode("float")) is t


# --- problems: right index, message names the layer ----------------------------------------


def test_conv2d_on_wrong_rank():
    p = problem((12, 25), conv2d("img", out=4))
    assert_names_layer(p, 0, "img", "conv2d", "(channels, height, width)", "[12, 25]")


def test_conv1d_on_wrong_rank():
    p = problem((1, 8, 8), conv1d("sig", out=4))
    assert_names_layer(p, 0, "sig", "conv1d", "(channels, length)")


def test_pool_on_wrong_rank():
    p = problem((10,), {"name": "p", "op": "pool1d", "mode": "max", "size": 2})
    assert_names_layer(p, 0, "p", "pool1d", "(channels, length)")
    p = problem((3, 10), {"name": "p2", "op": "pool2d", "mode": "max", "size": 2})
    assert_names_layer(p, 0, "p2", "pool2d", "(channels, height, width)")


def test_kernel_larger_than_input():
    p = problem((1, 8, 8), conv2d("big", out=4, kernel=11))
    assert_names_layer(p, 0, "big", "conv2d", "window of 11", "padded input length 8")
    p = problem((1, 4), conv1d("dil", out=1, kernel=3, dilation=3))
    assert_names_layer(p, 0, "dil", "conv1d", "window of 7")


def test_pool_larger_than_input():
    p = problem((2, 3, 3), {"name": "p", "op": "pool2d", "mode": "avg", "size": 4})
    assert_names_layer(p, 0, "p", "pool2d", "window of 4")
    p = problem((2, 3, 3), conv2d("fused", out=2, kernel=1, pool={"mode": "max", "size": 4}))
    assert_names_layer(p, 0, "fused", "conv2d", "window of 4")


def test_fused_pool_then_kernel_too_large():
    # 8x8 pooled by 4 is 2x2: a 3x3 kernel no longer fits (fused pool comes first).
    p = problem((1, 8, 8), conv2d("late", out=1, kernel=3, pool={"mode": "max", "size": 4}))
    assert_names_layer(p, 0, "late", "conv2d", "padded input length 2")


def test_conv1d_pool_must_be_single_integer():
    p = problem((2, 10), conv1d("c1", out=2, kernel=1, pool={"mode": "max", "size": [2, 2]}))
    assert_names_layer(p, 0, "c1", "conv1d", "pool.size must be a single integer")
    p = problem((2, 10), conv1d("c2", out=2, kernel=1,
                                pool={"mode": "max", "size": 2, "stride": [1, 1]}))
    assert_names_layer(p, 0, "c2", "conv1d", "pool.stride")


@pytest.mark.parametrize(("channels", "out", "groups"), [(6, 4, 4), (4, 6, 4), (3, 3, 2)])
def test_groups_must_divide_channels(channels, out, groups):
    p = problem((channels, 8, 8), conv2d("g", out=out, groups=groups))
    assert_names_layer(p, 0, "g", "conv2d", f"groups={groups}", f"({channels})", f"({out})")
    p = problem((channels, 8), conv1d("g1", out=out, groups=groups))
    assert_names_layer(p, 0, "g1", "conv1d", f"groups={groups}")


def test_add_shape_mismatch():
    p = problem((4, 8, 8), conv2d("a", out=4, kernel=3), conv2d("b", inputs=["input"], out=4),
                {"name": "res", "op": "add", "inputs": ["a", "input"]})
    assert_names_layer(p, 2, "res", "add", "a=[4, 6, 6]", "input=[4, 8, 8]")


def test_concat_spatial_mismatch():
    p = problem((4, 8, 8), conv2d("a", out=4, kernel=3),
                {"name": "cat", "op": "concat", "inputs": ["a", "input"]})
    assert_names_layer(p, 1, "cat", "concat", "a=[4, 6, 6]")


def test_concat_flat_features():
    g = ok((16,), {"name": "a", "op": "linear", "out": 4},
           {"name": "cat", "op": "concat", "inputs": ["a", "input"]})
    assert g.output.out_shape == (20,)


def test_concat_rank_mismatch():
    p = problem((2, 4, 4), {"name": "f", "op": "flatten"},
                {"name": "cat", "op": "concat", "inputs": ["f", "input"]})
    assert_names_layer(p, 1, "cat", "concat", "all other dimensions must match")


def test_single_input_op_given_two_inputs():
    p = problem((4, 8, 8), conv2d("two", inputs=["input", "input"], out=2))
    assert_names_layer(p, 0, "two", "conv2d", "exactly one input, got 2")


def test_unknown_input_name():
    graph, problems = build((1, 8, 8), conv2d("a", out=2, kernel=1),
                            {"name": "sum", "op": "add", "inputs": ["a", "nope"]})
    assert graph is None
    assert [(p.index, p.field) for p in problems] == [(1, "inputs")]
    assert "'nope'" in problems[0].message and "earlier: input, a" in problems[0].message


def test_forward_reference_is_an_error():
    graph, problems = build((1, 8, 8), conv2d("a", inputs=["b"], out=2, kernel=1),
                            conv2d("b", inputs=["input"], out=2, kernel=1))
    assert [(p.index, p.field) for p in problems] == [(0, "inputs")]


def test_duplicate_names():
    graph, problems = build((1, 8, 8), conv2d("a", out=2, kernel=1), conv2d("a", out=2, kernel=1))
    assert [(p.index, p.field) for p in problems] == [(1, "name")]
    assert "used twice" in problems[0].message
    graph, problems = build((1, 8, 8), conv2d("input", out=2, kernel=1))
    assert [(p.index, p.field) for p in problems] == [(0, "name")]


def test_wide_only_on_last_layer():
    graph, problems = build((1, 8, 8), conv2d("a", out=2, kernel=1, wide=True),
                            {"name": "fc", "op": "linear", "out": 10, "flatten": True})
    assert graph is None
    assert [(p.index, p.field) for p in problems] == [(0, "wide")]
    ok((1, 8, 8), conv2d("a", out=2, kernel=1),
       {"name": "fc", "op": "linear", "out": 10, "flatten": True, "wide": True})


def test_independent_problems_are_all_reported():
    graph, problems = build((1, 8, 8),
                            conv2d("bad1", out=4, kernel=11),
                            conv2d("good", inputs=["input"], out=4, kernel=3),
                            {"name": "bad2", "op": "linear", "out": 10},
                            {"name": "fc", "op": "linear", "inputs": ["good"], "out": 10,
                             "flatten": True})
    assert graph is None
    assert [p.index for p in problems] == [0, 2]
    assert "'bad1'" in problems[0].message and "'bad2'" in problems[1].message


def test_failed_layer_does_not_cascade_into_false_input_errors():
    """Layers downstream of a broken layer are not blamed for naming it."""
    graph, problems = build((1, 8, 8), conv2d("conv1", out=8, kernel=11),
                            conv2d("conv2", out=8, kernel=3),
                            {"name": "fc", "op": "linear", "out": 10, "flatten": True})
    assert graph is None
    assert len(problems) == 1, problems
    assert_names_layer(problems[0], 0, "conv1", "conv2d")


# --- cross-check against torch -------------------------------------------------------------


def _torch_conv(torch, dims, in_channels, length, cfg):
    import torch.nn.functional as F  # noqa: N812

    x = torch.zeros((1, in_channels, *([length] * dims)))
    pool = cfg.get("pool")
    if pool is not None:
        pool_fn = F.max_pool1d if dims == 1 else F.max_pool2d
        x = pool_fn(x, pool["size"], pool.get("stride") or pool["size"])
    weight = torch.zeros((cfg["out"], in_channels // cfg["groups"], *([cfg["kernel"]] * dims)))
    conv = F.conv1d if dims == 1 else F.conv2d
    return tuple(conv(x, weight, None, cfg["stride"], cfg["pad"], cfg["dilation"],
                      cfg["groups"]).shape[1:])


def test_conv_shapes_match_torch():
    torch = pytest.importorskip("torch")
    rng = random.Random(1234)
    compared = rejected = 0
    for trial in range(40):
        dims = 1 + trial % 2
        groups = rng.choice([1, 1, 2, 3])
        in_channels = groups * rng.randint(1, 3)
        cfg = {"out": groups * rng.randint(1, 3), "groups": groups,
               "kernel": rng.randint(1, 5), "stride": rng.randint(1, 3),
               "pad": rng.randint(0, 2), "dilation": rng.randint(1, 3)}
        if rng.random() < 0.3:
            cfg["pool"] = {"mode": "max", "size": rng.randint(1, 3)}
            if rng.random() < 0.5:
                cfg["pool"]["stride"] = rng.randint(1, 3)
        length = rng.randint(1, 16)
        shape = (in_channels, *([length] * dims))
        layer = {"name": "c", "op": f"conv{dims}d", **cfg}
        try:
            expected = _torch_conv(torch, dims, in_channels, length, cfg)
        except RuntimeError:
            expected = None
        graph, problems = build(shape, layer)
        if expected is None or 0 in expected:
            assert graph is None and problems and problems[0].index == 0, (shape, cfg)
            rejected += 1
            continue
        assert problems == [], (shape, cfg, problems)
        n = graph.nodes[0]
        assert n.out_shape == expected, (shape, cfg)
        module = (torch.nn.Conv1d if dims == 1 else torch.nn.Conv2d)(
            in_channels, cfg["out"], cfg["kernel"], groups=groups)
        assert n.params == sum(p.numel() for p in module.parameters()), (shape, cfg)
        per_output = (in_channels // groups) * cfg["kernel"] ** dims
        assert n.macs == math.prod(expected) * per_output, (shape, cfg)
        compared += 1
    assert compared >= 20 and rejected >= 3, (compared, rejected)


def test_pool_shapes_match_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F  # noqa: N812

    rng = random.Random(99)
    for trial in range(30):
        dims = 1 + trial % 2
        size, stride = rng.randint(1, 4), rng.choice([None, 1, 2, 3])
        length = rng.randint(size, 12)
        x = torch.zeros((1, 3, *([length] * dims)))
        pool_fn = F.avg_pool1d if dims == 1 else F.avg_pool2d
        expected = tuple(pool_fn(x, size, stride or size).shape[1:])
        layer = {"name": "p", "op": f"pool{dims}d", "mode": "avg", "size": size}
        if stride is not None:
            layer["stride"] = stride
        assert ok(x.shape[1:], layer).output.out_shape == expected, (length, layer)


def test_unknown_name_still_reported_next_to_a_failed_layer():
    graph, problems = build((1, 8, 8), conv2d("bad", out=2, kernel=11),
                            {"name": "sum", "op": "add", "inputs": ["bad", "nope"]})
    assert [(p.index, p.field) for p in problems] == [(0, ""), (1, "inputs")]
    assert "'nope'" in problems[1].message


# --- conv_transpose2d ------------------------------------------------------------------------


def convt(name="u", **fields):
    return {"name": name, "op": "conv_transpose2d", **fields}


def test_conv_transpose2d_defaults_double_height_and_width():
    n = ok((4, 11, 11), convt(out=8)).nodes[0]  # 3x3, stride 2, pad 1, output_pad 1
    assert n.out_shape == (8, 22, 22)
    assert n.params == 4 * 8 * 9 + 8
    # each axis: 22 outputs x 3 taps, minus the taps that land between input samples or
    # outside: even outputs take tap 1 only, odd ones taps 0 and 2 (the last one tap 2 only)
    taps = 11 * 1 + 10 * 2 + 1
    assert n.macs == 8 * 4 * taps * taps


def test_conv_transpose2d_grouped_rectangular():
    n = ok((6, 3, 4), convt(out=4, groups=2, kernel=[2, 3], stride=[3, 1], pad=[0, 1],
                            output_pad=[2, 0], dilation=1, bias=False)).nodes[0]
    assert n.out_shape == (4, (3 - 1) * 3 + 2 + 2, 4 - 2 + 2)
    assert n.params == 6 * 2 * 2 * 3


def test_conv_transpose2d_fused_pool_pools_the_input_first():
    n = ok((2, 8, 8), convt(out=3, pool={"mode": "max", "size": 2})).nodes[0]
    assert n.out_shape == (3, 8, 8)


def test_conv_transpose2d_output_pad_must_be_below_stride_or_dilation():
    p = problem((2, 4, 4), convt("up", out=2, stride=2, output_pad=2))
    assert_names_layer(p, 0, "up", "conv_transpose2d", "output_pad 2", "smaller than the stride")


def test_conv_transpose2d_pad_that_crops_everything():
    p = problem((1, 1, 1), convt("up", out=2, kernel=1, stride=1, pad=1, output_pad=0))
    assert_names_layer(p, 0, "up", "conv_transpose2d", "crops the whole")


def test_conv_transpose2d_on_wrong_rank():
    p = problem((4, 10), convt("up", out=2))
    assert_names_layer(p, 0, "up", "conv_transpose2d", "(channels, height, width)")


def test_conv_transpose2d_shapes_params_and_macs_match_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F  # noqa: N812

    rng = random.Random(77)
    compared = rejected = 0
    for _ in range(60):
        groups = rng.choice([1, 1, 2])
        in_channels, out = groups * rng.randint(1, 3), groups * rng.randint(1, 3)
        cfg = {"out": out, "groups": groups, "kernel": rng.randint(1, 4),
               "stride": rng.randint(1, 3), "pad": rng.randint(0, 3),
               "output_pad": rng.randint(0, 2), "dilation": rng.randint(1, 2)}
        shape = (in_channels, rng.randint(1, 6), rng.randint(1, 6))
        module = torch.nn.ConvTranspose2d(in_channels, out, cfg["kernel"], cfg["stride"],
                                          cfg["pad"], cfg["output_pad"], groups,
                                          dilation=cfg["dilation"])
        try:
            expected = tuple(module(torch.zeros((1, *shape))).shape[1:])
        except RuntimeError:
            expected = None
        graph, problems = build(shape, convt(**cfg))
        if expected is None or 0 in expected:
            assert graph is None and problems[0].index == 0, (shape, cfg)
            rejected += 1
            continue
        assert problems == [], (shape, cfg, problems)
        n = graph.nodes[0]
        assert n.out_shape == expected, (shape, cfg)
        assert n.params == sum(p.numel() for p in module.parameters())
        # MACs = products that reach an output: all-ones data through all-ones weights
        ones = torch.ones((in_channels, out // groups, cfg["kernel"], cfg["kernel"]))
        reached = F.conv_transpose2d(torch.ones((1, *shape)), ones, None, cfg["stride"],
                                     cfg["pad"], cfg["output_pad"], groups, cfg["dilation"])
        assert n.macs == int(reached.sum()), (shape, cfg)
        compared += 1
    assert compared >= 25 and rejected >= 3, (compared, rejected)


# --- reshape ---------------------------------------------------------------------------------


def test_reshape_1d_to_2d_keeps_channels_first_order():
    import numpy as np
    import torch

    from edgebuild.ops.operator import Mode

    g = ok((3, 12), {"name": "r", "op": "reshape", "shape": [3, 4, 3]},
           conv2d(out=2, kernel=3, pad=1))
    assert g.nodes[0].out_shape == (3, 4, 3) and g.nodes[0].params == g.nodes[0].macs == 0
    assert g.output.out_shape == (2, 4, 3)
    layer = OPS["reshape"].params(name="r", op="reshape", shape=(3, 4, 3))
    x = np.arange(2 * 36).reshape(2, 3, 12)
    out = OPS["reshape"].reference(layer, None, [x], "half_up")
    assert out.shape == (2, 3, 4, 3) and out[1, 2, 1, 0] == x[1, 2, 3]
    t = torch.as_tensor(x)
    assert torch.equal(OPS["reshape"].torch.forward(layer, None, [t], Mode("float")),
                       torch.as_tensor(out))


def test_reshape_may_change_channels_on_a_cpu():
    g = ok((4, 6), {"name": "r", "op": "reshape", "shape": [2, 12]})
    assert g.output.out_shape == (2, 12)


def test_reshape_must_keep_the_number_of_values():
    p = problem((3, 12), {"name": "r", "op": "reshape", "shape": [3, 5, 3]})
    assert_names_layer(p, 0, "r", "reshape", "[3, 12] (36 values)", "[3, 5, 3] (45 values)",
                       "must stay the same")
