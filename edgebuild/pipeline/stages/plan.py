"""Stage `plan`: where every tensor lives — the static activation arena, the L1 tiles and
the budgets (edgebuild/memory/plan.py computes the plan). `target.memory` (l1, l2, flash) is
checked by the functions `edgebuild check` uses before any training (memory/budget.py), so
a budget check passed is one plan meets; on a MAX7800x target the accelerator placement and
the vendor's network description are written too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage
from edgebuild.core.errors import UserError

if TYPE_CHECKING:  # stage modules stay import-light (a no-op build imports no numpy)
    from edgebuild.core.jsontypes import JSONObject
    from edgebuild.manifest import Layer
    from edgebuild.memory.plan import MemoryPlan
    from edgebuild.pipeline.validation import Checked


def config(checked: Checked) -> JSONObject:
    """With the manifest's name: a MAX7800x target's network.yaml and checkpoint carry it as
    the architecture name (a key without it would stand for two manifests' files)."""
    manifest = checked.manifest
    return {"name": manifest.name,
            "target": manifest.target.model_dump(mode="json", exclude={"name"}),
            "placement": {name: entry.model_dump(mode="json")
                          for name, entry in sorted(manifest.placement.items())}}


def run(ctx: Context[Checked]) -> None:
    from edgebuild.codegen.project import OPTIMIZED_CPUS
    from edgebuild.memory import plan as plans
    from edgebuild.model import folding
    from edgebuild.targets.cpu import cpu

    manifest = ctx.checked.manifest
    layers, _ = folding.fold_layers(manifest.model.layers)
    memory, tiling = manifest.target.memory, manifest.target.tiling
    bits, stored = _stored_weights(ctx)
    plan = plans.with_weights(plans.make_plan(manifest.model.input, layers,
                                              sum(stored.values())), stored)
    optimized = cpu(manifest.target.device.value) in OPTIMIZED_CPUS
    plan, too_small = plans.tile_steps(manifest.model.input, layers, plan, memory.l1, memory.l2,
                                       tiling.double_buffer, optimized, manifest.model.format.value)
    _check_budgets(ctx, layers, plan, bits, optimized)  # RAM: the chosen tiles' workspace
    assert not too_small, too_small  # no tile only below tiling.minimum_l1: checked above
    (ctx.out / "plan.json").write_text(json.dumps(plan.to_json(), indent=1, sort_keys=True) + "\n")
    _accelerator(ctx, layers)
    ctx.log(f"plan: arena {plan.arena_bytes} bytes (lower bound "
            f"{plan.arena_lower_bound}), weights {plan.weight_bytes} bytes")


def _accelerator(ctx: Context[Checked], layers: tuple[Layer, ...]) -> None:
    """For MAX7800x-style devices: processors, data/kernel/bias memory maps, and the network
    description in that toolchain's format with its quantized checkpoint (`ai8x/network.yaml`,
    `ai8x/checkpoint-q.pth.tar`, exported to build/<name>/: ai8xize.py reads the pair)."""
    from edgebuild.core import arrays
    from edgebuild.model.quantization import Quantization
    from edgebuild.targets.max7800x import layout as accelerator
    from edgebuild.targets.max7800x import network
    from edgebuild.targets.max7800x import profile as devices

    manifest = ctx.checked.manifest
    if not devices.is_accelerator(manifest.target.device.value):
        return
    quant = Quantization.load(ctx.inputs["quantize"])
    bits = {row.name: row.bits for row in quant.layers}
    weights = arrays.load(ctx.inputs["quantize"] / "weights.npz")
    # with the weight values: equal tensors stored once, all-zero biases not at all, as
    # the accelerator program stores them (`check`, before quantize, cannot know)
    _, placed, problems = accelerator.layout(manifest, layers, bits, weights)
    if problems:
        document = ctx.checked.document
        raise UserError([document.diagnostic(path, message) for path, message in problems])
    assert placed is not None  # layout places every layer when it finds no problem
    placement = placed.to_json()
    (ctx.out / "placement.json").write_text(json.dumps(placement, indent=1, sort_keys=True) + "\n")
    (ctx.out / "maps.txt").write_text(placed.text() + "\n")
    (ctx.out / "ai8x").mkdir()
    (ctx.out / "ai8x" / "network.yaml").write_text(  # the exporter reads the JSON forms
        network.export_network(manifest, placement, quant=quant.to_json()))
    (ctx.out / "ai8x" / network.CHECKPOINT_FILE).write_bytes(network.export_checkpoint(
        manifest.name, placement, weights, quant.to_json()))
    ctx.log(f"plan: {len(placed.layers)} {manifest.target.device.value} layers placed")


def _stored_weights(ctx: Context[Checked]) -> tuple[dict[str, int], dict[str, int]]:
    """(weight width, bytes in the generated C's flash) by layer, of the arrays in
    weights.npz (one int8 per weight there): 1-, 2-, 4-bit weights packed (core.packing),
    biases int32."""
    from edgebuild.core import arrays, packing
    from edgebuild.model.quantization import Quantization

    bits = {row.name: row.bits for row in Quantization.load(ctx.inputs["quantize"]).layers}
    stored: dict[str, int] = {}
    for key, array in arrays.load(ctx.inputs["quantize"] / "weights.npz").items():
        layer, _, part = key.rpartition(".")
        size = packing.stored_bytes(tuple(array.shape), bits[layer]) if part == "weight" \
            else int(array.nbytes)
        stored[layer] = stored.get(layer, 0) + size
    return bits, stored


def _check_budgets(ctx: Context[Checked], layers: tuple[Layer, ...], plan: MemoryPlan,
                   bits: dict[str, int], optimized: bool) -> None:
    """`target.memory` against what the plan needs, by the functions `edgebuild check` uses
    before any training (memory.budget): it has reported these already. On an accelerator
    target the RAM of the Cortex-M4 emulation is recorded (emulation.json), not enforced."""
    from edgebuild.memory import budget
    from edgebuild.targets.max7800x import emulation
    from edgebuild.targets.max7800x import profile as devices

    manifest = ctx.checked.manifest
    needs = budget.needs(manifest.model.input, layers, plan, manifest.target.tiling.double_buffer,
                         bits, optimized, manifest.model.format.value)
    if needs.flash_bytes != plan.weight_bytes:  # check weighed other weights than these
        raise AssertionError(f"weights.npz stores {plan.weight_bytes} bytes, the layers' stored "
                             f"weights (memory.budget) {needs.flash_bytes}")
    device = manifest.target.device.value
    accelerated = devices.is_accelerator(device)
    problems = budget.shortfalls(needs, manifest.target.memory, ram=not accelerated)
    if problems:
        raise UserError([ctx.checked.document.diagnostic(path, message)
                         for path, message in problems])
    for path, message in budget.warnings(needs, manifest.target.memory):  # check said so too
        ctx.warn(f"{'.'.join(path)}: {message}")
    if accelerated:  # the emulation's RAM: a fact the kat stage and the report read
        fit = emulation.fit(device, manifest.target.memory.l2, needs.ram.bytes)
        (ctx.out / emulation.FILE).write_text(json.dumps(fit.to_json(), sort_keys=True) + "\n")
        if not fit.fits:
            ctx.warn(fit.reason())


STAGE = Stage("plan", ("validate", "quantize"), config, run,
              "static activation arena by tensor lifetimes; memory budgets; device placement",
              exports=("ai8x/network.yaml", "ai8x/checkpoint-q.pth.tar"),
              artifacts={"plan.json": "plan.v1", "placement.json": "placement.v1"},
              facets=("c", "stream", "weights", "windows"))
