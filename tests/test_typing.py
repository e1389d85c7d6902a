"""Static types: mypy on the whole edgebuild package (settings: [tool.mypy] in
pyproject.toml), and the spelled-out unions mypy reads in place of registry-built ones."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType

import pytest

import edgebuild.data
import edgebuild.manifest

ROOT = Path(__file__).resolve().parents[1]

# What mypy checks, as paths below the repository root: the whole package, every function
# annotated (disallow_untyped_defs).
CLEAN = ["edgebuild"]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (it comes with the test extra: "
                           "pip install '.[test]')")
def test_package_passes_mypy():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml", *CLEAN],
        cwd=ROOT, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"


def _type_checking_view(module: ModuleType) -> dict[str, object]:
    """The module's names as mypy sees them: its `if TYPE_CHECKING:` blocks executed."""
    namespace = dict(vars(module))
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            code = compile(ast.Module(body=node.body, type_ignores=[]), str(module.__file__),
                           "exec")
            exec(code, namespace)
    return namespace


def _members(annotated: object) -> tuple[object, ...]:
    """`Annotated[A | B | ..., Field(...)]` -> (A, B, ...), in order."""
    return typing.get_args(typing.get_args(annotated)[0])


def test_spelled_out_dataset_spec_lists_every_format():
    static = _type_checking_view(edgebuild.data)["DatasetSpec"]
    assert _members(static) == _members(edgebuild.data.DatasetSpec)
    assert _members(static) == tuple(module.Spec for module in edgebuild.data.FORMATS.values())


def _spelled(record: type) -> str:
    """How ops/__init__.py spells a layer record: `conv2d.Conv2d`."""
    return f"{record.__module__.removeprefix('edgebuild.ops.')}.{record.__qualname__}"


def test_spelled_out_layer_lists_every_operator():
    """mypy cannot evaluate the `Layer` union built from the registry, and without it
    (every layer a LayerBase) it finds ~70 errors: `layer.op` and the fields `isinstance`
    narrows to. So ops/__init__.py spells the union out for mypy; it must list the
    registry's records, in the registry's order."""
    import edgebuild.ops

    static = _members(_type_checking_view(edgebuild.ops)["Layer"])
    registered = tuple(op.params for op in edgebuild.ops.OPS.values())
    missing = [_spelled(r) for r in registered if r not in static]
    extra = [_spelled(r) for r in static if r not in registered]
    where = "the `if TYPE_CHECKING:` Layer union in edgebuild/ops/__init__.py"
    assert not missing, f"add {' | '.join(missing)} to {where}"
    assert not extra, f"remove {' | '.join(extra)} from {where} (no registered op has it)"
    assert static == registered, (
        f"list the records in {where} in the registry's order (OPS): "
        f"{' | '.join(_spelled(r) for r in registered)}")
    assert static == _members(edgebuild.ops.Layer)
    assert edgebuild.manifest.Layer is edgebuild.ops.Layer  # the manifest's layers are these


def test_compute_layer_protocol_fields_are_on_every_compute_op():
    from edgebuild.ops import OPS
    from edgebuild.ops.operator import ComputeLayer

    fields = {name for name in vars(ComputeLayer) if not name.startswith("_")}
    assert fields == {"name", "out", "bias", "act", "wide"}
    for op in OPS.values():
        if op.computes:
            assert fields <= set(op.params.model_fields), f"{op.name} lacks a ComputeLayer field"


def test_static_device_members_exist_at_run_time():
    static = _type_checking_view(edgebuild.manifest)["Device"]
    assert isinstance(static, type)
    known = {member.name: member.value for member in edgebuild.manifest.Device}
    assert {member.name: member.value for member in static}.items() <= known.items()
