"""The package structure (docs/internals/architecture.md) holds: packages by concern
with a docstring saying what each owns and may import, dependencies that point one way,
no import cycle, no oversized module, no function over ruff's complexity limit.

The allowed dependencies are written here once, lowest package first; each package's
`__init__` docstring says the same in words.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgebuild.build import sources

PACKAGE = Path(__file__).resolve().parent.parent / "edgebuild"

# package -> the packages it may import (besides itself). Lowest first.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "ops": {"core"},
    # number formats as plugins of the operator records (formats.numbers)
    "formats": {"core", "ops"},
    "data": {"core"},
    "manifest": {"core", "ops", "data"},
    "model": {"core", "ops", "formats", "data", "manifest"},
    "interchange": {"core", "ops", "data", "manifest", "model"},
    # TFLite's models and number format (issue 31): the reader's bounds are interchange's.
    "tflite": {"core", "ops", "formats", "data", "manifest", "model", "interchange"},
    "train": {"core", "ops", "data", "manifest", "model"},
    "memory": {"core", "ops", "formats", "manifest", "model"},
    "codegen": {"core", "ops", "formats", "manifest", "model", "memory"},
    "targets": {"core", "ops", "data", "manifest", "model", "memory", "codegen"},
    "ondevice": {"core", "ops", "data", "manifest", "model", "train", "memory", "codegen"},
    # The build engine: domain-free, it learns the stages by registration
    # (edgebuild/build/registry.py).
    "build": {"core"},
    "report": {"core", "ops", "data", "manifest", "model", "train", "memory", "codegen",
               "targets", "ondevice"},
    "pipeline": {"core", "ops", "formats", "data", "manifest", "model", "interchange", "tflite",
                 "train",
                 "memory", "codegen", "targets", "ondevice", "build", "report"},
    "cli": {"core", "ops", "formats", "data", "manifest", "model", "interchange", "tflite",
            "train",
            "memory", "codegen", "targets", "ondevice", "build", "report", "pipeline"},
}
MAX_MODULE_LINES = 600


def modules() -> dict[str, Path]:
    """Module name -> file, as the cache keys see them (edgebuild/build/sources.py)."""
    return sources.modules(PACKAGE)


def imports(path: Path, name: str) -> list[tuple[int, str]]:
    """(line, imported edgebuild module) of every import in the file, function-local and
    TYPE_CHECKING ones included (a cycle through either is still a cycle to read)."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("edgebuild")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.startswith("edgebuild"):
                found.append((node.lineno, module))
                found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def resolve(target: str, known: dict[str, Path]) -> str | None:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        for _, target in imports(path, name):
            module = resolve(target, known)
            if module and module != name and not name.startswith(module + ".") \
                    and not module.startswith(name + "."):
                edges[name].add(module)
    return edges


def package_of(module: str) -> str | None:
    """The package a module belongs to; None for the top level (`edgebuild/__init__.py`
    and `__main__.py`, the entry point)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_every_package_is_in_the_layering_and_says_what_it_owns():
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert set(packages) == set(ALLOWED), "a package is missing from ALLOWED (or gone)"
    for package in packages:
        doc = ast.get_docstring(ast.parse((PACKAGE / package / "__init__.py").read_text()))
        assert doc, f"edgebuild/{package}/__init__.py has no docstring"
        assert "import" in doc.lower(), f"edgebuild.{package}'s docstring does not say what it may import"


def test_dependencies_point_one_way():
    known = modules()
    wrong = []
    for name, path in known.items():
        source = package_of(name)
        if source is None:
            continue
        for line, target in imports(path, name):
            module = resolve(target, known)
            target_package = package_of(module) if module else None
            if target_package and target_package != source and \
                    target_package not in ALLOWED[source]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {source} imports "
                             f"{module} ({target_package})")
    assert not wrong, "\n".join(wrong)


def test_the_engine_imports_only_core():
    """The fence: `edgebuild.build` names no module outside `core` and itself, not even
    function-local or under TYPE_CHECKING (`imports` reads them all); it learns the stages
    by registration (edgebuild/build/registry.py)."""
    known = modules()
    outside = [f"{name}:{line}: {target}"
               for name, path in known.items() if name.startswith("edgebuild.build")
               for line, target in imports(path, name)
               if not target.startswith(("edgebuild.core", "edgebuild.build"))]
    assert not outside, "\n".join(outside)


def test_the_engine_loads_without_the_stages():
    """Importing every engine module loads nothing outside `core` and `build`; the first
    read of the stage registry loads the stage package named by `registry.PROVIDER`."""
    engine = sorted(name for name in modules() if name.startswith("edgebuild.build"))
    code = (f"import sys\nfor m in {engine!r}: __import__(m)\n"
            "before = sorted(m for m in sys.modules if m.startswith('edgebuild.')\n"
            "                and not m.startswith(('edgebuild.core', 'edgebuild.build')))\n"
            "from edgebuild.build import registry\n"
            "print(before, 'validate' in registry.STAGES, registry.PROVIDER in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["[]", "True", "True"], result.stdout + result.stderr


def reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other (strongly connected, more than one)."""
    reach = {module: reachable(edges, module) for module in edges}
    groups = {tuple(sorted({m} | {o for o in reach[m] if m in reach[o]})) for m in edges}
    return sorted(list(group) for group in groups if len(group) > 1)


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_is_oversized():
    sizes = {name: len(path.read_text().splitlines()) for name, path in modules().items()}
    large = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not large, f"modules over {MAX_MODULE_LINES} lines: {large}"


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_is_clean_including_complexity():
    """pyproject.toml selects C901 (max-complexity 10) with the other rules."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "edgebuild", "tests",
                             "benchmarks"], cwd=PACKAGE.parent, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# Words of one target's or training's vocabulary that the lowest layer must not use as a
# name: what a target knows per op is in the target's own table (ops.extension.Extensions).
TARGET_WORDS = ("accelerator", "ai8x", "max7800", "hwlayer", "trainkernel", "traingeometry")


def test_ops_hold_no_target_vocabulary():
    """No class, function, field, argument or attribute in `ops` is named after a target:
    the MAX7800x accelerator's per-op records are targets/max7800x/operators.py's, on-device
    training's are ondevice/operators.py's."""
    found = []
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = _name(node)
            if name and any(word in name.lower() for word in TARGET_WORDS):
                found.append(f"{path.name}:{getattr(node, 'lineno', '?')}: {name}")
    assert not found, "\n".join(found)


def _name(node: ast.AST) -> str | None:
    """The name a node gives or uses (a definition, a variable, an attribute, an argument)."""
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return node.name
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.keyword | ast.arg):
        return node.arg
    return None
