"""The activation arena: every intermediate tensor gets an offset in one static buffer.

Tensors whose lifetimes (first producing step .. last reading step) overlap must not
overlap in memory; the others share it. Placement is greedy by size, largest first, each
at the lowest aligned offset that fits (the TensorFlow Lite Micro strategy). Where that
misses the lower bound, two-ended placement within the bound is tried (in step order, each
tensor at the end of the arena opposite the last one's: a chain of layers, where each
output lives beside its input only, fits its bound so), and for small problems (up to
EXACT_LIMIT tensors) every first-fit order. The lower bound is the largest total size of
tensors live at one step: no placement can beat it.
"""

from __future__ import annotations

from dataclasses import dataclass

ALIGN = 4


@dataclass(frozen=True)
class Tensor:
    name: str
    bytes: int
    first: int  # step that writes it
    last: int  # last step that reads it


@dataclass(frozen=True)
class Placement:
    tensor: Tensor
    offset: int


def aligned(size: int) -> int:
    return (size + ALIGN - 1) // ALIGN * ALIGN


def _overlaps(a: Tensor, b: Tensor) -> bool:
    return a.first <= b.last and b.first <= a.last


EXACT_LIMIT = 8  # tensors: up to here every first-fit order is tried (8! = 40320)


def place(tensors: list[Tensor]) -> list[Placement]:
    """Greedy placement; for small problems the best of every first-fit order (stopping
    as soon as one reaches the lower bound, which no placement can beat)."""
    best = first_fit(sorted(tensors, key=lambda t: (-aligned(t.bytes), t.first, t.name)))
    bound = lower_bound(tensors)
    if size(best) == bound:
        return best
    ends = two_ended(tensors, bound)
    if ends is not None:
        return ends
    if len(tensors) > EXACT_LIMIT:
        return best
    return _search(tensors, best)


def two_ended(tensors: list[Tensor], limit: int) -> list[Placement] | None:
    """Every tensor within `limit` bytes, in step order, each at the lowest free offset or
    the highest, the end away from the previous tensor's first; None if one does not fit."""
    placed: list[Placement] = []
    top = False  # the previous tensor went to the bottom
    for tensor in sorted(tensors, key=lambda t: (t.first, t.last, t.name)):
        busy = _busy(placed, tensor)
        want = aligned(tensor.bytes)
        low, high = _lowest(busy, want, limit), _highest(busy, want, limit)
        choice = (high, low) if not top else (low, high)
        offset = next((o for o in choice if o is not None), None)
        if offset is None:
            return None
        # where it lies, not which end was asked: a tensor that both ends give the same
        # offset (the only gap left) is at the end its middle is nearer to
        top = 2 * offset + want > limit
        placed.append(Placement(tensor, offset))
    return sorted(placed, key=lambda p: (p.tensor.first, p.tensor.name))


def _lowest(busy: list[tuple[int, int]], want: int, limit: int | None) -> int | None:
    """The lowest aligned offset whose `want` bytes meet no busy range (and end by `limit`)."""
    offset = 0
    for start, end in busy:
        if offset + want <= start:
            break
        offset = max(offset, end)
    return offset if limit is None or offset + want <= limit else None


def _highest(busy: list[tuple[int, int]], want: int, limit: int) -> int | None:
    """The highest aligned offset whose `want` bytes end by `limit` and meet no busy range."""
    end = limit - limit % ALIGN
    for start, stop in sorted(busy, key=lambda r: -r[1]):
        if stop <= end - want:
            break
        end = min(end, start)
    return end - want if end - want >= 0 else None


def _search(tensors: list[Tensor], best: list[Placement]) -> list[Placement]:
    import itertools

    bound = lower_bound(tensors)
    for order in itertools.permutations(sorted(tensors, key=lambda t: t.name)):
        candidate = first_fit(list(order))
        if size(candidate) < size(best):
            best = candidate
            if size(best) == bound:
                break
    return best


def first_fit(order: list[Tensor]) -> list[Placement]:
    """Each tensor, in order, at the lowest aligned offset free for its whole lifetime."""
    placed: list[Placement] = []
    for tensor in order:
        offset = _lowest(_busy(placed, tensor), aligned(tensor.bytes), None)
        assert offset is not None  # no limit: always fits
        placed.append(Placement(tensor, offset))
    return sorted(placed, key=lambda p: (p.tensor.first, p.tensor.name))


def _busy(placed: list[Placement], tensor: Tensor) -> list[tuple[int, int]]:
    """The byte ranges of the placed tensors live with `tensor`, in order."""
    return sorted((p.offset, p.offset + aligned(p.tensor.bytes)) for p in placed
                  if _overlaps(p.tensor, tensor))


def size(placements: list[Placement]) -> int:
    return max((p.offset + aligned(p.tensor.bytes) for p in placements), default=0)


def live(tensors: list[Tensor], step: int) -> list[Tensor]:
    """The tensors live at `step` (written at or before it, read at or after it)."""
    return [t for t in tensors if t.first <= step <= t.last]


def peak(tensors: list[Tensor]) -> int | None:
    """The (first) step at which the most bytes are live; None without tensors."""
    steps = sorted({s for t in tensors for s in range(t.first, t.last + 1)})
    return max(steps, key=lambda s: sum(aligned(t.bytes) for t in live(tensors, s)),
               default=None)


def lower_bound(tensors: list[Tensor]) -> int:
    """The bytes live at the peak step: no placement can use fewer."""
    step = peak(tensors)
    return 0 if step is None else sum(aligned(t.bytes) for t in live(tensors, step))


def conflicts(placements: list[Placement]) -> list[tuple[str, str]]:
    """Pairs of simultaneously live tensors that share bytes (must be empty)."""
    found = []
    for i, a in enumerate(placements):
        for b in placements[i + 1:]:
            if _overlaps(a.tensor, b.tensor) and a.offset < b.offset + b.tensor.bytes and \
                    b.offset < a.offset + a.tensor.bytes:
                found.append((a.tensor.name, b.tensor.name))
    return found
