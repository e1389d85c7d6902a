"""The memory plan of a deployed model: where every tensor lives and how each layer moves
through L1 — the `plan` stage's artifact (`plan.json`, schema
schemas/artifacts/plan.v1.schema.json).

Steps are the deployed (folded) layers in order; step 0 writes the model input. A layer
with fused pooling gets a scratch tensor for its pooled input, live only at its own step.
Views (flatten, reshape, passthrough: ops with `Role.view`) get no step and no buffer: their
readers read the view's source. A layer that keeps state across inferences (a `buffer`)
keeps it in its own static array outside the arena (`state_bytes`), because it must survive
from one inference to the next.

Every windowed step (its op's `windows` facet) gets an L1 tile (memory.tiling), chosen
with every other step's for little RAM in all — the L1 peak and the optimized kernels'
workspace, which a tiled convolution's row tile sets — at few instructions
(`choose_tiles`, memory.selection): never more RAM than the untiled build when some
tiling within the budget keeps to it. A layer that runs between L2 tensors (`l2_traffic`:
add, concat) moves each of its bytes once.
`traffic_lower_bound` sums, per pass, what any tiling of it must move (tiling.lower_bound),
and a streamed layer's own bytes, so `traffic_bytes` is never below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core import boundedjson
from edgebuild.core.geometry import Shape, Window, pooled
from edgebuild.formats import numbers
from edgebuild.memory import arena, selection, tiling
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import Role, Unsupported

if TYPE_CHECKING:
    from edgebuild.manifest import Layer

VERSION = 1  # of plan.json's layout (schemas/artifacts/plan.v1.schema.json)


@dataclass(frozen=True)
class Scratch:
    """A layer's pooled input (fused pooling), live only at its own step."""

    name: str
    bytes: int
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "shape": list(self.shape)}


@dataclass(frozen=True)
class TileChoice:
    """The L1 tile of a windowed pass (see memory.tiling.Tile)."""

    rows: int
    channels: int
    tiles: int
    slot_bytes: int
    l1_bytes: int
    bytes_in: int
    bytes_out: int
    tiled: bool

    @classmethod
    def of(cls, tile: tiling.Tile) -> TileChoice:
        return cls(tile.rows, tile.channels, tile.tiles, tile.slot_bytes, tile.l1_bytes,
                   tile.bytes_in, tile.bytes_out, tile.tiled)

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Step:
    """One deployed layer: which tensors it reads and writes, and how it uses L1."""

    step: int
    layer: str
    op: str
    inputs: tuple[str, ...]
    output: str
    bytes: int
    scratch: Scratch | None = None
    state_bytes: int | None = None  # a window kept across inferences (outside the arena)
    tiles: dict[str, TileChoice] = field(default_factory=dict)  # "tile" / "pool_tile"
    double_buffer: bool = False
    weight_bytes: int | None = None  # a compute layer's weights and bias in flash
    workspace_bytes: int | None = None  # the optimized kernels' workspace it needs (RAM)

    def tile(self, key: str = "tile") -> TileChoice | None:
        """The pass's tile when it is really tiled (None when it runs whole)."""
        choice = self.tiles.get(key)
        return choice if choice is not None and choice.tiled else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step, "layer": self.layer, "op": self.op, "inputs": list(self.inputs),
            "output": self.output, "bytes": self.bytes, "double_buffer": self.double_buffer,
            "scratch": None if self.scratch is None else self.scratch.to_json()}
        if self.state_bytes is not None:
            out["state_bytes"] = self.state_bytes
        if self.weight_bytes is not None:
            out["weight_bytes"] = self.weight_bytes
        if self.workspace_bytes is not None:
            out["workspace_bytes"] = self.workspace_bytes
        out.update({key: choice.to_json() for key, choice in self.tiles.items()})
        return out


