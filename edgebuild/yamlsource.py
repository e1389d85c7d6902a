"""YAML documents that remember where every value came from.

PyYAML's plain `safe_load` forgets line numbers, silently keeps the last of two duplicate
keys and expands aliases without limit (a "billion laughs" file exhausts memory). We
compose the node tree instead (linear in the file size, aliases are shared nodes), then
construct plain Python data ourselves while recording the position of every key and value
and counting expanded nodes against a budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from edgebuild.errors import Diagnostic, UserError

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_EXPANDED_NODES = 200_000

Loc = tuple[Any, ...]


@dataclass(frozen=True)
class Document:
    """Parsed data plus `loc -> (line, col)` for every mapping key and value (1-based)."""

    path: str
    data: Any
    positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)

    def locate(self, loc: Loc) -> tuple[int, int] | tuple[None, None]:
        """Position of the longest prefix of `loc` that exists in the file."""
        loc = tuple(loc)
        while loc:
            if loc in self.positions:
                return self.positions[loc]
            loc = loc[:-1]
        return self.positions.get((), (None, None))

    def diagnostic(self, loc: Loc, message: str) -> Diagnostic:
        line, col = self.locate(loc)
        return Diagnostic(self.path, message, line, col, dotted(loc))


def dotted(loc: Loc) -> str:
    """`('model', 'layers', 2, 'out')` -> `model.layers[2].out`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    """Turns a composed node tree into data, positions and diagnostics."""

    def __init__(self, path: str):
        self.path = path
        self.loader = yaml.SafeLoader("")
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.problems: list[Diagnostic] = []
        self.budget = MAX_EXPANDED_NODES

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise UserError(Diagnostic(
                self.path, f"document expands to more than {MAX_EXPANDED_NODES} values "
                "(recursive or exponential YAML aliases?); write the values out instead",
                *_mark(node)))
        self.positions.setdefault(loc, _mark(node))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict:
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merge keys
        out: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Diagnostic(
                    self.path, "mapping keys must be plain scalars", *_mark(key_node)))
                continue
            key = self.loader.construct_object(key_node)
            if key in out:
                first = self.positions.get((*loc, key), ("?", "?"))
                self.problems.append(Diagnostic(
                    self.path, f"duplicate key {key!r} (first defined at line {first[0]})",
                    *_mark(key_node), field=dotted((*loc, key))))
                continue
            self.positions[(*loc, key)] = _mark(key_node)
            out[key] = self.build(value_node, (*loc, key))
        return out


def load(path: Path | str, display: str | None = None) -> Document:
    """Read one YAML file; every problem becomes a `UserError` with positions."""
    path = Path(path)
    name = display or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UserError(Diagnostic(name, f"file is {size} bytes; manifests are limited "
                                             f"to {MAX_FILE_BYTES} bytes"))
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(Diagnostic(name, "file not found")) from None
    except UnicodeDecodeError as exc:
        raise UserError(Diagnostic(name, f"not UTF-8 text ({exc.reason})")) from None
    except OSError as exc:
        raise UserError(Diagnostic(name, f"cannot read: {exc.strerror}")) from None
    return parse(text, name)


def parse(text: str, name: str) -> Document:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        what = " ".join(s for s in (exc.context, exc.problem) if s)
        raise UserError(Diagnostic(name, f"YAML syntax error: {what}", line, col)) from None
    except yaml.YAMLError as exc:
        raise UserError(Diagnostic(name, f"YAML error: {exc}")) from None
    if node is None:
        raise UserError(Diagnostic(name, "file is empty; expected a mapping of manifest sections"))
    builder = _Builder(name)
    try:
        data = builder.build(node, ())
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise UserError(Diagnostic(name, f"YAML error: {exc.problem}",
                                   mark.line + 1, mark.column + 1)) from None
    except RecursionError:
        raise UserError(Diagnostic(name, "YAML nesting is too deep")) from None
    if builder.problems:
        raise UserError(builder.problems)
    return Document(name, data, builder.positions)
