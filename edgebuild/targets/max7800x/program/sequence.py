"""The order the accelerator runs the hardware layers in, where it is not the model's.

A data buffer (a `buffer` layer: a window of the last `length` frames' features kept in data
memory across inferences, mapping.py) is programmed as the vendor's tool describes it: its
hardware layer is a passthrough that shifts words 1..length-1 one word down (`buffer_shift`),
and the layer that computes the newest frame's features writes them into the last word
(`buffer_insert`). The shift must run right before that producer: after it, it would move
the newest frame out at once. The model lists the buffer after its producer (the buffer reads
it), so the program runs each buffer's layer one step earlier, as the exported network
description lists it (network/export.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.hwlayer import HwLayer
    from edgebuild.targets.max7800x.placement.records import LayerPlan


def run_order(hw: tuple[HwLayer, ...], plans: tuple[LayerPlan, ...]
              ) -> tuple[tuple[HwLayer, ...], tuple[LayerPlan, ...]]:
    """`hw` and its plans (in step) in the order the accelerator runs them: each buffer's
    shift right before the layer that inserts its newest frame."""
    shift_of = {layer.inputs[0]: i for i, layer in enumerate(hw) if layer.persistent}
    order: list[int] = []
    for i, layer in enumerate(hw):
        if layer.persistent and layer.inputs[0] in {other.name for other in hw}:
            continue
        if layer.name in shift_of:
            order.append(shift_of[layer.name])
        order.append(i)
    return tuple(hw[i] for i in order), tuple(plans[i] for i in order)