@dataclass(frozen=True)
class PlacedTensor:
    name: str
    bytes: int
    offset: int
    first: int
    last: int

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Totals:
    """The plan's memory figures (report.json `metrics.memory`)."""

    arena_bytes: int
    state_bytes: int
    arena_lower_bound: int
    l2_budget: int
    l1_peak: int
    l1_budget: int
    traffic_bytes: int
    traffic_lower_bound: int  # what no tiling of the layers moves less than (see tile_steps)
    tiled_layers: tuple[str, ...]
    workspace_bytes: int = 0  # the optimized kernels' workspace (one array: the largest step's)
    ram_bytes: int = 0  # arena + state + workspace + L1 peak: all the model's RAM

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "tiled_layers": list(self.tiled_layers)}


@dataclass(frozen=True)
class MemoryPlan:
    arena_bytes: int
    arena_lower_bound: int
    state_bytes: int
    alignment: int
    weight_bytes: int
    output: str
    tensors: tuple[PlacedTensor, ...]
    steps: tuple[Step, ...]
    views: dict[str, str]
    memory: Totals | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"arena_bytes": self.arena_bytes, "arena_lower_bound": self.arena_lower_bound,
               "state_bytes": self.state_bytes, "alignment": self.alignment,
               "weight_bytes": self.weight_bytes, "output": self.output,
               "tensors": [t.to_json() for t in self.tensors],
               "steps": [s.to_json() for s in self.steps], "views": dict(self.views)}
        if self.memory is not None:
            out["memory"] = self.memory.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryPlan:
        memory = data.get("memory")
        return cls(data["arena_bytes"], data["arena_lower_bound"], data["state_bytes"],
                   data["alignment"], data["weight_bytes"], data["output"],
                   tuple(PlacedTensor(**t) for t in data["tensors"]),
                   tuple(_step_from_json(s) for s in data["steps"]), dict(data["views"]),
                   None if memory is None else Totals(**{
                       **memory, "tiled_layers": tuple(memory["tiled_layers"])}))

    @classmethod
    def load(cls, directory: Path) -> MemoryPlan:
        """The plan the `plan` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "plan.json"))


def _step_from_json(data: dict[str, Any]) -> Step:
    scratch = data["scratch"]
    return Step(data["step"], data["layer"], data["op"], tuple(data["inputs"]), data["output"],
                data["bytes"],
                None if scratch is None else Scratch(scratch["name"], scratch["bytes"],
                                                     tuple(scratch["shape"])),
                data.get("state_bytes"),
                {key: TileChoice(**data[key]) for key in ("tile", "pool_tile") if key in data},
                data.get("double_buffer", False), data.get("weight_bytes"),
                data.get("workspace_bytes"))


def element_bytes(layer: Layer) -> int:
    return 4 if getattr(layer, "wide", False) else 1


def _step(index: int, layer: Layer, node: graphs.Node, inputs: list[str]) -> Step:
    stream = OPS[layer.op].stream
    scratch = None
    pool = getattr(layer, "pool", None)
    if pool is not None:
        shape = pooled(node.in_shapes[0], pool, len(node.in_shapes[0]) - 1)
        scratch = Scratch(f"{layer.name}_pooled", math.prod(shape), tuple(shape))
    return Step(index, layer.name, layer.op, tuple(inputs), layer.name,
                math.prod(node.out_shape) * element_bytes(layer), scratch,
                None if stream is None else stream.state_bytes(layer, node.out_shape))


def steps(layers: Sequence[Layer], graph: graphs.Graph) -> tuple[list[Step], dict[str, str]]:
    """(steps, alias of view tensors) for the deployed layers."""
    records: list[Step] = []
    alias: dict[str, str] = {}
    nodes = {node.name: node for node in graph.nodes}
    for index, layer in enumerate(layers, start=1):
        node = nodes[layer.name]
        inputs = [alias.get(name, name) for name in node.inputs]
        if OPS[layer.op].role is Role.view:
            alias[layer.name] = inputs[0]
            continue
        records.append(_step(index, layer, node, inputs))
    return records, alias


def tensors(model_input: Shape, records: Sequence[Step], output: str) -> list[arena.Tensor]:
    last_read: dict[str, int] = {}
    for record in records:
        for name in record.inputs:
            last_read[name] = record.step
    end = records[-1].step + 1
    found = [arena.Tensor("input", math.prod(model_input), 0, last_read.get("input", 0))]
    for record in records:
        name = record.output
        found.append(arena.Tensor(name, record.bytes, record.step,
                                  end if name == output else last_read.get(name, record.step)))
        if record.scratch:
            found.append(arena.Tensor(record.scratch.name, record.scratch.bytes, record.step,
                                      record.step))
    return found


def make_plan(input_shape: Shape, layers: Sequence[Layer], weight_bytes: int) -> MemoryPlan:
    """The plan of deployed (folded) layers: steps, tensors with offsets, sizes."""
    graph, _ = graphs.build(tuple(input_shape), tuple(layers))
    assert graph is not None
    records, alias = steps(layers, graph)
    output = alias.get(layers[-1].name, layers[-1].name)
    found = tensors(input_shape, records, output)
    placements = arena.place(found)
    clashes = arena.conflicts(placements)
    if clashes:
        raise AssertionError(f"arena placement overlaps live tensors: {clashes}")
    return MemoryPlan(
        arena.size(placements), arena.lower_bound(found),
        sum(record.state_bytes or 0 for record in records), arena.ALIGN, weight_bytes, output,
        tuple(PlacedTensor(p.tensor.name, p.tensor.bytes, p.offset, p.tensor.first,
                           p.tensor.last) for p in placements),
        tuple(records), alias)


@dataclass(frozen=True)
class TooSmall:
    """A layer that fits the L1 budget neither whole nor in its smallest tile."""

    layer: str
    smallest_l1: int  # the smallest budget it runs in (tiling.minimum_l1)


def with_weights(plan: MemoryPlan, stored: dict[str, int]) -> MemoryPlan:
    """The plan with each compute layer's stored weight bytes (weights and bias, as the
    generated C stores them: memory.budget.layer_weights) on its step, and their total."""
    steps = tuple(replace(step, weight_bytes=stored[step.layer]) if step.layer in stored
                  else step for step in plan.steps)
    return replace(plan, steps=steps, weight_bytes=sum(stored.values()))


def workspace(layer: Layer, node: graphs.Node, tile: TileChoice | None,
              number_format: str = numbers.OWN) -> int | None:
    """Bytes of the optimized kernels' workspace (the generated C's eb_scratch) the layer
    needs, by its op's C facet in the model's number format (`workspace`: int16 elements,
    for its row tile when tiled); None for a layer whose kernels need none. The project's
    array holds the largest."""
    c = numbers.c(layer.op, number_format)
    if isinstance(c, Unsupported):  # validation refuses such a layer before any stage
        return None
    rows = tile.rows if tile is not None and tile.tiled else None
    elements = c.workspace(layer, node.in_shapes, node.out_shape, rows)
    return 2 * elements if elements else None


@dataclass(frozen=True)
class Pass:
    """A windowed pass of a step (its op's `windows` facet) and the ways it can run."""

    index: int  # of its step in the plan's steps
    key: str  # "tile" / "pool_tile"
    choices: tuple[selection.Choice, ...]


@dataclass(frozen=True)
class _Model:
    """The deployed layers' records by name, for the plan's steps."""

    layers: dict[str, Layer]
    nodes: dict[str, graphs.Node]
    number_format: str = numbers.OWN

    @classmethod
    def of(cls, input_shape: Shape, layers: Sequence[Layer],
           number_format: str = numbers.OWN) -> _Model:
        graph, _ = graphs.build(tuple(input_shape), tuple(layers))
        assert graph is not None
        return cls({layer.name: layer for layer in layers},
                   {node.name: node for node in graph.nodes}, number_format)

    def windows(self, layer: Layer) -> tuple[tuple[str, Window], ...]:
        """The layer's windowed passes in the model's number format (none: untiled)."""
        node = self.nodes[layer.name]
        return numbers.windows(layer.op, self.number_format)(layer, node.in_shapes,
                                                             node.out_shape)

    def step_workspace(self, step: Step, tile: tiling.Tile | None) -> int:
        """The workspace bytes of the step with its "tile" pass run as `tile`."""
        return workspace(self.layers[step.layer], self.nodes[step.layer],
                         None if tile is None else TileChoice.of(tile), self.number_format) or 0


def passes(model: _Model, plan: MemoryPlan, l1: int | None, double_buffer: bool, split: bool,
           tile_fitting: bool = False) -> tuple[list[Pass], list[TooSmall]]:
    """Every windowed pass with its options within `l1` (tiling.options; None: untiled), each
    with its step's workspace on a target with the optimized kernels (`split`), and the
    passes that fit `l1` in no way."""
    found: list[Pass] = []
    problems: list[TooSmall] = []
    for index, step in enumerate(plan.steps):
        layer = model.layers[step.layer]
        for key, window in model.windows(layer):
            options = tiling.options(layer.name, window, l1, double_buffer, split, tile_fitting)
            if not options:
                assert l1 is not None  # every pass runs whole without a limit
                problems.append(TooSmall(layer.name,
                                         tiling.minimum_l1(window, double_buffer, split)))
                continue
            spaces: dict[tuple[int, bool], int] = {}  # by (rows, tiled): the C's figure
            for option in options:
                tile = option.tile
                if split and key == "tile" and (tile.rows, tile.tiled) not in spaces:
                    spaces[tile.rows, tile.tiled] = model.step_workspace(step, tile)
            found.append(Pass(index, key, tuple(
                selection.Choice(o, spaces.get((o.tile.rows, o.tile.tiled), 0))
                for o in options)))
    return found, problems


def workspace_floor(model: _Model, plan: MemoryPlan, found: Sequence[Pass], split: bool) -> int:
    """The workspace of the steps no "tile" pass accounts for (their kernels' own need)."""
    if not split:
        return 0
    counted = {p.index for p in found if p.key == "tile"}
    return max((model.step_workspace(step, None) for index, step in enumerate(plan.steps)
                if index not in counted), default=0)


def untiled_peaks(input_shape: Shape, layers: Sequence[Layer], plan: MemoryPlan,
                  split: bool, number_format: str = numbers.OWN) -> selection.Peaks:
    """The L1 and workspace peaks of the untiled build: every pass whole (or, a linear
    layer on the split kernels, streamed), as an L1 budget that fits them all plans it."""
    model = _Model.of(input_shape, layers, number_format)
    found, _ = passes(model, plan, None, False, split)
    return selection.best_peaks([p.choices for p in found],
                                workspace_floor(model, plan, found, split))


def _above(peaks: selection.Peaks, untiled: int | None, budget: int | None) -> bool:
    """Whether the peaks take more bytes than the untiled build's, or more workspace than
    the budget holds: then tiling layers that fit L1 too may do better."""
    return (untiled is not None and peaks.bytes > untiled) or \
        (budget is not None and peaks.workspace > budget)


def _better(a: selection.Peaks, b: selection.Peaks, budget: int | None) -> bool:
    """Whether peaks `a` beat `b`: within the workspace budget, then less RAM (over it:
    less workspace)."""
    def score(peaks: selection.Peaks) -> tuple[int, int]:
        over = budget is not None and peaks.workspace > budget
        return (1, peaks.workspace) if over else (0, peaks.bytes)
    return score(a) < score(b)


def choose_tiles(input_shape: Shape, layers: Sequence[Layer], plan: MemoryPlan, l1: int,
                 l2: int, double_buffer: bool, split: bool = False,
                 number_format: str = numbers.OWN
                 ) -> tuple[dict[tuple[int, str], tiling.Tile], list[TooSmall]]:
    """Each windowed pass's tile, by (step index, key), and the passes that cannot fit `l1`.
    Little RAM for few instructions (memory.selection) with the workspace within the L2 the
    arena and state leave and the RAM at most the untiled build's; a layer that fits L1 runs
    whole unless only tiling it too keeps within those (then every pass may tile)."""
    model = _Model.of(input_shape, layers, number_format)
    budget = l2 - plan.arena_bytes - plan.state_bytes if split else None
    untiled = untiled_peaks(input_shape, layers, plan, split,
                            number_format).bytes if split else None
    found, problems = passes(model, plan, l1, double_buffer, split)
    floor = workspace_floor(model, plan, found, split)
    peaks = selection.best_peaks([p.choices for p in found], floor, budget, untiled)
    if split and not problems and _above(peaks, untiled, budget):
        every, _ = passes(model, plan, l1, double_buffer, split, tile_fitting=True)
        more = selection.best_peaks([p.choices for p in every], floor, budget, untiled)
        if _better(more, peaks, budget):
            found, peaks = every, more
    return {(p.index, p.key): selection.cheapest(p.choices, peaks).option.tile
            for p in found}, problems


def tile_steps(input_shape: Shape, layers: Sequence[Layer], plan: MemoryPlan, l1: int,
               l2: int, double_buffer: bool, split: bool = False,
               number_format: str = numbers.OWN) -> tuple[MemoryPlan, list[TooSmall]]:
    """The plan with an L1 tile on every windowed step (`choose_tiles`), the optimized
    kernels' workspace of every step (`workspace`) and its memory totals, and the layers
    that cannot fit `l1` at all. `split`: the target's C has the optimized kernels, the
    split ones among them (memory.tiling: the split layout)."""
    model = _Model.of(input_shape, layers, number_format)
    chosen, problems = choose_tiles(input_shape, layers, plan, l1, l2, double_buffer, split,
                                    number_format)
    tiles: list[tiling.Tile] = []
    lower = 0
    new_steps = []
    for index, step in enumerate(plan.steps):
        layer, node = model.layers[step.layer], model.nodes[step.layer]
        choices: dict[str, TileChoice] = {}
        for key, window in model.windows(layer):
            lower += tiling.lower_bound(window, split)  # what any tiling of it moves at least
            if (index, key) in chosen:
                choices[key] = TileChoice.of(chosen[index, key])
                tiles.append(chosen[index, key])
        if OPS[layer.op].l2_traffic:  # streamed between L2 tensors: its own bound
            streamed = tiling.Tile(layer.name, 0, 0, 1, 0, 0,
                                   sum(math.prod(s) for s in node.in_shapes),
                                   math.prod(node.out_shape), False)
            lower += streamed.bytes_in + streamed.bytes_out
            tiles.append(streamed)
        new_steps.append(replace(step, tiles=choices, double_buffer=double_buffer,
                                 workspace_bytes=workspace(layer, node, choices.get("tile"),
                                                           number_format) if split else None))
    return replace(plan, steps=tuple(new_steps),
                   memory=_totals(plan, new_steps, tiles, lower, l1, l2)), problems


def _totals(plan: MemoryPlan, steps: Sequence[Step], tiles: Sequence[tiling.Tile], lower: int,
            l1: int, l2: int) -> Totals:
    """The plan's memory figures: RAM is the arena, the state, the largest step's workspace
    and the L1 peak."""
    l1_peak = max((t.l1_bytes for t in tiles), default=0)
    scratch = max((s.workspace_bytes or 0 for s in steps), default=0)
    return Totals(plan.arena_bytes, plan.state_bytes, plan.arena_lower_bound, l2, l1_peak, l1,
                  sum(t.bytes_in + t.bytes_out for t in tiles), lower,
                  tuple(sorted({t.layer for t in tiles if t.tiled})), scratch,
                  plan.arena_bytes + plan.state_bytes + scratch + l1_peak)
