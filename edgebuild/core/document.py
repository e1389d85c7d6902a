"""YAML documents that remember where every value came from.

PyYAML's plain `safe_load` forgets line numbers, silently keeps the last of two duplicate
keys and expands aliases without limit (a "billion laughs" file exhausts memory). We
compose the node tree instead (linear in the file size, aliases are shared nodes), then
construct plain Python data ourselves while recording the position of every key and value
and counting expanded nodes against a budget.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import yaml

from edgebuild.core.errors import Diagnostic, UserError

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_EXPANDED_NODES = 200_000
MERGE_TAG = "tag:yaml.org,2002:merge"
VALUE_TAG = "tag:yaml.org,2002:value"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"

Loc = tuple[Any, ...]
# A mapping's pairs by constructed key: `key -> (key node, value node)`.
Pairs: TypeAlias = dict[Hashable, tuple[yaml.Node, yaml.Node]]


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

    def __init__(self, path: str) -> None:
        self.path = path
        self.loader = yaml.SafeLoader("")
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.problems: list[Diagnostic] = []
        self.budget = MAX_EXPANDED_NODES
        self.reported: set[int] = set()  # ids of mapping nodes whose keys were checked
        self.merged: dict[int, Pairs] = {}  # id of a merge source -> the pairs it contributes
        self.merging: set[int] = set()  # merge sources being resolved (cycle guard)

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise UserError(Diagnostic(
                self.path, f"document expands to more than {MAX_EXPANDED_NODES} values "
                "(recursive or exponential YAML aliases?); write the values out instead",
                *_mark(node)))
        self.positions.setdefault(loc, _mark(node))
        if node.tag not in (MAP_TAG, SEQ_TAG) and not isinstance(node, yaml.ScalarNode):
            # `!!set {..}`, `!!python/object/apply:..` [..]: never silently read as plain data
            raise UserError(Diagnostic(self.path, f"unsupported YAML tag {node.tag!r}",
                                       *_mark(node), field=dotted(loc)))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[Hashable, Any]:
        out: dict[Hashable, Any] = {}
        for key, (key_node, value_node) in self._pairs(node, loc).items():
            self.positions[(*loc, key)] = _mark(key_node)
            out[key] = self.build(value_node, (*loc, key))
        return out

    def _pairs(self, node: yaml.MappingNode, loc: Loc) -> Pairs:
        """`key -> (key node, value node)`: the mapping's own keys (a repeated one is an
        error), then the keys of its `<<: *anchor` merges that it does not set itself
        (YAML merge keys: explicit keys win, earlier merge sources win over later ones).

        PyYAML's `flatten_mapping` is not used: it copies merged pairs into the node
        (exponential for merges of merges) and keeps overridden keys as duplicates."""
        report = id(node) not in self.reported  # a shared node's problems are reported once
        self.reported.add(id(node))
        pairs: Pairs = {}
        sources: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                sources += (value_node.value if isinstance(value_node, yaml.SequenceNode)
                            else [value_node])
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                if report:
                    self.problems.append(Diagnostic(
                        self.path, "mapping keys must be plain scalars", *_mark(key_node)))
                continue
            key = ("=" if key_node.tag == VALUE_TAG
                   else self.loader.construct_object(key_node))
            if key in pairs:
                if report:
                    first = _mark(pairs[key][0])
                    self.problems.append(Diagnostic(
                        self.path, f"duplicate key {key!r} (first defined at line {first[0]})",
                        *_mark(key_node), field=dotted((*loc, key))))
                continue
            pairs[key] = (key_node, value_node)
        for source in sources:
            for key, pair in self._merged(source, loc).items():
                pairs.setdefault(key, pair)
        return pairs

    def _merged(self, node: yaml.Node, loc: Loc) -> Pairs:
        """The pairs a merge source contributes, computed once per node and counted
        against the expansion budget (chains of merges stay linear)."""
        if not isinstance(node, yaml.MappingNode):
            raise UserError(Diagnostic(self.path, "`<<` (merge key) needs a mapping or a "
                                                  "list of mappings", *_mark(node)))
        if id(node) in self.merging:
            raise UserError(Diagnostic(self.path, "a mapping merges itself (recursive `<<`)",
                                       *_mark(node)))
        if id(node) not in self.merged:
            self.merging.add(id(node))
            pairs = self._pairs(node, loc)
            self.merging.discard(id(node))
            self.budget -= len(pairs)
            if self.budget < 0:
                raise UserError(Diagnostic(
                    self.path, f"document expands to more than {MAX_EXPANDED_NODES} values "
                    "(recursive or exponential YAML aliases?); write the values out instead",
                    *_mark(node)))
            self.merged[id(node)] = pairs
        return self.merged[id(node)]


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
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise UserError(Diagnostic(name, "YAML nesting is too deep")) from None
    if node is None:
        raise UserError(Diagnostic(name, "file is empty; expected a mapping of manifest sections"))
    builder = _Builder(name)
    try:
        data = builder.build(node, ())
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise UserError(Diagnostic(name, f"YAML error: {exc.problem}", line, col)) from None
    except RecursionError:
        raise UserError(Diagnostic(name, "YAML nesting is too deep")) from None
    if builder.problems:
        raise UserError(builder.problems)
    return Document(name, data, builder.positions)
