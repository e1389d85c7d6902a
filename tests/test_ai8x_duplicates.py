"""Equal tensors stored once (program.duplicates, the vendor tool's deduplication): the rule
itself, the kernel and bias placements following it, and the corpus cases that tie tensors
(their programs are compared with izer's by test_ai8x_program's corpus test)."""

from __future__ import annotations

import numpy as np

try:
    from tests import ai8x_cases
except ImportError:  # pytest run from tests/
    import ai8x_cases  # type: ignore[no-redef]

from edgebuild.targets.max7800x.placement import kernelmemory, sharing
from edgebuild.targets.max7800x.program import duplicates


def test_a_duplicate_uses_the_first_equal_array():
    a = np.arange(18).reshape(2, 9)
    arrays = [a, None, a.copy(), a + 1, a.copy()]
    assert duplicates.originals(arrays) == (0, 1, 0, 3, 0)


def test_shape_and_key_must_match_too():
    a = np.arange(18)
    assert duplicates.originals([a.reshape(2, 9), a.reshape(9, 2)]) == (0, 1)
    keys = [(8, 0xFF), (4, 0xFF), (8, 0xFF00), (8, 0xFF)]
    assert duplicates.originals([a, a, a, a], keys) == (0, 1, 2, 0)


def test_kernels_are_compared_in_the_vendor_tools_shape():
    """Input and output channels are one axis: (8, 16, 3, 3) and (16, 8, 3, 3) kernels with
    the same values are equal; a linear layer's (out, in) gets a leading axis."""
    values = np.arange(8 * 16 * 9) % 7
    first, second = values.reshape(8, 16, 3, 3), values.reshape(16, 8, 3, 3)
    stored = [duplicates.stored_kernel(first), duplicates.stored_kernel(second)]
    assert stored[0].shape == (128, 3, 3) and duplicates.originals(stored) == (0, 0)
    assert duplicates.stored_kernel(np.zeros((10, 32))).shape == (1, 10, 32)


def test_a_duplicate_layer_takes_no_kernel_columns():
    shape = kernelmemory.KernelShape(0xFF, 0xFF, 8, 8, 9, 8, False)
    columns = kernelmemory.Columns((768,) * 64)
    slots = kernelmemory.place(columns, [shape, shape, shape], shared=(0, 1, 0))
    assert slots[2] == slots[0] != slots[1]
    assert {owner for p in range(8) for owner in columns.owner[p].values()} == {0, 1}


def test_equal_kernels_share_a_slot_only_on_the_same_processors_and_width():
    """placement.sharing: the values say which kernels are equal; the placement adds that
    they must run on the same processors with the same weight width."""
    values = sharing.Sharing(kernels=(0, 1, 0, 0, 4), biases=(0, None, 0, 3, None))
    keys = [(8, 0xFF), (8, 0xFF), (8, 0xFF00), (8, 0xFF), None]
    assert sharing.kernel_sources(values, keys) == (0, 1, 2, 0, 4)
    assert sharing.kernel_sources(None, keys) == (0, 1, 2, 3, 4)


def test_the_plan_stages_placement_stores_equal_tensors_once(tmp_path):
    """With the weights (the plan stage), a duplicate's kernel and bias slots are its
    original's and the maps count them once; without (`check`) every layer has its own,
    and the maps say why."""
    from test_ai8x_program import imported_case

    from edgebuild.targets.max7800x import layout

    manifest, weights, layers, bits, _ = imported_case(ai8x_cases.load_case("dedup_kernels"),
                                                       tmp_path)
    _, before, _ = layout.layout(manifest, layers, bits)
    _, after, _ = layout.layout(manifest, layers, bits, weights)
    assert before is not None and after is not None
    shared = after.shared()
    assert shared and not before.shared()
    for name, what, first in shared:
        slot = "kernel" if what == "kernels" else "bias"
        assert getattr(after.layer(name), slot) == getattr(after.layer(first), slot)
    assert len(after.kernel_map()) < len(before.kernel_map())
    assert "weights not known yet" in before.text()
    assert f"{shared[0][0]} runs with {shared[0][2]}'s {shared[0][1]}" in after.text()


def test_a_1x1_kernel_run_as_3x3_is_compared_in_that_form(tmp_path):
    """izer widens a streamed 1x1 kernel to 3x3 before it deduplicates: in
    dedup_streaming_1x1, w1 (streams) and w2 (reads w1) run as 3x3 and share; w3 has the
    same values but runs as 1x1, so it keeps its own kernel, which w4 shares."""
    from test_ai8x_program import imported_case

    from edgebuild.targets.max7800x import layout

    manifest, weights, layers, bits, _ = imported_case(
        ai8x_cases.load_case("dedup_streaming_1x1"), tmp_path)
    hw, placed, _ = layout.layout(manifest, layers, bits, weights)
    assert placed is not None
    assert placed.shared() == [("w2", "kernels", "w1"), ("w4", "kernels", "w3")]
    names = [layer.name for layer in hw]
    flat = duplicates.sharing(hw, weights)  # every kernel in its 1x1 form: all four equal
    assert [names[i] for i in flat.kernels[1:5]] == ["w1"] * 4


def test_the_corpus_ties_tensors_as_its_recipe_says():
    """Cases with ties regenerate tied arrays equal, so the corpus has networks whose
    programs store tensors once (and one, dedup_refused, where izer must not)."""
    tied = [ai8x_cases.load_case(name) for name in ai8x_cases.case_names()
            if name.startswith("dedup_")]
    assert {case.device for case in tied} == {"MAX78000", "MAX78002"}
    for case in tied:
        layers, _ = ai8x_cases.generate(case)
        ties = [(i, r) for i, r in enumerate(case.layers)
                if r.same_weights_as is not None or r.same_bias_as is not None]
        assert ties, case.name
        for i, recipe in ties:
            if recipe.same_weights_as is not None:
                assert np.array_equal(layers[i]["weight"].ravel(),  # (reshaped: same values)
                                      layers[recipe.same_weights_as]["weight"].ravel())
            if recipe.same_bias_as is not None:
                assert np.array_equal(layers[i]["bias8"], layers[recipe.same_bias_as]["bias8"])
