"""Which way every pass runs: little RAM in all, for a per cent more estimated instructions at most.

A model's RAM is its arena and state, fixed by the layers whatever the tiles, plus two
peaks the tiles decide: the L1 scratchpad (the largest L1 working set of any pass) and the
optimized kernels' workspace (one array, as large as the largest step's need). The two pull
apart: a tiled dense convolution on the split kernels (memory.tiling, the split layout)
keeps only its input rows and channel slots in L1 but builds the im2col columns of its
whole row tile in the workspace, 2 bytes per tap per output pixel. Choosing each pass's
cheapest tile on its own ignored the columns: a Fashion-MNIST CNN with a 4 KiB L1 took
conv2's 14-row tile (all its rows: the fewest tiles), 56,448 bytes of columns, and needed
82,320 bytes of RAM where the untiled build needed 40,768.

The fewest instructions and the least RAM pull apart too: the last bytes of L1 cost many
small tiles (a 1x1460 series model's least RAM ran 1-row, 1-channel tiles). So `best_peaks`
takes the least L1 peak + workspace peak among the selections whose estimated instructions
(each option's `key`, summed) are within COST_SLACK of the fewest, then the fewest
instructions; each pass then runs its cheapest option within those peaks (`cheapest`), so
passes that do not set a peak keep their fastest tile. The estimate misses some of what
small tiles cost (benchmarks/l1_sweep.py: a 3 % slack measured up to 1.35x the untiled
instructions, 1 % at most 1.09x on its four models), hence the small slack. The untiled
build's RAM is a hard limit (`ram_budget`) whatever the instructions; only where no
selection keeps to it is the least RAM taken outright (and `edgebuild check` warns). Exact
over the options: for each workspace peak an option sets, the smallest L1 peak within the
instruction bound is found by bisection (fewer instructions never need a smaller L1 peak).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from edgebuild.memory.tiling import Option


@dataclass(frozen=True)
class Choice:
    """A pass's option with the workspace bytes its step needs when it runs that way (0:
    none, or not this pass's to count: a fused pool's pass)."""

    option: Option
    workspace: int

    @property
    def l1(self) -> int:
        return self.option.tile.l1_bytes


@dataclass(frozen=True)
class Peaks:
    """The L1 and workspace peaks a selection stays within, and their sum."""

    l1: int
    workspace: int

    @property
    def bytes(self) -> int:
        return self.l1 + self.workspace


COST_SLACK = 0.01  # more estimated instructions than the fewest that `select` spends on RAM


def cheapest(choices: Sequence[Choice], peaks: Peaks) -> Choice:
    """The pass's cheapest option within the peaks (then the least L1: a linear layer
    streams rather than sits whole in L1 for the same instructions)."""
    return min((c for c in choices if c.l1 <= peaks.l1 and c.workspace <= peaks.workspace),
               key=lambda c: (c.option.key, c.l1))


@dataclass(frozen=True)
class _Curve:
    """A pass's fewest estimated instructions by L1 peak, over its options within some
    workspace peak: `costs[i]` for an L1 peak of at least `sizes[i]`."""

    sizes: list[int]
    costs: list[float]

    @classmethod
    def of(cls, points: Iterable[tuple[int, float]]) -> _Curve:
        """The curve of (L1 bytes, cost) points: each the cheapest at its L1 or above."""
        sizes: list[int] = []
        costs: list[float] = []
        for size, cost in sorted(points):
            if not costs or cost < costs[-1]:
                sizes.append(size)
                costs.append(cost)
        return cls(sizes, costs)

    def merged(self, points: Sequence[tuple[int, float]]) -> _Curve:
        return _Curve.of([*zip(self.sizes, self.costs, strict=True), *points]) if points \
            else self

    def at(self, level: int) -> float:
        at = bisect_right(self.sizes, level)
        return self.costs[at - 1] if at else math.inf


@dataclass(frozen=True)
class _Table:
    """Every pass's `_Curve` within one workspace peak, and the L1 peaks worth trying."""

    workspace: int
    curves: list[_Curve]
    levels: list[int]

    @classmethod
    def of(cls, workspace: int, curves: list[_Curve]) -> _Table:
        return cls(workspace, curves, sorted({size for c in curves for size in c.sizes}))

    def cost(self, level: int) -> float:
        return sum(curve.at(level) for curve in self.curves)

    def within(self, level: int, bound: float) -> bool:
        """Whether every pass has an option within `level`, all together within `bound`."""
        cost = self.cost(level)
        return cost <= bound and cost < math.inf

    def least_level(self, bound: float, cap: float) -> int | None:
        """The smallest L1 peak at most `cap` whose cost is within `bound` (cost only
        falls as the peak grows: a binary search)."""
        top = bisect_right(self.levels, cap)
        if top == 0 or not self.within(self.levels[top - 1], bound):
            return None
        low, high = 0, top - 1
        while low < high:
            middle = (low + high) // 2
            if self.within(self.levels[middle], bound):
                high = middle
            else:
                low = middle + 1
        return self.levels[low]


