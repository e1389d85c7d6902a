"""The definitions a stage's code reaches: a cache key as narrow as the code that runs.

A module-level key (every module a stage imports, whole) made every `train` key cover
every operator's C and ONNX emitters: the registry imports every op module, and an op
module holds all its facets. Here the unit is the top-level statement. Starting from the
stage module, a statement is reached when a reached statement names what it defines —
through the module's own names or an import (`from m import f`: f's statement in m;
`import m` then `m.f`: the same; a module used bare, not as `m.f`: all of it). A module's
statements that define nothing (calls run at import) come with it; the module's docstring,
comments between top-level statements and function annotations (never evaluated: `from
__future__ import annotations`) do not count. A reached statement counts as its source
text: a comment inside a reached function moves the key (the price of hashing text, which
is the same under every Python version, rather than a syntax tree, which is not). The stage's `Cut` leaves out the arguments of one call (an operator record's facets
the stage never reads: build.stage.Stage.facets): the names only they use are not
followed and their text is not in the key.

What is reached is hashed as source text, per module: editing code a stage does not run
does not move its key; editing code it runs does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ALL = "*"  # a demand for every statement of a module
Argument = ast.expr | ast.keyword | ast.AnnAssign  # a call's argument, or a field's line


@dataclass(frozen=True)
class Cut:
    """The arguments of every call to `callee` (a class whose annotated fields are its
    parameters) that a stage's code leaves out: all but the fields in `keep`, by keyword
    or by position. `keep` None: nothing is cut."""

    callee: str
    keep: frozenset[str] | None

    def drops(self, field_name: str | None) -> bool:
        return self.keep is not None and field_name is not None and field_name not in self.keep


NO_CUT = Cut("", None)


@dataclass(frozen=True)
class Binding:
    """What an import binds a local name to: a module, or one name defined in a module."""

    module: str
    name: str | None = None


@dataclass
class Module:
    """One parsed source file: its top-level statements (an `if TYPE_CHECKING:` block's
    `else` in place of the block) and which statements bind each name."""

    name: str
    source: bytes
    statements: list[ast.stmt]
    package: bool = False  # an __init__.py: its relative imports start at itself
    defines: dict[str, list[int]] = field(default_factory=dict)
    imports: dict[str, Binding] = field(default_factory=dict)
    lines: list[int] = field(default_factory=list)  # byte offset of each line's start
    analyses: dict[int, Analysis] = field(default_factory=dict)  # by statement, once


def parse(name: str, path: Path, known: Iterable[str]) -> Module:
    source = path.read_bytes()
    tree = ast.parse(source)
    package = path.name == "__init__.py"
    module = Module(name, source, list(_top_level(tree.body)), package)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    module.lines = starts
    known = set(known)
    for index, statement in enumerate(module.statements):
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            module.imports.update(bindings(statement, name, package, known))
            continue
        for bound in _bound(statement):
            module.defines.setdefault(bound, []).append(index)
    return module


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for statement in body:
        if isinstance(statement, ast.If) and _type_checking(statement.test):
            yield from _top_level(statement.orelse)
        else:
            yield statement


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def bindings(statement: ast.Import | ast.ImportFrom, name: str, package: bool,
             known: set[str]) -> dict[str, Binding]:
    """The local names an import statement binds to edgebuild code (others: not ours)."""
    found = {}
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            if alias.asname:
                if alias.name in known:
                    found[alias.asname] = Binding(alias.name)
            else:
                top = alias.name.partition(".")[0]
                if top in known:
                    found[top] = Binding(top)
        return found
    base = absolute(statement, name, package)
    for alias in statement.names:
        local = alias.asname or alias.name
        if f"{base}.{alias.name}" in known:
            found[local] = Binding(f"{base}.{alias.name}")
        elif base in known:
            found[local] = Binding(base, ALL if alias.name == "*" else alias.name)
    return found


def absolute(node: ast.ImportFrom, name: str, package: bool) -> str:
    """The module a `from ... import` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = name.split(".") if package else name.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _bound(statement: ast.stmt) -> set[str]:
    """Names a top-level statement binds (a compound one: anywhere in its blocks, not
    inside the functions and classes it defines)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    found: set[str] = set()
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update((a.asname or a.name).partition(".")[0] for a in node.names)
        pending += list(ast.iter_child_nodes(node))
    return found


@dataclass
class Uses:
    """What code names: dotted chains (`m.f.x` -> ("m", "f", "x")) and the imports inside
    it (function-local); `nodes`: the code itself, for the arguments a cut may leave out."""

    chains: set[tuple[str, ...]] = field(default_factory=set)
    imports: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    nodes: list[Argument] = field(default_factory=list)


@dataclass
class Analysis:
    """One statement's uses: outside any call to the callee (`base`), and per field of the
    callee, inside the arguments given for it."""

    base: Uses
    facets: dict[str, Uses]

    def under(self, cut: Cut) -> tuple[Uses, list[Argument]]:
        """The uses a stage's code keeps and the arguments it leaves out."""
        kept = Uses(set(self.base.chains), list(self.base.imports))
        dropped: list[Argument] = []
        for name, found in self.facets.items():
            if cut.drops(name):
                dropped += found.nodes
            else:
                kept.chains |= found.chains
                kept.imports += found.imports
        return kept, dropped


