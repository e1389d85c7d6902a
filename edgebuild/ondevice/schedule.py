"""The steps one on-device training step runs, in order (`backward.json` of the `ondevice`
stage, schema schemas/artifacts/backward.v1.schema.json): the frozen int8 prefix, the
boundary tensors it hands to the float part, the trainable tensors (the weight-only file
layout), the forward and backward steps the generated C executes and the gradient
buffers zeroed once per step. ondevice.backward computes it from a TrainGraph.

Tensor names: a layer's output, `<layer>.pre` (before its activation), `<layer>.pooled`
(fused input pooling); `d:<tensor>` is the gradient of a tensor or parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core import boundedjson

# The keys a step may have, in the order a step writes them (the file is not key-sorted).
STEP_KEYS = ("op", "layer", "tensor", "inputs", "input", "reads", "output")


@dataclass(frozen=True)
class TrainStep:
    """One forward or backward step: `op` (an operator, an activation, `dequantize`,
    `pool`, `loss_grad`, `<op>_grad`, `weight_grad`, `bias_grad`, `input_grad`,
    `pool_grad`) and what it touches; fields a step does not use are None and not written."""

    op: str
    output: str | None = None
    layer: str | None = None
    tensor: str | None = None  # dequantize: the boundary tensor
    inputs: tuple[str, ...] | None = None  # a forward operator's inputs
    input: int | None = None  # `<op>_grad`: which of the layer's inputs
    reads: tuple[str, ...] | None = None  # weight_grad / bias_grad: the tensors read

    def to_json(self) -> dict[str, Any]:
        values = {"op": self.op, "layer": self.layer, "tensor": self.tensor,
                  "inputs": None if self.inputs is None else list(self.inputs),
                  "input": self.input, "reads": None if self.reads is None else list(self.reads),
                  "output": self.output}
        return {key: values[key] for key in STEP_KEYS if values[key] is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainStep:
        def tupled(key: str) -> tuple[Any, ...] | None:
            return None if key not in data else tuple(data[key])

        return cls(data["op"], data.get("output"), data.get("layer"), data.get("tensor"),
                   tupled("inputs"), data.get("input"), tupled("reads"))


@dataclass(frozen=True)
class Schedule:
    frozen: tuple[str, ...]  # deployed layers of the int8 prefix, in order
    frozen_steps: int
    boundary: tuple[tuple[str, int], ...]  # (tensor, elements per sample) int8 -> float
    output: str
    trainable: dict[str, str]  # layer -> scope ("all" / "bias")
    parameters: tuple[tuple[str, tuple[int, ...]], ...]  # weight-only file order
    forward: tuple[TrainStep, ...]
    backward: tuple[TrainStep, ...]
    zero_once_per_step: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"frozen": list(self.frozen), "frozen_steps": self.frozen_steps,
                "boundary": [list(b) for b in self.boundary], "output": self.output,
                "trainable": dict(self.trainable),
                "parameters": [[name, list(shape)] for name, shape in self.parameters],
                "forward": [step.to_json() for step in self.forward],
                "backward": [step.to_json() for step in self.backward],
                "zero_once_per_step": list(self.zero_once_per_step)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        return cls(tuple(data["frozen"]), data["frozen_steps"],
                   tuple((name, size) for name, size in data["boundary"]), data["output"],
                   dict(data["trainable"]),
                   tuple((name, tuple(shape)) for name, shape in data["parameters"]),
                   tuple(TrainStep.from_json(s) for s in data["forward"]),
                   tuple(TrainStep.from_json(s) for s in data["backward"]),
                   tuple(data["zero_once_per_step"]))

    @classmethod
    def load(cls, directory: Path) -> Schedule:
        """What the `ondevice` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "backward.json"))
