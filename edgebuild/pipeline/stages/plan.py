"""Stage `plan`: where every tensor lives — the static activation arena and the budgets.

Steps are the deployed (folded) layers in order; step 0 writes the model input. A layer
with fused pooling gets a scratch tensor for its pooled input, live only at its own step.
`flatten`, `reshape` and `passthrough` are views (no copy, no buffer of their own). A
`buffer` layer's window also lives outside the arena, in its own state array (`state_bytes`),
because it must survive from one inference to the next. The
weights and the arena are checked against `target.memory` (flash and l2) here, before any
compiler runs.
"""

from __future__ import annotations

import json
import math

from edgebuild.core.errors import UserError
from edgebuild.pipeline.stage import Context, Stage


def config(checked) -> dict:
    manifest = checked.manifest
    return {"target": manifest.target.model_dump(mode="json"),
            "placement": {name: entry.model_dump(mode="json")
                          for name, entry in sorted(manifest.placement.items())}}


VIEWS = ("flatten", "reshape", "passthrough")  # no copy, no buffer: the output is the input


def element_bytes(layer) -> int:
    return 4 if getattr(layer, "wide", False) else 1


def steps(model_input, layers, graph) -> tuple[list, dict]:
    """(per-step records, alias of view tensors) for the deployed layers."""
    from edgebuild.ops.pooling import geometry

    records, alias = [], {}
    nodes = {node.name: node for node in graph.nodes}
    for index, layer in enumerate(layers, start=1):
        node = nodes[layer.name]
        inputs = [alias.get(name, name) for name in node.inputs]
        if layer.op in VIEWS:
            alias[layer.name] = inputs[0]
            continue
        record = {"step": index, "layer": layer.name, "op": layer.op, "inputs": inputs,
                  "output": layer.name, "scratch": None,
                  "bytes": math.prod(node.out_shape) * element_bytes(layer)}
        if layer.op == "buffer":  # its window persists across inferences, outside the arena
            record["state_bytes"] = math.prod(node.out_shape)
        if getattr(layer, "pool", None) is not None:
            sizes, strides = geometry(layer.pool, len(node.in_shapes[0]) - 1)
            pooled = [node.in_shapes[0][0]] + [(n - k) // s + 1 for n, k, s in zip(
                node.in_shapes[0][1:], sizes, strides, strict=True)]
            record["scratch"] = {"name": f"{layer.name}_pooled", "bytes": math.prod(pooled),
                                 "shape": pooled}
        records.append(record)
    return records, alias


def tensors(model_input, records: list, output: str):
    from edgebuild.memory.arena import Tensor

    last_read: dict[str, int] = {}
    for record in records:
        for name in record["inputs"]:
            last_read[name] = record["step"]
    end = records[-1]["step"] + 1
    found = [Tensor("input", math.prod(model_input), 0, last_read.get("input", 0))]
    for record in records:
        name = record["output"]
        found.append(Tensor(name, record["bytes"], record["step"],
                            end if name == output else last_read.get(name, record["step"])))
        if record["scratch"]:
            scratch = record["scratch"]
            found.append(Tensor(scratch["name"], scratch["bytes"], record["step"], record["step"]))
    return found


def make_plan(input_shape, layers, weight_bytes: int) -> dict:
    """The plan of deployed (folded) layers: steps, tensors with offsets, sizes."""
    from edgebuild.memory import arena
    from edgebuild.model import graph as graphs

    graph, _ = graphs.build(tuple(input_shape), layers)
    records, alias = steps(input_shape, layers, graph)
    output = alias.get(layers[-1].name, layers[-1].name)
    found = tensors(input_shape, records, output)
    placements = arena.place(found)
    clashes = arena.conflicts(placements)
    if clashes:
        raise AssertionError(f"arena placement overlaps live tensors: {clashes}")
    return {"arena_bytes": arena.size(placements), "arena_lower_bound": arena.lower_bound(found),
            "state_bytes": sum(record.get("state_bytes", 0) for record in records),
            "alignment": arena.ALIGN, "weight_bytes": weight_bytes, "output": output,
            "tensors": [{"name": p.tensor.name, "bytes": p.tensor.bytes, "offset": p.offset,
                         "first": p.tensor.first, "last": p.tensor.last} for p in placements],
            "steps": records, "views": alias}


def tile_steps(input_shape, layers, plan: dict, l1: int, double_buffer: bool):
    """Attach an L1 tile to every windowed step; (problems, memory totals)."""
    from edgebuild.memory import tiling
    from edgebuild.model import graph as graphs

    graph, _ = graphs.build(tuple(input_shape), layers)
    nodes = {node.name: node for node in graph.nodes}
    specs = {layer.name: layer for layer in layers}
    problems, tiles, lower = [], [], 0
    for step in plan["steps"]:
        layer, node = specs[step["layer"]], nodes[step["layer"]]
        for key, window in _windows(layer, node):
            lower += tiling.whole(window)  # every input, weight and output byte once
            tile = tiling.choose(layer.name, window, l1, double_buffer)
            if tile is None:
                problems.append((layer.name, tiling.smallest_l1(window, double_buffer)))
                continue
            step[key] = {"rows": tile.rows, "channels": tile.channels, "tiles": tile.tiles,
                         "slot_bytes": tile.slot_bytes, "l1_bytes": tile.l1_bytes,
                         "bytes_in": tile.bytes_in, "bytes_out": tile.bytes_out,
                         "tiled": tile.tiled}
            tiles.append(tile)
        if layer.op in ("add", "concat"):  # streamed between L2 tensors
            moved = sum(math.prod(s) for s in node.in_shapes)
            lower += moved + math.prod(node.out_shape)
            tiles.append(tiling.Tile(layer.name, 0, 0, 1, 0, 0, moved,
                                     math.prod(node.out_shape), False))
    return problems, {"l1_peak": max((t.l1_bytes for t in tiles), default=0), "l1_budget": l1,
                      "traffic_bytes": sum(t.bytes_in + t.bytes_out for t in tiles),
                      "traffic_lower_bound": lower,
                      "tiled_layers": sorted({t.layer for t in tiles if t.tiled})}


