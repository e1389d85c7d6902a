"""TFLite's int8 number format in numpy (edgebuild/tflite, issue 31) against TensorFlow's
own interpreter: every layer of the four MLPerf Tiny reference models, read with the
`tflite` schema package and translated to edgebuild's channels-first layers, computes
the integers LiteRT's reference kernels compute (BUILTIN_REF), on random inputs.

- `test_mlperf_layers_bit_exact`: per layer, from LiteRT's own input tensors, so one
  mismatch is not hidden or repeated by the layers after it; and end to end;
- the fixed-point primitives against exact big-integer arithmetic (hypothesis);
- the reader's user errors: a file that is no flatbuffer, a damaged one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgebuild.core.errors import UserError
from edgebuild.formats import numbers
from edgebuild.formats.tflite import arith, quant
from edgebuild.manifest import Model
from edgebuild.tflite import flatbuffer, importer, translation

# The MLPerf Tiny reference models, in the repository (models/mlperf-tiny/PROVENANCE.md).
MODELS = Path(__file__).resolve().parents[1] / "models" / "mlperf-tiny"
MLPERF = ("kws_ref_model", "vww_96_int8", "pretrainedResnet_quant", "ad01_int8")


def records(result: translation.Translated) -> tuple:
    """The translated layers as the manifest's layer records."""
    return Model.model_validate({"input": list(result.input_shape), "layers": result.layers,
                                 "format": "tflite"}).layers


def interpreter(path: Path):
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    it = litert.Interpreter(model_path=str(path),
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
                            experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    return it


def layer_inputs(result: translation.Translated, layer: dict, it, graph) -> list[np.ndarray]:
    """LiteRT's tensors the layer reads, channels first (a view's: its source's)."""
    producers = {name: index for name, index in result.tensors.items()}
    producers["input"] = graph.inputs[0]
    values = []
    for name in layer["inputs"]:
        value = it.get_tensor(producers[name]).astype(np.int64)
        values.append(translation.to_chw(value))
    return values


@pytest.mark.parametrize("model", MLPERF)
def test_mlperf_layers_bit_exact(model):
    path = MODELS / f"{model}.tflite"
    graph = flatbuffer.read(path)
    translator = translation.Translator(graph)
    result = translator.translate()
    assert translator.problems == []
    it = interpreter(path)
    rng = np.random.default_rng(31)
    detail = it.get_input_details()[0]
    for _ in range(2):
        x = rng.integers(-128, 128, size=detail["shape"], dtype=np.int8)
        it.set_tensor(detail["index"], x)
        it.invoke()
        for layer, fields in zip(records(result), result.layers, strict=True):
            if layer.op == "flatten":
                continue
            compute = numbers.reference(layer.op, "tflite")
            expected = translation.to_chw(it.get_tensor(result.tensors[layer.name]))
            alone = compute(layer, quant.layer_quant(result.arrays, layer.name),
                            layer_inputs(result, fields, it, graph), "half_up")
            assert np.array_equal(alone.reshape(expected.shape), expected), layer.name
        output = it.get_tensor(it.get_output_details()[0]["index"])
        chained = importer.run_reference(result, x.astype(np.int64))
        assert np.array_equal(translation.to_nhwc(chained).reshape(output.shape), output)


def test_translation_of_kws():
    result = translation.Translator(flatbuffer.read(MODELS / "kws_ref_model.tflite")).translate()
    assert result.input_shape == (1, 49, 10)
    first = result.layers[0]
    # conv 10x4 stride 2, SAME: 9 rows of padding, 4 above and 5 below (TensorFlow's rule)
    assert (first["kernel"], first["stride"], first["pad"], first["pad_end"]) == \
        ([10, 4], 2, [4, 1], [5, 1])
    assert [layer["op"] for layer in result.layers].count("conv2d") == 9
    assert result.layers[-1]["op"] == "softmax"
    assert result.arrays["input.zero_points"].tolist() == [83]


# --- fixed-point primitives against exact integer arithmetic ---------------------------------

INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def exact_round_away(numerator: int, denominator: int) -> int:
    """numerator / denominator rounded half away from zero, exactly."""
    q, r = divmod(abs(numerator), denominator)
    q += 2 * r >= denominator
    return q if numerator >= 0 else -q


@settings(max_examples=300, deadline=None)
@given(INT32, INT32)
def test_srdhm_is_the_rounded_high_half(a, b):
    """a * b / 2^31 rounded to nearest, ties up (gemmlowp's nudge: 1 - 2^30 below zero)."""
    expected = (1 << 31) - 1 if a == b == -(1 << 31) else (2 * a * b + (1 << 31)) >> 32
    assert int(arith.srdhm(np.array([a]), np.array([b]))[0]) == expected


@settings(max_examples=300, deadline=None)
@given(INT32, st.integers(0, 31))
def test_rdbpot_rounds_halves_away_from_zero(x, e):
    assert int(arith.rdbpot(np.array([x]), e)[0]) == exact_round_away(x, 1 << e)


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 24), 1 << 24), st.integers(1 << 30, (1 << 31) - 1),
       st.integers(-20, 0))
