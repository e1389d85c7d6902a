"""Equal tensors stored once (program.duplicates, the vendor tool's deduplication): the rule
itself, the kernel and bias placements following it, and the corpus cases that tie tensors
(their programs are compared with izer's by test_ai8x_program's corpus test)."""

from __future__ import annotations

import numpy as np

try:
    from tests import ai8x_cases
except ImportError:  # pytest run from tests/
    import ai8x_cases  # type: ignore[no-redef]

from edgebuild.targets.max7800x.placement import kernelmemory
from edgebuild.targets.max7800x.program import bias, duplicates


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


def test_a_duplicate_bias_takes_no_bias_bytes():
    from edgebuild.targets.max7800x.program.geometry import Geometry

    def layer(name: str, outputs: int) -> Geometry:
        one, plane = (1, 1), (4, 4)
        return Geometry(name=name, operator="conv2d", in_channels=8, out_channels=8,
                        in_dim=plane, pooled_dim=plane, out_dim=plane, kernel=(3, 3), pad=one,
                        stride=one, pool=one, pool_stride=one, average=False, relu=True,
                        flatten=False, wide=False, weight_bits=8, shift=0, big_data=False,
                        processors=0xFF, output_processors=outputs, in_offset=0, out_offset=0,
                        write_gap=0)

    values = np.arange(1, 9)
    layers = [layer("a", 0xFF), layer("b", 0xFF00), layer("c", 0xFF)]
    image, slots = bias.place(layers, [values, values + 1, values], [0], [None] * 3, 2048,
                              shared=duplicates.originals([values, values + 1, values]))
    assert slots[2] == slots[0] != slots[1]
    assert sum(len(v) for v in image.values()) == 16


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