def _windows(layer, node) -> list:
    from edgebuild.memory import tiling

    found = []
    if layer.op in ("conv1d", "conv2d", "conv_transpose2d"):
        shape = node.in_shapes[0]
        if layer.pool is not None:
            pooled = tiling.pooled_shape(layer.pool, shape)
            found.append(("pool_tile", tiling.pool_window(layer.pool, shape, pooled)))
            shape = pooled
        found.append(("tile", tiling.conv_window(layer, shape, node.out_shape)))
    elif layer.op in ("pool1d", "pool2d"):
        from edgebuild.ops.pool import window

        found.append(("tile", tiling.pool_window(window(layer), node.in_shapes[0], node.out_shape)))
    elif layer.op == "linear":
        found.append(("tile", tiling.linear_window(layer, node.in_shapes[0])))
    return found


def run(ctx: Context) -> None:
    from edgebuild.model import folding

    manifest = ctx.checked.manifest
    layers, _ = folding.fold_layers(manifest.model.layers)
    plan = make_plan(manifest.model.input, layers, _weight_bytes(ctx))
    weights = plan["weight_bytes"]
    _check_budgets(ctx, plan)
    memory, tiling = manifest.target.memory, manifest.target.tiling
    problems, totals = tile_steps(manifest.model.input, layers, plan, memory.l1,
                                  tiling.double_buffer)
    if problems:
        raise UserError([ctx.checked.document.diagnostic(("target", "memory", "l1"), (
            f"layer {name!r} needs at least {need} bytes of L1 even in its smallest tile "
            f"(one output row, fewest channels{', double buffered' if tiling.double_buffer else ''}), "
            f"budget is {memory.l1}")) for name, need in problems])
    for step in plan["steps"]:
        step["double_buffer"] = tiling.double_buffer
    plan["memory"] = {"arena_bytes": plan["arena_bytes"], "state_bytes": plan["state_bytes"],
                      "arena_lower_bound": plan["arena_lower_bound"],
                      "l2_budget": memory.l2, **totals}
    (ctx.out / "plan.json").write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
    _accelerator(ctx, layers)
    ctx.log(f"plan: arena {plan['arena_bytes']} bytes (lower bound "
            f"{plan['arena_lower_bound']}), weights {weights} bytes")


def _accelerator(ctx: Context, layers) -> None:
    """For MAX7800x-style devices: processors, data/kernel/bias memory maps, and the network
    description in that toolchain's format (`ai8x/network.yaml`, exported to build/<name>/)."""
    from edgebuild.targets.max7800x import layout as accelerator
    from edgebuild.targets.max7800x import network
    from edgebuild.targets.max7800x import profile as devices

    manifest = ctx.checked.manifest
    if not devices.is_accelerator(manifest.target.device.value):
        return
    quant = json.loads((ctx.inputs["quantize"] / "quant.json").read_text())
    bits = {row["name"]: row["bits"] for row in quant["layers"]}
    _, placed, problems = accelerator.layout(manifest, layers, bits)
    if problems:
        document = ctx.checked.document
        raise UserError([document.diagnostic(path, message) for path, message in problems])
    placement = placed.to_json()
    (ctx.out / "placement.json").write_text(json.dumps(placement, indent=1, sort_keys=True) + "\n")
    (ctx.out / "maps.txt").write_text(placed.text() + "\n")
    (ctx.out / "ai8x").mkdir()
    (ctx.out / "ai8x" / "network.yaml").write_text(
        network.export_network(manifest, placement, quant=quant))
    ctx.log(f"plan: {len(placement['layers'])} {manifest.target.device.value} layers placed")


def _weight_bytes(ctx: Context) -> int:
    from edgebuild.core import arrays

    return sum(int(a.nbytes) for a in arrays.load(ctx.inputs["quantize"] / "weights.npz").values())


def _check_budgets(ctx: Context, plan: dict) -> None:
    memory = ctx.checked.manifest.target.memory
    document = ctx.checked.document
    problems = []
    ram = plan["arena_bytes"] + plan["state_bytes"]
    if ram > memory.l2:
        state = f" plus {plan['state_bytes']} bytes of buffer state" if plan["state_bytes"] else ""
        problems.append(document.diagnostic(("target", "memory", "l2"), (
            f"the activation arena needs at least {plan['arena_bytes']} bytes of L2{state}, "
            f"budget is {memory.l2}")))
    if plan["weight_bytes"] > memory.flash:
        problems.append(document.diagnostic(("target", "memory", "flash"), (
            f"the weights alone need {plan['weight_bytes']} bytes of flash, budget is "
            f"{memory.flash}")))
    if problems:
        raise UserError(problems)


STAGE = Stage("plan", 5, ("validate", "quantize"), config, run,
              "static activation arena by tensor lifetimes; memory budgets; device placement",
              exports=("ai8x/network.yaml",))