def test_single_rounding_is_one_rounding_half_up(x, m, s):
    total = x * m
    expected = (total + (1 << (30 - s))) >> (31 - s)
    assert int(arith.mbqm_single(np.array([x]), m, s)[0]) == expected


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1e6, allow_nan=False))
def test_quantize_multiplier_represents_the_real_value(real):
    m, s = arith.quantize_multiplier(real)
    assert (1 << 30) <= m < (1 << 31)
    assert abs(m * 2.0 ** (s - 31) - real) <= real * 2.0 ** -30


def test_softmax_is_close_to_the_float_softmax():
    rng = np.random.default_rng(3)
    scale = 0.1
    multiplier, left_shift, diff_min = arith.softmax_params(1.0, scale)
    x = rng.integers(-128, 128, size=(50, 12))
    out = arith.softmax(x, multiplier, left_shift, diff_min)
    exp = np.exp((x - x.max(axis=1, keepdims=True)) * scale)
    probabilities = exp / exp.sum(axis=1, keepdims=True)
    assert np.abs((out + 128) / 256.0 - probabilities).max() <= 1.5 / 256


# --- the reader's errors ---------------------------------------------------------------------

def test_not_a_tflite_file_is_a_user_error(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(UserError, match="not a TFLite model"):
        flatbuffer.read(path)


def test_a_damaged_flatbuffer_is_a_user_error(tmp_path):
    data = bytearray((MODELS / "kws_ref_model.tflite").read_bytes())
    data[0:4] = (len(data) + 1000).to_bytes(4, "little")  # the root table beyond the file
    path = tmp_path / "damaged.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="damaged"):
        flatbuffer.read(path)


# --- models the tests write (tests/tflite_models.py): shapes, strides, zero points unseen ------

# random_add's model takes its two operands as two inputs (edgebuild models have one): ADD
# is here in random_chain's residual connections and in the ResNet-8 above.
GENERATORS = ("random_conv", "random_depthwise", "random_fc", "random_pool", "random_softmax",
              "random_chain")


@pytest.mark.parametrize("generator", GENERATORS)
def test_written_models_bit_exact(generator, tmp_path):
    import tflite_models

    pytest.importorskip("ai_edge_litert.interpreter")
    compared = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        graph = getattr(tflite_models, generator)(rng)
        path = tflite_models.write_file(graph, tmp_path / f"{generator}-{seed}.tflite")
        translator = translation.Translator(flatbuffer.read(path))
        result = translator.translate()
        assert not translator.problems, translator.problems  # SAME pools that pad too
        inputs = tflite_models.random_inputs(rng, graph, n=4)
        expected = tflite_models.run_litert(tflite_models.write(graph), inputs)[0]
        out = importer.run_reference(result, inputs[0].astype(np.int64))
        assert np.array_equal(translation.to_nhwc(out).reshape(expected.shape), expected), seed
        compared += 1
    assert compared == 12


def test_unsupported_operators_are_listed_together(tmp_path):
    import tflite_models

    rng = np.random.default_rng(0)
    graph = tflite_models.random_unsupported(rng, "TANH")
    path = tflite_models.write_file(graph, tmp_path / "tanh.tflite")
    translator = translation.Translator(flatbuffer.read(path))
    translator.translate()
    kinds = [op.kind for op, _ in translator.problems]
    assert kinds == ["TANH"]
    assert "no implementation of this operator" in translator.problems[0][1]


def test_pool_padding_shapes_and_limits():
    """A padded pool2d's output shape (SAME's: ceil(n / stride)); padding as large as the
    window (a window of padding only) is a shape error."""
    from edgebuild.core.geometry import ShapeError
    from edgebuild.ops import pool

    layer = pool.Pool2d.model_validate({"name": "p", "op": "pool2d", "mode": "avg", "size": 3,
                                        "stride": [2, 1], "pad": 1})
    assert pool.out_shape(layer, [(4, 7, 9)]) == (4, 4, 9)
    asymmetric = layer.model_copy(update={"pad": [0, 1], "pad_end": [1, 1]})
    assert pool.out_shape(asymmetric, [(4, 7, 9)]) == (4, 3, 9)  # (7 + 0 + 1 - 3) // 2 + 1
    with pytest.raises(ShapeError, match="padding only"):
        pool.out_shape(layer.model_copy(update={"pad": 3}), [(4, 7, 9)])
