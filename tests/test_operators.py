"""The operator registry is complete: every op has every facet, or declares it unsupported
with a reason a user can act on — and that reason is what `edgebuild check` says.

Facets (edgebuild/ops/operator.py): shape (out_shape, param_count, macs), role, torch,
reference, weights, c, windows, onnx. What one target (or on-device training) knows per op
is not a facet: it is in that target's own table (tests/test_extensions.py).
"""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from edgebuild.formats import numbers
from edgebuild.ops import OPS
from edgebuild.ops.operator import Role, Unsupported

# facet -> the roles for which it may be Unsupported (a folded or dropped op never runs
# after training, so its deployment facets are unsupported by construction).
DEPLOYED_FACETS = ("reference", "c")
OPTIONAL = {"stream"}  # None means the op has no such behaviour (no state across inferences)


def facets(op) -> dict[str, object]:
    return {f.name: getattr(op, f.name) for f in dataclasses.fields(op)
            if f.name not in ("name", "params", "arity", "role")}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_facet_is_implemented_or_declared_unsupported(name):
    op = OPS[name]
    assert op.name == name and op.params.model_fields["op"].annotation.__args__ == (name,)
    for facet, value in facets(op).items():
        if facet in OPTIONAL:
            continue
        assert value is not None, f"{name}.{facet} is missing"
        if isinstance(value, Unsupported):
            reason = value.reason
            assert len(reason) >= 30 and not reason.endswith("."), \
                f"{name}.{facet}: give the whole reason, one sentence without a final period"
        elif not isinstance(value, bool):
            assert callable(value) or dataclasses.is_dataclass(value), f"{name}.{facet}: {value!r}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_weights_exactly_on_compute_ops(name):
    op = OPS[name]
    assert isinstance(op.weights, Unsupported) == (op.role is not Role.compute)


@pytest.mark.parametrize("name", sorted(OPS))
def test_ops_gone_before_deployment_have_no_deployment_facets(name):
    op = OPS[name]
    if op.role in (Role.folded, Role.dropped):
        for facet in ("c",):
            assert isinstance(getattr(op, facet), Unsupported), f"{name}.{facet}"
    else:  # in edgebuild's own number format or another (formats.numbers: softmax is TFLite's)
        assert any(not isinstance(numbers.c(name, fmt), Unsupported) for fmt in numbers.NAMES), \
            f"deployed op {name} has no C in any number format"
        assert any(not isinstance(numbers.reference(name, fmt), Unsupported)
                   for fmt in numbers.NAMES), f"deployed op {name} has no reference"


def test_no_facet_is_silently_missing_from_the_record():
    """A new facet must be added to this test's view of the record too."""
    names = {f.name for f in dataclasses.fields(next(iter(OPS.values())))}
    assert {*DEPLOYED_FACETS, "torch", "weights", "windows", "out_shape", "param_count",
            "macs", "stream", "l2_traffic", "onnx"} <= names


UNTRAINABLE = textwrap.dedent("""\
    name: t
    dataset: {format: sklearn-digits}
    model:
      input: [1, 8, 8]
      layers:
        - {name: up, op: conv_transpose2d, out: 4}
        - {name: fc, op: linear, out: 10, flatten: true}
    ondevice: {trainable: [up, fc]}
    """)


def test_check_tells_the_unsupported_reason(tmp_path):
    """A transposed convolution in the trainable part: `check` says the op's own reason."""
    from edgebuild.core.errors import UserError
    from edgebuild.pipeline import validation

    path = tmp_path / "edgebuild.yaml"
    path.write_text(UNTRAINABLE)
    with pytest.raises(UserError) as caught:
        validation.load(path)
    from edgebuild.ondevice.operators import OPERATORS

    reason = OPERATORS.for_op("conv_transpose2d").reason  # type: ignore[union-attr]
    assert reason in str(caught.value)
    assert "ondevice.trainable" in str(caught.value)
