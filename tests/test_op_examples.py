"""Every op's example model (ops/operator.py: `Operator.example`), on every target device.

The tests that walk the registry build these examples, so an op added to `ops/__init__.py`
is tested by them with no list of op names to extend: here its example builds and uses it,
and `edgebuild check` of it on every device either passes or is a user error (exit 2) that
says why — the reason of the facet the device lacks when it lacks one — never an internal
error. tests/test_ops_shapes.py and tests/test_onnx_export.py build the same examples.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from edgebuild.core.errors import UserError
from edgebuild.manifest import Device, Model
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.extension import Extensions
from edgebuild.ops.operator import Example, Role, Unsupported
from edgebuild.pipeline import validation
from edgebuild.targets.max7800x import operators
from edgebuild.targets.max7800x import profile as devices

DEVICES = [device.value for device in Device]


def example_model(name: str) -> Model:
    return Model.model_validate(OPS[name].example.model())


def refusal(name: str, device: str) -> str | None:
    """Why `device` cannot run op `name`: the reason of the facet it needs and the op
    lacks, or None. A CPU runs every deployed op that has C in edgebuild's own number format
    (the examples'; softmax has it only in TFLite's, formats.numbers); an
    accelerator needs the op's entry in its table (targets/max7800x/operators.py); a folded or dropped op is gone before
    either."""
    if not OPS[name].deployed:
        return None
    for own in (OPS[name].reference, OPS[name].c):  # the examples are in edgebuild's format
        if isinstance(own, Unsupported):
            return own.reason
    if not devices.is_accelerator(device):
        return None
    facet = operators.OPERATORS.for_op(name)
    return facet.reason if isinstance(facet, Unsupported) else None


def write_project(tmp_path: Path, example: Example, device: str) -> Path:
    """A manifest of the example for `device`, with an .npz dataset that fits it (samples
    of the model's input, a class per output)."""
    model = Model.model_validate(example.model())
    graph, problems = graphs.build(model.input, model.layers)
    assert graph is not None, problems
    classes = math.prod(graph.output.out_shape)
    sample = graphs.sample_shape(model.input, model.layers)
    count = 4 * max(classes, 10)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", x=rng.uniform(-1, 1, (count, *sample)).astype(np.float32),
             y=np.arange(count) % classes)
    manifest = {"name": "example", "dataset": {"format": "npz", "path": "data.npz"},
                "model": example.model(), "target": {"device": device}}
    path = tmp_path / "edgebuild.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_an_example_that_uses_it(name: str):
    op = OPS[name]
    assert isinstance(op.example, Example), (
        f"op {name!r} has no example: give its module an EXAMPLE = Example(input, layers) "
        "(a tiny model that uses the op) and pass example=EXAMPLE to its Operator")
    model = example_model(name)
    assert name in [layer.op for layer in model.layers], \
        f"{name}'s example does not use {name}: {op.example.layers}"
    graph, problems = graphs.build(model.input, model.layers)
    assert problems == [] and graph is not None, problems


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(OPS))
def test_check_of_every_example_on_every_device(tmp_path: Path, name: str, device: str):
    """`check` passes where the op runs; where the device lacks a facet the op needs, it is
    a user error (exit 2) that says the facet's reason — never an internal error."""
    path = write_project(tmp_path, OPS[name].example, device)
    reason = refusal(name, device)
    if reason is None:
        try:
            validation.load_all(path)
        except UserError as exc:
            pytest.fail(f"check refuses the example of {name} on {device}, a device that runs "
                        f"{name}: make the example (ops/operator.py: Example) one it runs, or "
                        f"fix the check:\n{exc}")
    else:
        with pytest.raises(UserError) as caught:
            validation.load_all(path)
        assert reason in str(caught.value), str(caught.value)


@pytest.mark.parametrize("device", [d for d in DEVICES if devices.is_accelerator(d)])
def test_an_op_the_accelerator_lacks_is_a_user_error_with_its_reason(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, device: str):
    """The issue's crash: an op the accelerator does not run made `check` on a MAX7800x
    target fail with an internal error; it is a user error with the reason, at the layer."""
    reason = "the accelerator has no passthrough in this test's table, so it is refused"
    table = {name: ext for name, ext in operators.OPERATORS.items() if name != "passthrough"}
    monkeypatch.setattr(operators, "OPERATORS", Extensions("the test's accelerator", table,
                                                           missing=reason))
    path = write_project(tmp_path, OPS["passthrough"].example, device)
    with pytest.raises(UserError) as caught:
        validation.load_all(path)
    message = str(caught.value)
    assert reason in message and "layer 'same'" in message, message
    assert "model.layers[1].op" in message, message


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items()
                                        if op.role in (Role.view, Role.dropped)))
def test_a_model_that_computes_nothing_is_a_user_error(tmp_path: Path, name: str):
    """A model of views and dropouts alone deploys no step (its plan crashed on it)."""
    layer = next(layer for layer in OPS[name].example.layers if layer["op"] == name)
    path = write_project(tmp_path, Example(OPS[name].example.input, (layer,)), "cortex-m4")
    with pytest.raises(UserError, match="the model computes nothing") as caught:
        validation.load_all(path)
    assert "model.layers" in str(caught.value)
