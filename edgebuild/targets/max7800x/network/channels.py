"""Channel counts the network description implies without a checkpoint (processor maps,
`in_channels` / `out_channels`, `groups`, the dataset's classes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgebuild.targets.max7800x.network.spec import Spec
from edgebuild.targets.max7800x.network.values import popcount

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.records import Profile


def map_channels(specs: list[Spec], p: int, output_map: int | None, classes: int | None,
                 profile: Profile) -> tuple[int | None, str]:
    """Output channels of layer `p` from the description alone: (count, source).

    Exact sources first (`out_channels`, depthwise `groups`, a consumer's `in_channels` or
    depthwise `groups`), then the processor maps (one channel per processor: the largest of
    the layer's output_processors and its consumers' processors), then for the last layer
    the global output_map and, when it is a classifier (linear, or a 32-bit output), the
    dataset's class count."""
    spec = specs[p]
    if spec.out_channels is not None:
        return spec.out_channels, "out_channels"
    if spec.groups > 1:
        return spec.groups, "groups"
    consumers = [c for c in specs[p + 1:] if p in c.inputs]
    for consumer in consumers:
        if consumer.in_channels is not None and (len(consumer.inputs) == 1 or consumer.eltwise):
            return consumer.in_channels, "in_channels"
        if consumer.groups > 1 and (len(consumer.inputs) == 1 or consumer.eltwise):
            return consumer.groups, "groups"
    bounds = [popcount(spec.output_processors)] if spec.output_processors is not None else []
    bounds += [popcount(c.processors) for c in consumers
               if c.processors is not None and (len(c.inputs) == 1 or c.eltwise)]
    last = p == len(specs) - 1
    if last and output_map is not None and spec.output_processors is None:
        bounds.append(popcount(output_map))
    classifier = last and classes is not None and (spec.op == "linear" or spec.wide)
    if bounds:
        count = max(bounds)
        if classifier and classes is not None and profile.processors_needed(classes) == count:
            return classes, "dataset"
        return count, "processors"
    if classifier:
        return classes, "dataset"
    return None, ""
