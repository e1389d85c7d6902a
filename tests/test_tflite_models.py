"""tests/tflite_models.py writes TFLite flatbuffers that LiteRT loads and runs as described:
the file's layout read back with the `tflite` schema classes, hand-made graphs whose int8
results are known exactly (layouts, channel orders, options), and the random generators over
many seeds (load, run, shapes, dtypes, outputs that vary and do not saturate)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tflite
import tflite_models as tm
from tflite_models import Graph, Op, Tensor

GENERATORS = {
    "conv": tm.random_conv,
    "depthwise": tm.random_depthwise,
    "fc": tm.random_fc,
    "pool": tm.random_pool,
    "add": tm.random_add,
    "softmax": tm.random_softmax,
    "chain": tm.random_chain,
    "unsupported": tm.random_unsupported,
}


def _read(model: bytes):
    m = tflite.Model.GetRootAs(model, 0)
    return m, m.Subgraphs(0)


def _options(op, cls):
    table = op.BuiltinOptions()
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    return opts


def _tensor_index(sub, name: str) -> int:
    names = [sub.Tensors(i).Name().decode() for i in range(sub.TensorsLength())]
    return names.index(name)


# --- the file ------------------------------------------------------------------------------


def test_layout_is_schema_3_with_empty_buffer_0_and_both_opcode_fields():
    graph = tm.random_chain(np.random.default_rng(3), float_io=True)
    model = tm.write(graph)
    m, sub = _read(model)
    assert tflite.Model.ModelBufferHasIdentifier(model, 0)  # "TFL3"
    assert m.Version() == 3 and m.SubgraphsLength() == 1
    assert m.Buffers(0).DataLength() == 0
    kinds = [op.kind for op in graph.ops]
    assert kinds[0] == "QUANTIZE" and kinds[-1] == "DEQUANTIZE"
    codes = [m.OperatorCodes(sub.Operators(i).OpcodeIndex()) for i in range(sub.OperatorsLength())]
    for kind, code in zip(kinds, codes, strict=True):
        value = getattr(tflite.BuiltinOperator, kind)
        assert code.BuiltinCode() == value
        assert code.DeprecatedBuiltinCode() == min(value, 127)
        assert code.Version() == tm.VERSIONS.get(kind, 1)  # int8 forms
    # every constant has its own buffer holding its bytes; activations point at buffer 0
    for t in graph.tensors:
        fb = sub.Tensors(_tensor_index(sub, t.name))
        assert tuple(fb.ShapeAsNumpy()) == t.shape
        data = m.Buffers(fb.Buffer()).DataAsNumpy()
        if t.data is None:
            assert fb.Buffer() == 0
        else:
            assert fb.Buffer() > 0 and data.tobytes() == t.data.tobytes()
    assert [sub.Inputs(0)] == [_tensor_index(sub, graph.inputs[0])]
    assert sub.Tensors(sub.Inputs(0)).Type() == tflite.TensorType.FLOAT32


def test_quantization_follows_the_converter():
    graph = tm.random_chain(np.random.default_rng(5))
    m, sub = _read(tm.write(graph))

    def quant(name):
        q = sub.Tensors(_tensor_index(sub, name)).Quantization()
        return q.ScaleAsNumpy(), q.ZeroPointAsNumpy(), q.QuantizedDimension()

    conv_w, dw_w = graph.tensor("conv0/weights"), graph.tensor("depthwise_conv_2d0/weights")
    scales, zps, axis = quant("conv0/weights")
    assert axis == 0 and len(scales) == conv_w.shape[0] and not zps.any()
    scales, zps, axis = quant("depthwise_conv_2d0/weights")
    assert axis == 3 and len(scales) == dw_w.shape[3] and not zps.any()
    for layer in ("conv0", "depthwise_conv_2d0", "fully_connected0"):
        op = next(op for op in graph.ops if op.outputs[0] == f"{layer}/out")
        x, w, b = (graph.tensor(n) for n in op.inputs)
        assert b.dtype == "int32" and b.zero_point == 0
        expected = np.float32(x.scales[0]) * np.asarray(w.scales, dtype=np.float32)
        np.testing.assert_allclose(quant(b.name)[0], expected, rtol=1e-6)  # per-tensor too
        assert np.abs(w.data).max() <= 127  # symmetric: -128 unused
    assert quant("softmax0/out")[:2] == (pytest.approx([1 / 256]), [-128])
    for op in graph.ops:  # pools and reshape keep their input's quantization
        if op.kind in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "RESHAPE"):
            a, b = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
            assert (a.scale, a.zero_point) == (b.scale, b.zero_point)


def test_options_are_written():
    graph = tm.random_conv(np.random.default_rng(0), shape=(1, 9, 9, 2), kernel=(3, 2),
                           stride=(2, 1), padding="SAME", dilation=1, activation="RELU6")
    _, sub = _read(tm.write(graph))
    o = _options(sub.Operators(0), tflite.Conv2DOptions)
    assert (o.StrideH(), o.StrideW(), o.Padding()) == (2, 1, tflite.Padding.SAME)
    assert o.FusedActivationFunction() == tflite.ActivationFunctionType.RELU6
    assert (o.DilationHFactor(), o.DilationWFactor()) == (1, 1)
    # RELU6 is in the output's quantization: zero point -128, scale at most 6/255
    out = graph.tensor(graph.outputs[0])
    assert out.zero_point == -128 and out.scales[0] <= 6 / 255 + 1e-9

    svdf = Graph(
        (Tensor("x", (1, 4), dtype="float32"), Tensor("y", (1, 2), dtype="float32")),
        (Op("SVDF", ("x",), ("y",), {"rank": 2, "activation": "RELU"}),), ("x",), ("y",))
    m, sub = _read(tm.write(svdf))
    assert m.OperatorCodes(0).BuiltinCode() == tflite.BuiltinOperator.SVDF
    o = _options(sub.Operators(0), tflite.SVDFOptions)
    assert (o.Rank(), o.FusedActivationFunction()) == (2, tflite.ActivationFunctionType.RELU)


def test_mistakes_are_refused():
    x = Tensor("x", (1, 4), 0, 0.1)
    with pytest.raises(ValueError, match="unknown options"):
        tm.write(Graph((x,), (Op("SOFTMAX", ("x",), ("x",), {"betta": 1.0}),), ("x",), ("x",)))
    with pytest.raises(ValueError, match="not a TFLite BuiltinOperator"):
        tm.write(Graph((x,), (Op("CONV2D", ("x",), ("x",)),), ("x",), ("x",)))
    with pytest.raises(ValueError, match="no tensor named"):
        tm.write(Graph((x,), (Op("TANH", ("y",), ("x",)),), ("x",), ("x",)))
    with pytest.raises(ValueError, match="not of shape"):
        Tensor("w", (2, 2), data=np.zeros(3))


def test_write_file_and_determinism(tmp_path):
    a = tm.random_chain(np.random.default_rng(11))
    b = tm.random_chain(np.random.default_rng(11))
    path = tm.write_file(a, tmp_path / "chain.tflite")
    assert path.read_bytes() == tm.write(b)
    assert tm.write(tm.random_chain(np.random.default_rng(12))) != path.read_bytes()


# --- exact semantics on hand-made graphs ---------------------------------------------------


def _unit(name, shape, data=None, dtype="int8"):
    """A tensor of scale 1, zero point 0: int8 arithmetic is then exact."""
    return Tensor(name, shape, 0, 1.0, data, dtype)


def _run1(graph, *inputs):
    return tm.run_litert(tm.write(graph), list(inputs))[0]


def test_conv_weights_are_ohwi_and_per_channel_on_axis_0():
    rng = np.random.default_rng(0)
    x = rng.integers(-5, 6, size=(3, 4, 5, 2)).astype(np.int8)
    w = np.zeros((3, 1, 1, 2))
    w[0, 0, 0, 0], w[1, 0, 0, 1], w[2, 0, 0, :] = 2, 3, 1  # out c reads in channels per OHWI
    graph = Graph(
        (_unit("x", (1, 4, 5, 2)),
         Tensor("w", (3, 1, 1, 2), 0, (1.0, 1.0, 1.0), w, "int8", 0),
         Tensor("b", (3,), 0, (1.0, 1.0, 1.0), [10, 0, -10], "int32"),
         _unit("y", (1, 4, 5, 3))),
        (Op("CONV_2D", ("x", "w", "b"), ("y",)),), ("x",), ("y",))
    y = _run1(graph, x)
    expected = np.stack([2 * x[..., 0] + 10, 3 * x[..., 1], x.sum(-1).astype(int) - 10], -1)
    np.testing.assert_array_equal(y, expected)


def test_depthwise_output_channel_is_c_times_multiplier_plus_m():
    x = np.random.default_rng(1).integers(-10, 11, size=(2, 3, 3, 2)).astype(np.int8)
    mult = 2
    w = np.zeros((1, 1, 1, 4))
    w[0, 0, 0, :] = [1, 2, 1, 2]  # channel c * 2 + m scales by m + 1
    graph = Graph(
        (_unit("x", (1, 3, 3, 2)),
         Tensor("w", (1, 1, 1, 4), 0, (1.0,) * 4, w, "int8", 3),
         Tensor("b", (4,), 0, (1.0,) * 4, [0, 0, 50, 50], "int32"),
         _unit("y", (1, 3, 3, 4))),
        (Op("DEPTHWISE_CONV_2D", ("x", "w", "b"), ("y",), {"depth_multiplier": mult}),),
        ("x",), ("y",))
    y = _run1(graph, x)
    c0, c1 = x[..., 0].astype(int), x[..., 1].astype(int)
    np.testing.assert_array_equal(y, np.stack([c0, 2 * c0, c1 + 50, 2 * c1 + 50], -1))


def test_fc_weights_are_out_by_in_and_pools_strides_padding():
    x = np.random.default_rng(2).integers(-9, 10, size=(4, 3)).astype(np.int8)
    w = np.array([[1, 0, 0], [1, 1, 1], [0, 0, -2]])
    fc = Graph((_unit("x", (1, 3)), Tensor("w", (3, 3), 0, 1.0, w),
                Tensor("b", (3,), 0, 1.0, [0, 1, 2], "int32"), _unit("y", (1, 3))),
               (Op("FULLY_CONNECTED", ("x", "w", "b"), ("y",), {"activation": "RELU"}),),
               ("x",), ("y",))
    np.testing.assert_array_equal(_run1(fc, x), np.maximum(x.astype(int) @ w.T + [0, 1, 2], 0))
    # no bias: an omitted input ("" -> -1) keeps version 4; no third input at all is version 6
    for inputs, version in ((("x", "w", ""), 4), (("x", "w"), 6)):
        nobias = Graph(fc.tensors, (Op("FULLY_CONNECTED", inputs, ("y",)),), ("x",), ("y",))
        model = tm.write(nobias)
        assert _read(model)[0].OperatorCodes(0).Version() == version
        np.testing.assert_array_equal(tm.run_litert(model, [x])[0], x.astype(int) @ w.T)

    img = np.random.default_rng(3).integers(-100, 100, size=(2, 5, 5, 1)).astype(np.int8)
    pool = Graph((_unit("x", (1, 5, 5, 1)), _unit("y", (1, 3, 3, 1))),
                 (Op("MAX_POOL_2D", ("x",), ("y",),
                     {"filter": 2, "stride": 2, "padding": "SAME"}),), ("x",), ("y",))
    padded = np.pad(img, ((0, 0), (0, 1), (0, 1), (0, 0)), constant_values=-128)
    expected = padded.reshape(2, 3, 2, 3, 2, 1).max(axis=(2, 4))  # SAME pads after only
    np.testing.assert_array_equal(_run1(pool, img), expected)


@pytest.mark.parametrize("form", ["option", "tensor", "both"])
def test_reshape_forms_and_add(form):
    x = np.random.default_rng(4).integers(-60, 60, size=(3, 2, 2, 3)).astype(np.int8)
    tensors = [_unit("x", (1, 2, 2, 3)), _unit("r", (1, 12)), _unit("y", (1, 12))]
    inputs = ("x",)
    if form != "option":
        tensors.append(Tensor("shape", (2,), data=[1, 12], dtype="int32"))
        inputs = ("x", "shape")
    opts = {} if form == "tensor" else {"new_shape": (1, 12)}
    graph = Graph(tuple(tensors), (Op("RESHAPE", inputs, ("r",), opts),
                                   Op("ADD", ("r", "r"), ("y",))), ("x",), ("y",))
    np.testing.assert_array_equal(_run1(graph, x), 2 * x.reshape(3, 12).astype(int))


# --- the generators ------------------------------------------------------------------------


def _kwargs(name: str, seed: int) -> dict:
    kw: dict = {"float_io": seed % 4 == 3}
    if name == "unsupported":
        kw["kind"] = sorted(tm.UNSUPPORTED)[seed % len(tm.UNSUPPORTED)]
    if name == "add":
        kw["constant"] = seed % 2 == 1
    return kw


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_generator_models_run_with_varied_unsaturated_outputs(name):
    for seed in range(24):
        rng = np.random.default_rng(seed)
        kw = _kwargs(name, seed)
        graph = GENERATORS[name](rng, **kw)
        inputs = tm.random_inputs(rng, graph, 16)
        (out,) = tm.run_litert(tm.write(graph), inputs)
        spec = graph.tensor(graph.outputs[0])
        assert out.shape == (16, *spec.shape[1:]), (name, seed)
        assert out.dtype == (np.float32 if kw["float_io"] else np.int8), (name, seed)
        assert all(t.shape[0] == 1 for t in graph.tensors if t.data is None)
        assert len(np.unique(out)) > 1, f"{name} seed {seed}: constant output"
        if not kw["float_io"]:
            # the top of the int8 range is where calibration put the largest values: few
            # outputs may reach it (a fused RELU legitimately puts half at -128, and SOFTMAX
            # its small probabilities)
            assert np.mean(out == 127) < 0.3, (name, seed)
            last = graph.ops[-1]
            if last.kind != "SOFTMAX" and last.options.get("activation", "NONE") == "NONE":
                assert np.mean(out == -128) < 0.3, (name, seed)


def test_generator_arguments_are_kept():
    rng = np.random.default_rng(0)
    g = tm.random_conv(rng, shape=(1, 7, 5, 3), out_channels=4, kernel=3, stride=2,
                       padding="VALID", dilation=1, activation="RELU",
                       per_channel=False)
    assert g.tensor("conv0/weights").shape == (4, 3, 3, 3)
    assert g.tensor("conv0/weights").scale.__class__ is float
    assert g.tensor(g.outputs[0]).shape == (1, 3, 2, 4)
    assert g.ops[0].options["activation"] == "RELU"
    g = tm.random_depthwise(rng, shape=(1, 6, 6, 3), multiplier=3, padding="SAME", stride=1)
    assert g.tensor(g.outputs[0]).shape == (1, 6, 6, 9)
    g = tm.random_pool(rng, kind="AVERAGE_POOL_2D", shape=(1, 6, 6, 2), filter_size=3,
                       stride=3, padding="VALID")
    assert g.ops[0].kind == "AVERAGE_POOL_2D" and g.tensor(g.outputs[0]).shape == (1, 2, 2, 2)
    g = tm.random_fc(rng, in_features=20, out_features=5, per_channel=True)
    assert len(g.tensor("fully_connected0/weights").scales) == 5
    assert tm.random_softmax(rng, shape=(1, 2, 7)).tensor("softmax0/out").shape == (1, 2, 7)
    assert len(tm.random_add(rng, constant=False).inputs) == 2
    assert len(tm.random_add(rng, constant=True).inputs) == 1
    forms = {}
    for form in ("option", "tensor", "both"):
        op = next(op for op in tm.random_chain(rng, reshape=form).ops if op.kind == "RESHAPE")
        forms[form] = (len(op.inputs), "new_shape" in op.options)
    assert forms == {"option": (1, True), "tensor": (2, False), "both": (2, True)}


def test_chain_covers_its_ops_over_seeds():
    kinds = set()
    for seed in range(30):
        kinds |= {op.kind for op in tm.random_chain(np.random.default_rng(seed)).ops}
    assert kinds == {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D", "MAX_POOL_2D",
                     "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"}


# --- running -------------------------------------------------------------------------------


def test_run_litert_batches_and_intermediates():
    rng = np.random.default_rng(8)
    graph = tm.random_chain(rng)
    model = tm.write(graph)
    (x,) = tm.random_inputs(rng, graph, 5)
    (out,) = tm.run_litert(model, [x])
    one_by_one = np.concatenate([tm.run_litert(model, [x[i:i + 1]])[0] for i in range(5)])
    np.testing.assert_array_equal(out, one_by_one)
    every = tm.run_litert_all(model, [x])
    activations = {t.name for t in graph.tensors if t.data is None}
    assert set(every) == activations
    np.testing.assert_array_equal(every[graph.outputs[0]], out)
    np.testing.assert_array_equal(every[graph.inputs[0]], x)
    for name, value in every.items():
        assert value.shape == (5, *graph.tensor(name).shape[1:]), name
    # softmax rows are probabilities in steps of 1/256
    probs = (out.astype(np.float64) + 128) / 256
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=0.05)

    with pytest.raises(TypeError):
        tm.run_litert(model, [x.astype(np.int16)])
    with pytest.raises(ValueError):
        tm.run_litert(model, [x[:, :1]])
    with pytest.raises(ValueError):
        tm.run_litert(model, [x, x])


def _replace(graph: Graph, name: str, **changes) -> Graph:
    tensors = tuple(dataclasses.replace(t, **changes) if t.name == name else t
                    for t in graph.tensors)
    return dataclasses.replace(graph, tensors=tensors)


def test_what_litert_refuses():
    """The forms LiteRT's reference kernels refuse, which the writer can still write (the
    module docstring lists them): the converter's conventions are not optional."""
    rng = np.random.default_rng(0)
    conv = tm.random_conv(rng, shape=(1, 6, 6, 3), out_channels=4, activation="NONE")
    dw = tm.random_depthwise(rng, shape=(1, 6, 6, 3), multiplier=2)
    softmax = tm.random_softmax(rng)
    w = conv.tensor("conv0/weights")
    bad = {
        "conv scales on axis 3": _replace(conv, w.name, quantized_dimension=3),
        "depthwise scales on axis 0": _replace(dw, "depthwise_conv_2d0/weights",
                                               quantized_dimension=0),
        "conv weight zero point": _replace(conv, w.name, zero_point=1),
        "conv without bias": dataclasses.replace(
            conv, ops=(dataclasses.replace(conv.ops[0], inputs=("input", w.name, "")),)),
        "softmax output scale": _replace(softmax, "softmax0/out", scale=1 / 128),
        "softmax output zero point": _replace(softmax, "softmax0/out", zero_point=0),
    }
    for label, graph in bad.items():
        try:
            tm.run_litert(tm.write(graph), tm.random_inputs(rng, graph, 1))
        except (ValueError, RuntimeError):
            continue
        pytest.fail(f"LiteRT ran: {label}")
