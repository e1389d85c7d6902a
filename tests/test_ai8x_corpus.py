"""The izer corpus itself (tests/data/ai8x/cases/, see tests/ai8x_cases.py): every case's
weights and input regenerate exactly (the digest recorded when izer ran), its checkpoint is
one izer's loader and edgebuild's importer read, and izer's program is complete."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
import yaml

try:
    from tests import ai8x_cases
except ImportError:  # pytest run from tests/
    import ai8x_cases  # type: ignore[no-redef]

from edgebuild.targets.max7800x.network.checkpoint import checkpoint_layers

NAMES = ai8x_cases.case_names()


def test_corpus_has_twenty_cases_on_both_devices():
    cases = [ai8x_cases.load_case(name) for name in NAMES]
    assert len(cases) >= 20
    assert {case.device for case in cases} == {"MAX78000", "MAX78002"}
    assert {recipe.bits for case in cases for recipe in case.layers} == {1, 2, 4, 8}
    assert {len(case.input_shape) for case in cases} == {2, 3}  # 1-D and 2-D inputs


@pytest.mark.parametrize("name", NAMES)
def test_case_regenerates_what_izer_read(name):
    case = ai8x_cases.load_case(name)
    layers, sample = ai8x_cases.generate(case)
    assert ai8x_cases.digest(layers, sample) == case.digest
    assert sample.shape == case.input_shape and sample.dtype == np.int64
    data = ai8x_cases.checkpoint_bytes(case, layers)
    checkpoint = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    arch = yaml.safe_load(case.network.read_text())["arch"]
    assert checkpoint["arch"] == arch and "epoch" in checkpoint  # izer's loader needs both
    state = checkpoint["state_dict"]
    read, ignored = checkpoint_layers(case.network, state, len(case.layers))
    assert not ignored
    for layer, recipe, back in zip(layers, case.layers, read, strict=True):
        assert back.weight.shape == recipe.shape and np.array_equal(back.weight, layer["weight"])
        assert back.weight_bits == recipe.bits and back.output_shift == recipe.output_shift
        half = 1 << (recipe.bits - 1)
        assert -half <= layer["weight"].min() and layer["weight"].max() < half
        if recipe.bias:  # izer's loader: floor(raw / 2**(bits - 1)) gives the 8-bit bias
            assert np.array_equal(np.floor_divide(back.bias, half), layer["bias8"])
        else:
            assert back.bias is None


@pytest.mark.parametrize("name", NAMES)
def test_izers_program_is_complete(name):
    case = ai8x_cases.load_case(name)
    program = ai8x_cases.expected_program(case)
    assert program["registers"] and program["start"] and words(program, "expected")
    if "--fifo" in case.options:  # the input goes through the FIFO: no data memory image
        assert program["input"] == {}
    else:
        assert words(program, "input") * 4 >= math.prod(case.input_shape)  # 4 values a word
    weights = sum(math.prod(r.shape) * r.bits for r in case.layers)
    assert words(program, "kernels") * 32 >= weights // 2  # (words izer leaves zero: not listed)
    assert bool(program["bias"]) == any(r.bias for r in case.layers)
    digested = [part for part in ai8x_cases.DIGESTED if f"{part}_digest" in program]
    assert all(program[part] == {} for part in digested)
    if not digested:
        assert ai8x_cases.compare(program, program) == []


def words(program: dict, part: str) -> int:
    """Words of a stored part, whether listed or digested."""
    digest = program.get(f"{part}_digest")
    return int(digest["words"]) if digest else len(program[part])


def test_compare_checks_a_stored_kernel_digest():
    kernels = {f"0x{0x50180000 + 4 * i:08x}": f"0x{i * 2654435761 % 2**32:08x}"
               for i in range(ai8x_cases.KERNEL_WORDS_STORED + 1)}
    full = {"registers": {"0x50100000": "0x00000008"}, "start": [["0x50100000", "0x1"]],
            "kernels": kernels, "bias": {}, "input": {}, "expected": {}}
    stored = ai8x_cases.stored_program(full)
    assert stored["kernels"] == {} and stored["kernels_digest"]["words"] == len(kernels)
    assert ai8x_cases.compare(stored, full) == []
    changed = {**full, "kernels": {**kernels, "0x50180000": "0x00000001"}}
    assert [d.split(":")[0] for d in ai8x_cases.compare(stored, changed)] == ["kernels"]
    assert ai8x_cases.compare(stored, {**full, "start": []}) == [
        "start: [['0x50100000', '0x1']] != []"]


def test_compare_checks_a_stored_input_and_expected_digest():
    words = {f"0x{0x50400000 + 4 * i:08x}": f"0x{i * 40503 % 2**32:08x}"
             for i in range(ai8x_cases.KERNEL_WORDS_STORED + 1)}
    expected = {address: [value, "0xffffffff"] for address, value in words.items()}
    full = {"registers": {}, "start": [], "kernels": {}, "bias": {}, "input": words,
            "expected": expected}
    stored = ai8x_cases.stored_program(full)
    assert stored["input"] == stored["expected"] == {} and "kernels_digest" not in stored
    assert ai8x_cases.compare(stored, full) == []
    assert ai8x_cases.compare(stored, {**full, "expected": {
        **expected, "0x50400000": ["0x00000001", "0xffffffff"]}})[0].startswith("expected:")
    assert ai8x_cases.compare(stored, {**full, "input": {}})[0].startswith("input:")


@pytest.mark.parametrize("name", NAMES)
def test_case_imports_with_its_checkpoint_and_sample(tmp_path, name):
    """What a generator test starts from: `import-ai8x` takes the description, the
    checkpoint and the sample as izer took them (same layers, weights, widths, biases)."""
    from edgebuild.core import arrays
    from edgebuild.targets.max7800x import network

    case = ai8x_cases.load_case(name)
    checkpoint, sample = ai8x_cases.write_inputs(case, tmp_path)
    result = network.import_network(case.network, checkpoint=checkpoint, sample=sample,
                                    device=case.device.lower(), out_dir=tmp_path / "out")
    assert result.weights is not None
    weights = arrays.load(result.weights)
    layers, _ = ai8x_cases.generate(case)
    for layer in layers:
        name = layer["name"]
        assert np.array_equal(weights[f"{name}.weight"], layer["weight"])
        assert int(weights[f"{name}.bits"]) == layer["bits"]
        assert int(weights[f"{name}.scale_exp"]) == layer["output_shift"]
        if layer["bias8"] is not None:
            assert np.array_equal(weights[f"{name}.bias"], layer["bias8"] * 128)
