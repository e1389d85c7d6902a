"""When each training buffer is needed within a step, and the L2 lower bound that follows.

The generated code declares every buffer for the whole step (ondevice.memory.buffers): simple,
and what `l2_bytes` counts. A buffer is needed only from the first step that touches it to
the last: an activation from the layer that writes it to the last backward step that reads
it, a gradient from its first contribution to the last step that reads it. `lower_bound` is
the most bytes needed at once over the step's events -- what an allocator that packed the
buffers by lifetime (as the inference arena does) would need at least, with the same order
of steps. Trainable weights, optimizer state and the caller's batch persist across steps;
the inference arena is needed while the int8 prefix runs.

The events mirror the calls of the generated code (ondevice.codegen): the prefix, each
layer's forward pass (its fused pooling, the operator, the activation), the loss, each
layer's backward steps in reverse order (activation, weight and bias gradients, input
gradient, pooling's input gradient: the forward input only for a max pool, the one whose
gradient depends on it), the optimizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from edgebuild.ondevice.operators import TrainKernel

if TYPE_CHECKING:
    from edgebuild.ondevice.backward import TrainGraph, TrainLayer
    from edgebuild.ondevice.memory import Buffer

ARENA = "arena"  # the inference arena, as an event's buffer
PERSISTENT = ("weight", "optimizer")  # buffer kinds needed across steps
CALLERS = ("batch_inputs", "batch_labels")  # the caller's batch: held for the whole step


def persistent(buffer: Buffer) -> bool:
    """Needed for the whole step: trainable weights, optimizer state, the caller's batch."""
    return buffer.kind in PERSISTENT or buffer.name in CALLERS


def _x(tensor: str) -> str:
    return f"x_{tensor}"


def _d(tensor: str) -> str:
    return f"d_{tensor}"


def _forward(layer: TrainLayer) -> list[set[str]]:
    events = []
    if layer.pool is not None and layer.weighted:
        events.append({_x(layer.inputs[0]), _x(layer.conv_input)})
    reads = {_x(layer.conv_input)} if layer.weighted else {_x(name) for name in layer.inputs}
    events.append(reads | {_x(layer.pre)})
    if layer.act != "none":
        events.append({_x(layer.pre), _x(layer.name)})
    return events


def _parameters(layer: TrainLayer) -> list[set[str]]:
    events = []
    if layer.scope == "all":
        events.append({_d(layer.pre), _x(layer.conv_input), f"g_{layer.name}.weight"})
    if layer.scope is not None and layer.bias:
        events.append({_d(layer.pre), f"g_{layer.name}.bias"})
    return events


def _inputs(layer: TrainLayer, needs: frozenset[str]) -> list[set[str]]:
    if layer.weighted:
        events = []
        if layer.conv_input in needs:
            events.append({_d(layer.pre), _d(layer.conv_input)})
        if layer.pool is not None and layer.inputs[0] in needs:
            reads = {_x(layer.inputs[0])} if layer.pool_mode == "max" else set()
            events.append(reads | {_d(layer.conv_input), _d(layer.inputs[0])})
        return events
    upstream = _d(layer.pre) if layer.kernel is TrainKernel.add else _d(layer.name)
    maximum = layer.kernel is TrainKernel.pool and layer.pool_mode == "max"
    reads = {_x(layer.inputs[0])} if maximum else set()
    return [{upstream, _d(name)} | reads for name in layer.inputs if name in needs]


def _backward(layer: TrainLayer, needs: frozenset[str]) -> list[set[str]]:
    events = []
    if layer.act != "none":
        events.append({_x(layer.pre), _d(layer.name), _d(layer.pre)})
    return events + _parameters(layer) + _inputs(layer, needs)


def events(graph: TrainGraph, mse: bool) -> list[set[str]]:
    """The buffers each event of a step touches, in order (names as `Buffer.name`)."""
    found = [{ARENA} | {_x(name) for name, _ in graph.boundary}]
    for layer in graph.layers:
        found += _forward(layer)
    loss = {_x(graph.output), _d(graph.output)}
    found.append(loss | ({"batch_target"} if mse else set()))
    for layer in reversed(graph.layers):
        if layer.name in graph.needs_grad:
            found += _backward(layer, graph.needs_grad)
    found.append({f"g_{name}" for name, _ in graph.parameters()})
    return found


def lower_bound(graph: TrainGraph, buffers: Sequence[Buffer], arena: int, mse: bool) -> int:
    """The most L2 bytes needed at once in a step (see the module's docstring)."""
    always = sum(b.bytes for b in buffers if persistent(b))
    sizes = {b.name: b.bytes for b in buffers if not persistent(b) and b.kind not in ("frozen",
                                                                                        "l1")}
    sizes[ARENA] = arena
    steps = events(graph, mse)
    spans: dict[str, tuple[int, int]] = {}
    for index, touched in enumerate(steps):
        for name in touched:
            spans[name] = (spans.get(name, (index, index))[0], index)
    unknown = set(spans) - set(sizes)
    assert not unknown, f"events name buffers the plan does not have: {sorted(unknown)}"
    return always + max(sum(sizes[name] for name, (a, b) in spans.items() if a <= index <= b)
                        for index in range(len(steps)))
