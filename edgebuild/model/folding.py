"""From the trained graph to the deployed one: batchnorm folded away, dropout dropped.

BN merges into the conv/linear that feeds it (which inherits BN's activation and gains a
bias); dropout is the identity at inference. Consumers of a removed layer read its source
instead (`alias`). Every layer of the result names its inputs explicitly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from edgebuild.model.graph import INPUT
from edgebuild.ops import OPS
from edgebuild.ops.operator import Role, Unsupported

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer
    from edgebuild.ops.batchnorm import BatchNorm


def fold_layers(layers: tuple[Layer, ...]) -> tuple[tuple[Layer, ...], dict[str, str]]:
    folded: dict[str, Layer] = {}
    alias: dict[str, str] = {}
    previous = INPUT
    for layer in layers:
        inputs = tuple(alias.get(n, n) for n in (layer.inputs or (previous,)))
        role = OPS[layer.op].role
        if role is Role.folded:
            producer = folded[inputs[0]]
            act = cast("BatchNorm", layer).act  # batchnorm is the only folded op
            folded[producer.name] = producer.model_copy(update={"act": act, "bias": True})
            alias[layer.name] = producer.name
        elif role is Role.dropped:
            alias[layer.name] = inputs[0]
        else:
            folded[layer.name] = layer.model_copy(update={"inputs": inputs})
        previous = layer.name
    return tuple(folded.values()), alias


def fold_targets(layers: tuple[Layer, ...]) -> frozenset[str]:
    """The layers a batchnorm folds into. Their own output never exists on the device: the
    folded layer's is the batchnorm's, so float training must neither clamp nor saturate
    theirs. Clamping a convolution's output to the int8 range before the batchnorm that
    follows it (as every layer's was) left some channels nearly constant at the rail, the
    batchnorm divided by a variance of 1e-5, and the folded weights came out hundreds of
    times larger than what the float network computed: QAT began at chance (ACSF1: float
    58 %, int8 23 %)."""
    targets = set()
    previous = INPUT
    for layer in layers:
        if OPS[layer.op].role is Role.folded:
            targets.add((layer.inputs or (previous,))[0])
        previous = layer.name
    return frozenset(targets)


def fold_state(state: dict[str, NDArray[Any]],
               layers: tuple[Layer, ...]) -> dict[str, NDArray[Any]]:
    """Float state dict (numpy) of the trained net -> state dict of the folded net."""
    from edgebuild.ops.batchnorm import fold

    out = dict(state)
    by_name = {layer.name: layer for layer in layers}
    previous = INPUT
    for layer in layers:
        if OPS[layer.op].role is Role.folded:
            producer = by_name[(layer.inputs or (previous,))[0]]
            stats = {k: out.pop(f"{layer.name}.{k}") for k in
                     ("weight", "bias", "running_mean", "running_var")}
            out.pop(f"{layer.name}.num_batches_tracked", None)
            layout = OPS[producer.op].weights
            assert not isinstance(layout, Unsupported)  # the graph checks BN follows weights
            weight = layout.to_out_major(out[f"{producer.name}.weight"], producer)
            weight, out[f"{producer.name}.bias"] = fold(weight, out.get(f"{producer.name}.bias"),
                                                        stats, cast("BatchNorm", layer).eps)
            out[f"{producer.name}.weight"] = layout.from_out_major(weight, producer)
        previous = layer.name
    return out


def output_name(layers: tuple[Layer, ...], alias: dict[str, str]) -> str:
    return alias.get(layers[-1].name, layers[-1].name)
