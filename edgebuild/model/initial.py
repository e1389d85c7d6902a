"""Float weights named by `train.init` (e.g. written by `edgebuild import-onnx`): the
checkpoint float training starts from, or with `train.epochs: 0` the float model itself.

File format: the `train` stage's float.npz — `<layer>.<tensor>` with the torch module's
tensor names (`weight`, `bias`; a batchnorm's `running_mean`, `running_var`,
`num_batches_tracked` too). Checked here as far as the operator records say without
torch, so `check` catches a wrong file before any stage runs: it reads, every compute
layer's weight has the shape its op stores (the `weights` facet) and its bias `out` values
exactly when the layer has one, and no tensor names a layer the model lacks. Loading it
into the network (the train stage) checks the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from edgebuild.model.imported import expected_shape
from edgebuild.ops import OPS
from edgebuild.ops.operator import ComputeLayer

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer
    from edgebuild.model.graph import Graph


def check(path: Path, layers: tuple[Layer, ...], graph: Graph) -> list[str]:
    """Every problem of the weights file, as messages about `train.init`."""
    from edgebuild.core import arrays

    try:
        state = arrays.load(path)
    except (OSError, ValueError) as exc:  # PickledData: its reason, never numpy's
        reason = exc.reason if isinstance(exc, arrays.PickledData) else exc
        return [f"cannot read float weights {path}: {reason}"]
    nodes = {node.name: node for node in graph.nodes}
    problems = [message for layer in layers if OPS[layer.op].computes
                for message in _layer(path, cast(ComputeLayer, layer),
                                      expected_shape(layer, nodes[layer.name].in_shapes[0]),
                                      state)]
    extra = sorted({key.rsplit(".", 1)[0] for key in state} - {layer.name for layer in layers})
    if extra:
        problems.append(f"{path.name} has weights for {', '.join(extra)}, which the model "
                        "does not have (layers bind by name)")
    return problems


def _layer(path: Path, layer: ComputeLayer, shape: tuple[int, ...],
           state: dict[str, NDArray[Any]]) -> list[str]:
    """A compute layer's weight shape and bias (a layer's own record: ComputeLayer)."""
    name, found = layer.name, []
    weight, bias = state.get(f"{name}.weight"), state.get(f"{name}.bias")
    if weight is None:
        found.append(f"{path.name} has no {name}.weight for layer {name!r}")
    elif tuple(weight.shape) != shape:
        found.append(f"layer {name!r}: {name}.weight has shape {list(weight.shape)}, the "
                     f"model needs {list(shape)}")
    if layer.bias and bias is None:
        found.append(f"layer {name!r} has `bias: true` but {path.name} has no {name}.bias; "
                     "set `bias: false`")
    elif not layer.bias and bias is not None:
        found.append(f"layer {name!r}: {path.name} has a bias but the layer says `bias: false`")
    elif bias is not None and tuple(bias.shape) != (layer.out,):
        found.append(f"layer {name!r}: {name}.bias has shape {list(bias.shape)}, needs "
                     f"[{layer.out}]")
    return found