def _by_workspace(choices: Sequence[Choice], floor: int) -> dict[int, list[tuple[int, float]]]:
    """A pass's (L1 bytes, cost) points by workspace (at least `floor`), each group reduced
    to its curve."""
    groups: dict[int, list[tuple[int, float]]] = {}
    for choice in choices:
        groups.setdefault(max(floor, choice.workspace), []).append(
            (choice.l1, choice.option.key[0]))
    return {workspace: [*zip(curve.sizes, curve.costs, strict=True)]
            for workspace, points in groups.items() for curve in (_Curve.of(points),)}


def _tables(passes: Sequence[Sequence[Choice]], floor: int) -> list[_Table]:
    """One table per workspace peak some option sets (at least `floor`) under which every
    pass has an option, by peak ascending: each pass's curve grows by the options whose
    workspace the peak now admits."""
    groups = [_by_workspace(choices, floor) for choices in passes]
    curves = [_Curve([], []) for _ in passes]
    tables = []
    for peak in sorted({floor, *(w for group in groups for w in group)}):
        curves = [curve.merged(group.get(peak, ())) for curve, group in zip(curves, groups,
                                                                              strict=True)]
        if all(curve.sizes for curve in curves):
            tables.append(_Table.of(peak, curves))
    return tables


def _within(tables: Sequence[_Table], workspace: float, ram: float,
            slack: float) -> Peaks | None:
    """The peaks of the least L1 + workspace with the workspace at most `workspace` and
    L1 + workspace at most `ram`, among those within `slack` of the fewest estimated
    instructions under the same limits (inf: any); then the fewest instructions. None: no
    peaks meet the limits."""
    tables = [t for t in tables if t.workspace <= workspace]
    fewest = min((t.cost(t.levels[bisect_right(t.levels, ram - t.workspace) - 1])
                  for t in tables if t.levels and t.levels[0] <= ram - t.workspace),
                 default=math.inf)
    if not tables or fewest == math.inf:
        return None
    bound = fewest * (1 + slack)
    found = []
    for table in tables:
        level = table.least_level(bound, ram - table.workspace)
        if level is not None:
            found.append((level + table.workspace, table.cost(level), level, table.workspace))
    return Peaks(*min(found)[2:])


def best_peaks(passes: Sequence[Sequence[Choice]], floor: int = 0,
               workspace_budget: int | None = None, ram_budget: int | None = None) -> Peaks:
    """The peaks to select within: the least L1 + workspace whose estimated instructions
    are within COST_SLACK of the fewest (a few per cent buys kilobytes; the last bytes of
    RAM would cost many small tiles), with the workspace within its budget (the L2 the
    arena leaves) and L1 + workspace within `ram_budget` (the untiled build's; None: no
    limit). When no peaks keep to `ram_budget`, the least L1 + workspace whatever the
    instructions (the RAM a budget truly costs, which `edgebuild check` reports); when none
    keep to the workspace budget, the least workspace (what the L2 check reports needed)."""
    tables = _tables(passes, floor)
    if not passes:
        return Peaks(0, floor)
    workspace = math.inf if workspace_budget is None else workspace_budget
    ram = math.inf if ram_budget is None else ram_budget
    for limits in ((workspace, ram, COST_SLACK), (workspace, math.inf, math.inf)):
        found = _within(tables, *limits)
        if found is not None:
            return found
    least = _within(tables, tables[0].workspace, math.inf, math.inf)
    assert least is not None  # every pass has an option: the first table holds them all
    return least


def select(passes: Sequence[Sequence[Choice]], floor: int = 0,
           workspace_budget: int | None = None, ram_budget: int | None = None) -> list[Choice]:
    """One choice per pass (each list non-empty): see `best_peaks`."""
    peaks = best_peaks(passes, floor, workspace_budget, ram_budget)
    return [cheapest(choices, peaks) for choices in passes]
