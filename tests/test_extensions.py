"""Per-op extensions (edgebuild/ops/extension.py): a target keeps what it knows about each op
in its own table, op name -> its record; the MAX7800x accelerator's is
targets/max7800x/operators.py. An op the table leaves out does not run there, and
`edgebuild check` says so as a user error naming the layer and the op.
"""

from __future__ import annotations

import textwrap

import pytest

from edgebuild.core.errors import EXIT_USER_ERROR
from edgebuild.ops import OPS
from edgebuild.ops.extension import Extensions
from edgebuild.ops.operator import Role, Unsupported
from edgebuild.targets.max7800x import operators
from edgebuild.targets.max7800x.operators import OPERATORS, HardwareOp


def test_a_table_keyed_by_no_op_is_refused():
    with pytest.raises(ValueError, match="conv3d is no op"):
        Extensions("a target", {"conv2d": 1, "conv3d": 2})


def test_for_op_gives_the_extension_or_a_whole_reason():
    table = Extensions("the test target", {"conv2d": 1}, missing="it has no kernel for it here")
    assert table.for_op("conv2d") == 1 and table.get("conv2d") == 1 and "conv2d" in table
    assert table.for_op("linear") == Unsupported("it has no kernel for it here")
    assert table.get("linear") is None and "linear" not in table
    for name, op in OPS.items():  # folded and dropped ops say why they never run anywhere
        found = table.for_op(name)
        if op.role in (Role.folded, Role.dropped):
            assert isinstance(found, Unsupported) and "never runs" in found.reason
    default = Extensions("the test target", {}).for_op("add")
    assert isinstance(default, Unsupported) and "the test target" in default.reason


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_a_hardware_operation_or_a_reason(name):
    """An op runs on the MAX7800x through its table entry, or `check` refuses it there with
    a reason a user can act on (an op added without an entry: the table's own reason);
    ops gone before deployment never have an entry."""
    found = OPERATORS.for_op(name)
    if not OPS[name].deployed:
        assert isinstance(found, Unsupported)
    if isinstance(found, Unsupported):
        assert len(found.reason) >= 30 and not found.reason.endswith("."), name
    else:
        assert isinstance(found, HardwareOp), name


def test_ops_sharing_a_hardware_operation_share_its_record():
    """Code that sees only a hardware layer (its `op` is the operation) finds its op's
    record through `of_operation`: one record per operation."""
    by_operation: dict[str, HardwareOp] = {}
    for name, ext in OPERATORS.items():
        assert by_operation.setdefault(ext.operation, ext) == ext, name
        assert operators.of_operation(ext.operation) == ext
    assert operators.of_operation("no such operation") is None


def test_kernels_and_the_vendor_operators():
    """The program's operator names, and the operations that hold kernels (the layers with
    a convolution operator)."""
    assert {n: e.operator for n, e in OPERATORS.items() if e.holds_kernels} == {
        "conv1d": "conv1d", "conv2d": "conv2d", "conv_transpose2d": "convtranspose2d",
        "linear": "linear"}
    assert {n for n in OPERATORS if OPS[n].computes} == {
        n for n, e in OPERATORS.items() if e.holds_kernels}
    assert operators.runnable_operations() == [
        "conv1d", "conv2d", "conv_transpose2d", "linear", "pool", "passthrough", "add",
        "concat", "buffer"]
    assert operators.runnable("pool") and not operators.runnable("flatten")


MANIFEST = textwrap.dedent("""\
    name: t
    model:
      input: [1, 8, 8]
      layers:
        - {name: c1, op: conv2d, out: 4}
        - {name: gp, op: global_pool, mode: avg}
        - {name: fc, op: linear, out: 10, flatten: true}
    target: {device: max78000}
    """)


def test_check_refuses_an_op_the_device_has_no_operation_for(tmp_path, monkeypatch, capsys):
    """An op missing from the target's table is the user's problem, not a crash: `check`
    exits 2 naming the layer, the op and the reason."""
    from edgebuild.cli import main

    (tmp_path / "edgebuild.yaml").write_text(MANIFEST)
    monkeypatch.chdir(tmp_path)
    without = {name: ext for name, ext in OPERATORS.items() if name != "global_pool"}
    monkeypatch.setattr(operators, "OPERATORS", Extensions(OPERATORS.where, without))
    assert main(["check"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "model.layers.1.op" in err or "layers[1]" in err or "layers.1" in err, err
    assert "layer 'gp': op 'global_pool' cannot run on max78000" in err
    assert "the MAX7800x accelerator has no implementation of it" in err
    assert "Traceback" not in err