class _Visitor:
    def __init__(self, callee: str, fields: tuple[str, ...]) -> None:
        self.callee = callee
        self.fields = fields
        self.analysis = Analysis(Uses(), {})
        self.uses = self.analysis.base

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(node)
        elif isinstance(node, ast.Attribute) and (chain := _chain(node)):
            self.uses.chains.add(chain)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):  # a name bound here is no use of another
                self.uses.chains.add((node.id,))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.uses.imports.append(node)
        elif isinstance(node, ast.Call) and self.fields and _callee(node.func) == self.callee:
            self._call(node)
        elif isinstance(node, ast.ClassDef) and self.fields and node.name == self.callee:
            self._record(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return  # a docstring
        else:
            for child in ast.iter_child_nodes(node):
                self.visit(child)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """Decorators, defaults and body: the annotations are never evaluated."""
        for part in [*node.decorator_list, *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None), *node.body]:
            self.visit(part)

    def _record(self, node: ast.ClassDef) -> None:
        """The callee's class: a field's default belongs to the field, as its argument."""
        for part in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(part)
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                    and statement.target.id in self.fields and statement.value is not None:
                # the annotation goes with it: a dataclass never evaluates it
                self._argument(statement.target.id, statement, statement)
            else:
                self.visit(statement)

    def _argument(self, name: str, value: ast.AST, whole: Argument) -> None:
        outer = self.uses
        self.uses = self.analysis.facets.setdefault(name, Uses())
        self.uses.nodes.append(whole)
        self.visit(value)
        self.uses = outer

    def _call(self, node: ast.Call) -> None:
        self.visit(node.func)
        given: list[tuple[str | None, ast.expr, Argument]] = [
            (self.fields[i] if i < len(self.fields) else None, argument, argument)
            for i, argument in enumerate(node.args)]
        given += [(keyword.arg, keyword.value, keyword) for keyword in node.keywords]
        for name, value, whole in given:
            if name is None:
                self.visit(value)
            else:
                self._argument(name, value, whole)


def _chain(node: ast.expr) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    return None


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def analyse(statement: ast.stmt, callee: str, fields: tuple[str, ...]) -> Analysis:
    visitor = _Visitor(callee, fields)
    visitor.visit(statement)
    return visitor.analysis


