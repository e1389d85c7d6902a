"""YAML documents that remember where every value came from, read within fixed limits.

PyYAML's plain `safe_load` forgets line numbers, silently keeps the last of two duplicate
keys, expands aliases without limit (a "billion laughs" file exhausts memory) and reads a
file of any size, depth and number of values before anything can look at it (a 2 MB list
of a million numbers took 18 s and 700 MB before failing). Here every limit applies while
the file is read, so a hostile file (a manifest, an ai8x network description) costs at
most a bounded time and memory and fails with one line naming the limit:

- the file's size (`MAX_FILE_BYTES`): at most that much is ever read;
- the number of values (`MAX_NODES`: keys, list items, scalars, aliases) and the nesting
  depth (`MAX_DEPTH`), counted by the composer as it builds the node tree, which stops at
  the first value past either;
- alias expansion (`MAX_EXPANDED_NODES`): the node tree shares aliased nodes (linear in
  the file), and constructing plain data from it counts every expanded value;
- the length of a number (`MAX_NUMBER_CHARS`): PyYAML converts YAML 1.1's sexagesimal
  `1:00:00:...` in quadratic time, and Python refuses integers of more than 4300 digits.

A manifest or network description has a few thousand values and fewer than ten levels
(a 1000-layer model: about 15000 values), so the limits leave room for any real one.
libyaml parses when PyYAML has it (five times faster than PyYAML's own parser, with the
same line and column marks); a file it rejects is read again by PyYAML's parser, whose
wording and positions of syntax errors the diagnostics use.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias, cast

import yaml
from yaml.composer import Composer
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from edgebuild.core.errors import Diagnostic, UserError

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64
# Twice MAX_NODES: a file without aliases never comes near it (a value is built once, an
# inline merge source twice), so reaching it always means aliases.
MAX_EXPANDED_NODES = 2 * MAX_NODES
MAX_NUMBER_CHARS = 100
MERGE_TAG = "tag:yaml.org,2002:merge"
VALUE_TAG = "tag:yaml.org,2002:value"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

TOO_MANY = (f"more than {MAX_NODES} values (keys, list items and scalars; a manifest or "
            "network description has a few thousand): not read further; check that this "
            "is the file you meant")
TOO_DEEP = (f"nested deeper than {MAX_DEPTH} levels of lists and mappings (too deep: a "
            "manifest or network description needs fewer than 10); check the file's "
            "brackets and indentation")
TOO_EXPANDED = (f"YAML aliases (*name) expand the file to more than {MAX_EXPANDED_NODES} "
                "values (recursive or exponential aliases, a \"billion laughs\"); write "
                "the values out, or alias less")
TOO_DEEP_ALIASES = (f"YAML aliases (*name) nest values deeper than {MAX_DEPTH} levels (an "
                    "alias inside its own anchor, or a chain of them); write the values out")

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
    """`('model', 'layers', 2, 'out')` -> `model.layers[2].out`; a key longer than any
    real one is cut short (a hostile file's 4 MB key must not become a 4 MB line)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            out += ("." if out else "") + (text if len(text) <= 40 else text[:37] + "...")
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def shown(text: str, limit: int = 40) -> str:
    """A value or key quoted in a message, cut short: a hostile file's 4 MB key must not
    become a 4 MB line (for every message that quotes what a file holds)."""
    return repr(text) if len(text) <= limit else repr(text[:limit - 3]) + "..."


class _Limit(Exception):
    """A limit hit while composing: the message and where the value past it starts."""

    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.message, self.mark = message, mark


class _BoundedComposer(Composer):
    """PyYAML's composer, counting as it goes: it stops at the first value past
    `MAX_NODES` and the first list or mapping nested past `MAX_DEPTH`, so that reading
    any file costs at most that many nodes (PyYAML counts nothing; libyaml limits only
    nesting, at 1000 levels). Aliases count once here (they are shared nodes); their
    expansion is counted by `_Builder`."""

    def __init__(self) -> None:
        Composer.__init__(self)
        self.nodes = 0
        self.depth = 0

    def _ahead(self) -> yaml.Mark | None:
        """Where the next value starts (the parser half of the loader has `peek_event`)."""
        event = cast(Any, self).peek_event()
        return event.start_mark if event is not None else None

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Limit(TOO_MANY, self._ahead())
        return super().compose_node(parent, index)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Limit(TOO_DEEP, self._ahead())

    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        self._enter()
        node = super().compose_sequence_node(anchor)
        self.depth -= 1
        return node

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        self._enter()
        node = super().compose_mapping_node(anchor)
        self.depth -= 1
        return node


class _PureLoader(_BoundedComposer, Reader, Scanner, Parser, Resolver):
    """PyYAML's own reader, scanner and parser (always there; the reference wording)."""

    def __init__(self, text: str) -> None:
        Reader.__init__(self, text)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        Resolver.__init__(self)


def _loaders() -> tuple[Callable[[str], _BoundedComposer], ...]:
    """The composers to try in turn: libyaml's parser first when PyYAML was built with it."""
    try:
        from yaml._yaml import CParser
    except ImportError:  # PyYAML without libyaml
        return (_PureLoader,)

    class _FastLoader(_BoundedComposer, CParser, Resolver):
        """libyaml's parser (C) under the same counting composer and resolver."""

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            _BoundedComposer.__init__(self)
            Resolver.__init__(self)

    return (_FastLoader, _PureLoader)


_LOADERS = _loaders()


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
        """The plain data of `node` at `loc`. The composer bounded the tree; only aliases
        can take the built data past its limits (`_spend`, and the depth: `loc` is one
        level per list or mapping above the value)."""
        self._spend(1, node)
        if len(loc) > MAX_DEPTH:
            raise UserError(Diagnostic(self.path, TOO_DEEP_ALIASES, *_mark(node)))
        self.positions.setdefault(loc, _mark(node))
        if node.tag not in (MAP_TAG, SEQ_TAG) and not isinstance(node, yaml.ScalarNode):
            # `!!set {..}`, `!!python/object/apply:..` [..]: never silently read as plain data
            raise UserError(Diagnostic(self.path, f"unsupported YAML tag {node.tag!r}",
                                       *_mark(node), field=dotted(loc)))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _spend(self, values: int, node: yaml.Node) -> None:
        """Count built values against the expansion budget."""
        self.budget -= values
        if self.budget < 0:
            raise UserError(Diagnostic(self.path, TOO_EXPANDED, *_mark(node)))

    def _scalar(self, node: yaml.Node) -> Any:
        """A scalar's value (SafeConstructor). A number's length is bounded first (the
        module docstring says why); a value that matches a YAML type's pattern but is not
        one (the date 2020-99-99) is a ValueError there, a user error here."""
        if node.tag in NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            raise UserError(Diagnostic(self.path, (
                f"a number of {len(node.value)} characters; numbers are limited to "
                f"{MAX_NUMBER_CHARS} (quote it to make it text)"), *_mark(node)))
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:
            kind = node.tag.rsplit(":", 1)[-1]
            raise UserError(Diagnostic(self.path, (
                f"cannot read {shown(node.value)} as a YAML {kind}: {exc} (quote it to "
                "make it text)"), *_mark(node))) from None

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
            key = "=" if key_node.tag == VALUE_TAG else self._scalar(key_node)
            if key in pairs:
                if report:
                    first = _mark(pairs[key][0])
                    self.problems.append(Diagnostic(
                        self.path, f"duplicate key {shown(str(key))} (first defined at line "
                                   f"{first[0]})",
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
            self._spend(len(pairs), node)
            self.merged[id(node)] = pairs
        return self.merged[id(node)]


def load(path: Path | str, display: str | None = None) -> Document:
    """Read one YAML file; every problem becomes a `UserError` with positions."""
    path = Path(path)
    name = display or str(path)
    try:
        text = _read(path, name).decode("utf-8")
    except FileNotFoundError:
        raise UserError(Diagnostic(name, "file not found")) from None
    except UnicodeDecodeError as exc:
        raise UserError(Diagnostic(name, f"not UTF-8 text ({exc.reason})")) from None
    except OSError as exc:
        raise UserError(Diagnostic(name, f"cannot read: {exc.strerror}")) from None
    return parse(text, name)


def _read(path: Path, name: str) -> bytes:
    """At most `MAX_FILE_BYTES`: the size a file states is checked first, and a file that
    states none (a pipe, /dev/zero) is never read past the limit."""
    size = path.stat().st_size
    if size <= MAX_FILE_BYTES:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        if len(data) <= MAX_FILE_BYTES:
            return data
    stated = f"{size} bytes" if size > MAX_FILE_BYTES else f"more than {MAX_FILE_BYTES} bytes"
    raise UserError(Diagnostic(name, f"file is {stated}; manifests are limited to "
                                     f"{MAX_FILE_BYTES} bytes (is it the file you meant?)"))


def parse(text: str, name: str) -> Document:
    """The document in `text` (the contents of the file `name`), or a `UserError`."""
    node = _compose(text, name)
    if node is None:
        raise UserError(Diagnostic(name, "file is empty; expected a mapping of manifest sections"))
    builder = _Builder(name)
    try:
        data = builder.build(node, ())
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise UserError(Diagnostic(name, f"YAML error: {exc.problem}", line, col)) from None
    if builder.problems:
        raise UserError(builder.problems)
    return Document(name, data, builder.positions)


def _compose(text: str, name: str) -> yaml.Node | None:
    """The node tree, by the first loader that reads the file (`_LOADERS`); a limit hit
    stops at once, a syntax error is the last loader's (PyYAML's wording)."""
    error: yaml.YAMLError | None = None
    for loader_class in _LOADERS:
        try:  # PyYAML's reader checks every character when it is made
            return loader_class(text).get_single_node()
        except _Limit as limit:
            raise UserError(Diagnostic(name, limit.message, *_position(limit.mark))) from None
        except yaml.YAMLError as exc:
            error = exc
    raise _syntax_error(name, text, error)


def _position(mark: yaml.Mark | None) -> tuple[int, int] | tuple[()]:
    return (mark.line + 1, mark.column + 1) if mark is not None else ()


def _syntax_error(name: str, text: str, exc: yaml.YAMLError | None) -> UserError:
    """One line: PyYAML's own words, at the line and column they are about."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML text may not hold
        start = text.rfind("\n", 0, exc.position) + 1
        return UserError(Diagnostic(
            name, f"YAML error: unacceptable character #x{exc.character:04x}: {exc.reason}",
            text.count("\n", 0, exc.position) + 1, exc.position - start + 1))
    if isinstance(exc, yaml.MarkedYAMLError):
        what = " ".join(s for s in (exc.context, exc.problem) if s)
        return UserError(Diagnostic(name, f"YAML syntax error: {what}",
                                    *_position(exc.problem_mark or exc.context_mark)))
    return UserError(Diagnostic(name, "YAML error: " + " ".join(str(exc).split())))
