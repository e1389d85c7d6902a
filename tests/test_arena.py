"""Arena planner invariants (property-based): no two live tensors overlap, offsets are
aligned, the size is at least the lower bound, and the small-problem search never does
worse than greedy."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edgebuild.memory import arena


@st.composite
def tensor_sets(draw, max_size: int = 10):
    count = draw(st.integers(1, max_size))
    tensors = []
    for index in range(count):
        first = draw(st.integers(0, 8))
        last = draw(st.integers(first, first + 4))
        tensors.append(arena.Tensor(f"t{index}", draw(st.integers(1, 3000)), first, last))
    return tensors


@settings(max_examples=150, deadline=None)
@given(tensor_sets())
def test_placement_invariants(tensors):
    placements = arena.place(tensors)
    assert sorted(p.tensor.name for p in placements) == sorted(t.name for t in tensors)
    assert not arena.conflicts(placements)
    assert all(p.offset % arena.ALIGN == 0 for p in placements)
    assert arena.size(placements) >= arena.lower_bound(tensors)


@settings(max_examples=60, deadline=None)
@given(tensor_sets(max_size=arena.EXACT_LIMIT))
def test_search_is_never_worse_than_greedy(tensors):
    greedy = arena.first_fit(sorted(tensors, key=lambda t: (-arena.aligned(t.bytes), t.first,
                                                            t.name)))
    assert arena.size(arena.place(tensors)) <= arena.size(greedy)


def test_search_beats_greedy_on_a_known_instance():
    """Largest-first greedy stacks the big tensor below the chain; an order that puts the
    long-lived small one first reaches the lower bound."""
    tensors = [arena.Tensor("a", 100, 0, 1), arena.Tensor("b", 60, 1, 2),
               arena.Tensor("c", 60, 2, 3), arena.Tensor("d", 100, 3, 4),
               arena.Tensor("e", 40, 0, 4)]
    greedy = arena.first_fit(sorted(tensors, key=lambda t: (-arena.aligned(t.bytes), t.first,
                                                            t.name)))
    placed = arena.place(tensors)
    assert not arena.conflicts(placed)
    assert arena.size(greedy) == 260
    assert arena.size(placed) == arena.lower_bound(tensors) == 200


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 40000), min_size=2, max_size=40))
def test_any_chain_of_layers_reaches_its_lower_bound(sizes):
    """A chain (each output live beside its input only), as long as real models' (past
    EXACT_LIMIT, where no order search runs): two-ended placement meets the bound."""
    tensors = [arena.Tensor(f"t{i}", b, i, i + 1) for i, b in enumerate(sizes)]
    placed = arena.place(tensors)
    assert not arena.conflicts(placed)
    assert all(p.offset % arena.ALIGN == 0 for p in placed)
    assert arena.size(placed) == arena.lower_bound(tensors)


def test_a_chain_whose_gap_is_both_ends_reaches_its_bound():
    """A 4-byte tensor whose only gap is the arena's top (both ends give it the same
    offset) counts as on top, so the next one goes to the bottom and the 8-byte one after it
    fits: 12 bytes, the bound (found by the property above; 16 before)."""
    sizes = [1, 1, 1, 5, 1, 1, 5, 1, 1]
    tensors = [arena.Tensor(f"t{i}", b, i, i + 1) for i, b in enumerate(sizes)]
    assert arena.size(arena.place(tensors)) == arena.lower_bound(tensors) == 12


def test_mobilenet_like_chain_beats_largest_first():
    """MLPerf VWW's activations (input, then its 48x48 and 24x24 maps): largest-first greedy
    needs 64,512 bytes, two-ended placement the bound, 55,296."""
    sizes = [27648, 18432, 18432, 36864, 9216, 18432, 18432, 18432, 4608]
    tensors = [arena.Tensor(f"t{i}", b, i, i + 1) for i, b in enumerate(sizes)]
    greedy = arena.first_fit(sorted(tensors, key=lambda t: (-arena.aligned(t.bytes), t.first,
                                                            t.name)))
    assert arena.size(greedy) == 64512
    assert arena.size(arena.place(tensors)) == arena.lower_bound(tensors) == 55296