def fields_of(modules: dict[str, Module], callee: str) -> tuple[str, ...]:
    """The annotated fields of the class named `callee`, in order: its parameters."""
    for module in modules.values():
        for statement in module.statements:
            if isinstance(statement, ast.ClassDef) and statement.name == callee:
                return tuple(s.target.id for s in statement.body
                             if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    return ()


@dataclass
class Reached:
    """Per module, the statements reached and the spans cut from their text."""

    statements: dict[str, set[int]] = field(default_factory=dict)
    cut: dict[str, list[Argument]] = field(default_factory=dict)

    def text(self, module: Module) -> bytes:
        """The reached statements' source, in file order, cut arguments blanked."""
        spans = sorted((self._offset(module, n.lineno, n.col_offset),
                        self._offset(module, n.end_lineno or n.lineno, n.end_col_offset or 0))
                       for n in self.cut.get(module.name, []))
        parts = []
        for index in sorted(self.statements[module.name]):
            node = module.statements[index]
            start = self._offset(module, node.lineno, node.col_offset)
            end = self._offset(module, node.end_lineno or node.lineno, node.end_col_offset or 0)
            parts.append(_blank(module.source, start, end,
                                [s for s in spans if start <= s[0] and s[1] <= end]))
        return b"\0".join(parts)

    @staticmethod
    def _offset(module: Module, line: int, column: int) -> int:
        return module.lines[line - 1] + column


def _blank(source: bytes, start: int, end: int, spans: list[tuple[int, int]]) -> bytes:
    out, at = [], start
    for span_start, span_end in spans:
        if span_start >= at:
            out += [source[at:span_start], b"\1"]
            at = span_end
    out.append(source[at:end])
    return b"".join(out)


def reach(modules: dict[str, Module], start: str, cut: Cut,
          excluded: frozenset[str] = frozenset()) -> Reached:
    """Everything the module `start` runs (all of it), following demands through imports;
    modules in `excluded` are not followed (their inputs are keyed by value)."""
    fields = fields_of(modules, cut.callee)
    reached = Reached()
    demanded: set[tuple[str, str]] = set()
    pending = [(start, ALL)]
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in demanded or name in excluded or name not in modules:
            continue
        demanded.add((name, wanted))
        module = modules[name]
        first = name not in reached.statements
        indices = reached.statements.setdefault(name, set())
        new = _wanted(module, wanted, first) - indices
        if wanted != ALL and wanted in module.imports:
            pending.append(_target(module.imports[wanted], ()))
        indices |= new
        for index in new:
            if index not in module.analyses:
                module.analyses[index] = analyse(module.statements[index], cut.callee, fields)
            found, dropped = module.analyses[index].under(cut)
            reached.cut.setdefault(name, []).extend(dropped)
            pending += _demands(module, found, modules)
    return reached


def _wanted(module: Module, wanted: str, first: bool) -> set[int]:
    if wanted == ALL:
        return {i for i, s in enumerate(module.statements)
                if not isinstance(s, (ast.Import, ast.ImportFrom)) and not _docstring(s)}
    found = set(module.defines.get(wanted, ()))
    if first:  # what runs at import: statements that define nothing
        found |= {i for i, s in enumerate(module.statements)
                  if not isinstance(s, (ast.Import, ast.ImportFrom)) and not _docstring(s)
                  and not _bound(s)}
    return found


def _docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _demands(module: Module, found: Uses, modules: dict[str, Module]) -> list[tuple[str, str]]:
    local: dict[str, Binding] = {}
    for statement in found.imports:
        local.update(bindings(statement, module.name, module.package, set(modules)))
    demands = []
    for chain in found.chains:
        binding = local.get(chain[0]) or module.imports.get(chain[0])
        if binding is not None:
            demands.append(_target(binding, chain[1:], modules))
        elif chain[0] in module.defines:
            demands.append((module.name, chain[0]))
    return demands


def _target(binding: Binding, attributes: tuple[str, ...],
            modules: dict[str, Module] | None = None) -> tuple[str, str]:
    """The (module, name) an imported name and the attributes read from it demand."""
    if binding.name is not None:
        return binding.module, binding.name
    name = binding.module
    rest = list(attributes)
    while rest and modules is not None and f"{name}.{rest[0]}" in modules:
        name = f"{name}.{rest.pop(0)}"
    return name, rest[0] if rest else ALL
