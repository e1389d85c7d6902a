"""The PyTorch network assembled from manifest layers (float training and fake-quant).

Each op module supplies its parameter module and forward; this file only wires them by
name. Batch-first tensors; per-sample shapes as in the graph (channels first).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn as nn

from edgebuild.core.geometry import Shape
from edgebuild.model import folding
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import Mode

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from edgebuild.manifest import Layer


class Net(nn.Module):
    def __init__(self, input_shape: Shape, layers: tuple[Layer, ...], mode: Mode) -> None:
        super().__init__()
        graph, problems = graphs.build(tuple(input_shape), layers)
        if problems:
            raise ValueError(f"inconsistent layers: {problems[0].message}")
        assert graph is not None  # graphs.build gives a graph whenever it finds no problem
        self.mode = mode
        self.layers = tuple(layers)
        self.layer_specs = {layer.name: layer for layer in layers}
        self.wiring = [(node.name, node.inputs) for node in graph.nodes]
        # what a batchnorm folds into is not clamped in float training (folding.fold_targets)
        self.unclamped = folding.fold_targets(self.layers) if mode.kind == "float" else frozenset()
        modules: dict[str, nn.Module] = {}
        for node in graph.nodes:
            module = OPS[node.op].torch.module(self.layer_specs[node.name], list(node.in_shapes))
            if module is not None:
                modules[node.name] = module
        self.blocks = nn.ModuleDict(modules)

    def forward_all(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        values = {graphs.INPUT: graphs.per_frame(x, self.layers)}
        for name, inputs in self.wiring:
            layer = self.layer_specs[name]
            module = self.blocks[name] if name in self.blocks else None  # noqa: SIM401 (ModuleDict has no .get)
            mode = replace(self.mode, clamp=False) if name in self.unclamped else self.mode
            values[name] = OPS[layer.op].torch.forward(layer, module,
                                                       [values[i] for i in inputs], mode)
        return values

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The last layer's output per sample, flat (N, outputs): class scores whatever the
        layer's shape (a conv1d ending in (classes, 1) included), as the C output is."""
        out = self.forward_all(x)[self.wiring[-1][0]]
        return out.reshape(len(out), -1)


PREFIX = "blocks."


def parameter(net: Net, layer: str, name: str) -> torch.Tensor:
    """One layer's parameter tensor (`weight`, `bias`) by name."""
    return net.blocks[layer].get_parameter(name)


def state_numpy(net: nn.Module) -> dict[str, NDArray[Any]]:
    """Parameters keyed `<layer>.<tensor>` (layers bind to weights by name)."""
    return {k.removeprefix(PREFIX): v.detach().cpu().numpy().copy()
            for k, v in net.state_dict().items()}


def load_numpy(net: nn.Module, state: dict[str, NDArray[Any]]) -> None:
    current = net.state_dict()
    missing = {k.removeprefix(PREFIX) for k in current} - set(state)
    if missing:
        raise ValueError(f"checkpoint lacks {sorted(missing)[:3]}")
    net.load_state_dict({k: torch.as_tensor(state[k.removeprefix(PREFIX)]).to(current[k].dtype)
                         for k in current})
