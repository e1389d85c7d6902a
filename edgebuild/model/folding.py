"""From the trained graph to the deployed one: batchnorm folded away, dropout dropped.

BN merges into the conv/linear that feeds it (which inherits BN's activation and gains a
bias); dropout is the identity at inference. Consumers of a removed layer read its source
instead (`alias`). Every layer of the result names its inputs explicitly.
"""

from __future__ import annotations

from edgebuild.model.graph import INPUT
from edgebuild.ops.operator import LayerBase

COMPUTE_OPS = ("conv1d", "conv2d", "conv_transpose2d", "linear")  # the layers with weights


def fold_layers(layers: tuple[LayerBase, ...]) -> tuple[tuple[LayerBase, ...], dict[str, str]]:
    folded: dict[str, LayerBase] = {}
    alias: dict[str, str] = {}
    previous = INPUT
    for layer in layers:
        inputs = tuple(alias.get(n, n) for n in (layer.inputs or (previous,)))
        if layer.op == "batchnorm":
            producer = folded[inputs[0]]
            folded[producer.name] = producer.model_copy(update={"act": layer.act, "bias": True})
            alias[layer.name] = producer.name
        elif layer.op == "dropout":
            alias[layer.name] = inputs[0]
        else:
            folded[layer.name] = layer.model_copy(update={"inputs": inputs})
        previous = layer.name
    return tuple(folded.values()), alias


def fold_state(state: dict, layers: tuple[LayerBase, ...]) -> dict:
    """Float state dict (numpy) of the trained net -> state dict of the folded net."""
    from edgebuild.ops.batchnorm import fold
    from edgebuild.ops.conv_transpose2d import from_out_major, to_out_major

    out = dict(state)
    by_name = {layer.name: layer for layer in layers}
    previous = INPUT
    for layer in layers:
        if layer.op == "batchnorm":
            producer = (layer.inputs or (previous,))[0]
            stats = {k: out.pop(f"{layer.name}.{k}") for k in
                     ("weight", "bias", "running_mean", "running_var")}
            out.pop(f"{layer.name}.num_batches_tracked", None)
            weight = out[f"{producer}.weight"]
            transposed = by_name[producer].op == "conv_transpose2d"  # (in, out/groups, ...)
            if transposed:
                weight = to_out_major(weight, by_name[producer].groups)
            weight, out[f"{producer}.bias"] = fold(weight, out.get(f"{producer}.bias"), stats,
                                                   layer.eps)
            out[f"{producer}.weight"] = from_out_major(weight, by_name[producer].groups) \
                if transposed else weight
        previous = layer.name
    return out


def output_name(layers: tuple[LayerBase, ...], alias: dict[str, str]) -> str:
    return alias.get(layers[-1].name, layers[-1].name)
