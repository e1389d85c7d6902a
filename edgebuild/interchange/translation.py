"""The working state of one ONNX import: the layers made so far (manifest dictionaries,
every input named), their float weights, which layer holds each ONNX tensor, and what
the nodes' translators (interchange.nodes) ask of it.

A translator that cannot map its node raises `Rejected(why)`; the importer collects every
such message and reports them all at once. Layers are plain dictionaries until the import
ends (a ReLU after a convolution becomes its `act`, a constant added after it its bias),
then each is validated as its op's record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgebuild.core.geometry import Shape
from edgebuild.interchange.limits import describe
from edgebuild.interchange.onnxfile import Source
from edgebuild.model.graph import INPUT
from edgebuild.ops import OPS

if TYPE_CHECKING:
    import onnx
    from numpy.typing import NDArray


class Rejected(Exception):
    """The node has no edgebuild equivalent; the message says why, for the user."""


# Names of the layers an import makes, by op: conv1, fc1, pool1, ...
KINDS = {"conv1d": "conv", "conv2d": "conv", "conv_transpose2d": "deconv", "linear": "fc",
         "pool1d": "pool", "pool2d": "pool", "batchnorm": "bn", "add": "add",
         "concat": "cat", "flatten": "flat", "reshape": "reshape"}


@dataclass
class Translation:
    """Mutable while the importer walks the nodes, private to one import. `tensors` maps
    an ONNX tensor to the layer holding it (or `input`); `outputs` maps a layer to the
    ONNX tensor that holds its result now (a fused ReLU moves it)."""

    source: Source
    layers: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, NDArray[Any]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    tensors: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # layers by name, and how many of each kind (conv, fc, ...) were named: so that naming
    # and finding a layer cost the same for the 10,000th node as for the first
    by_name: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tensors[self.source.input] = INPUT
        self.outputs[INPUT] = self.source.input

    # --- reading a node ----------------------------------------------------------------

    def constant(self, node: onnx.NodeProto, index: int, what: str) -> NDArray[Any] | None:
        """Input `index` as a constant, None when the node leaves it out."""
        if index >= len(node.input) or not node.input[index]:
            return None
        value = self.source.constants.get(node.input[index])
        if value is None:
            raise Rejected(f"its {what} must be a constant (an initializer), not computed")
        return value

    def required(self, node: onnx.NodeProto, index: int, what: str) -> NDArray[Any]:
        value = self.constant(node, index, what)
        if value is None:
            raise Rejected(f"it has no {what}")
        return value

    def layer_of(self, tensor: str) -> str:
        """The layer (or `input`) holding a computed tensor."""
        if tensor not in self.tensors:
            raise Rejected(f"it reads {tensor!r}, which edgebuild computes from nothing but "
                           "constants; fold it into the weights before exporting")
        return self.tensors[tensor]

    def shape(self, tensor: str) -> Shape:
        """A tensor's per-sample shape (shape inference must know it)."""
        shape = self.source.sample_shape(tensor)
        if shape is None:
            raise Rejected(f"the shape of {tensor!r} is unknown or not batch-first")
        return shape

    # --- making layers -----------------------------------------------------------------

    def add(self, op: str, node: onnx.NodeProto, inputs: Iterable[str],
            **fields: Any) -> dict[str, Any]:
        """A new layer of `op` reading the layers holding the ONNX tensors `inputs`; the
        node's first output is its result."""
        kind = KINDS[op]
        count = self.counts.get(kind, 0) + 1
        name = f"{kind}{count}"
        while name in self.by_name:
            count += 1
            name = f"{kind}{count}"
        self.counts[kind] = count
        layer = {"name": name, "op": op, "inputs": [self.layer_of(t) for t in inputs], **fields}
        self.layers.append(layer)
        self.by_name[name] = layer
        self.notes[name] = [describe(node)]
        self.produce(node.output[0], name)
        return layer

    def produce(self, tensor: str, layer: str) -> None:
        self.tensors[tensor] = layer
        self.outputs[layer] = tensor

    def alias(self, node: onnx.NodeProto) -> None:
        """The node's output is its first input (Identity, Dropout at inference)."""
        layer = self.layer_of(node.input[0])
        self.tensors[node.output[0]] = layer
        if self.outputs.get(layer) == node.input[0]:
            self.outputs[layer] = node.output[0]

    def fusable(self, tensor: str) -> dict[str, Any] | None:
        """The layer whose result `tensor` is, when this node is its only reader (so an
        activation, bias or batchnorm may merge into it); None otherwise."""
        name = self.tensors.get(tensor)
        if name is None or name == INPUT or self.outputs.get(name) != tensor:
            return None
        if self.source.consumers.get(tensor, 0) != 1:
            return None
        return self.by_name[name]

    def merge(self, node: onnx.NodeProto, layer: dict[str, Any]) -> None:
        """The node is now part of `layer` (its output is the layer's)."""
        self.notes[layer["name"]].append(describe(node))
        self.produce(node.output[0], layer["name"])


def computes(layer: dict[str, Any]) -> bool:
    return OPS[layer["op"]].computes


def attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """The node's attributes as Python values (strings decoded)."""
    from onnx import helper

    found = {}
    for attribute in node.attribute:
        value = helper.get_attribute_value(attribute)
        found[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return found
