"""Which of edgebuild's source files compute a stage, and their digest: the stage's code
is part of its cache key (no hand-bumped version numbers).

A stage's code is everything its module reaches by import — module-level and
function-local imports alike, read from the source (the stages import heavy libraries
inside their functions) — plus the data files shipped beside those modules (device
profiles). Two kinds of edge are not followed, because what flows along them is already
keyed by value:
- the modules the stage package names as not followed (`Provider.not_followed`, the
  manifest checker `edgebuild.pipeline.validation`): it turns the manifest into the
  stage's config, and the config itself is in the key;
- the parent packages Python imports implicitly (the stage package imports every stage,
  so following it would make each stage depend on all others); an explicit import of a
  package (`from edgebuild.ops import OPS`) is followed like any other.
A stage's code starts at its module, `<Provider.stage_modules>.<stage>`: the engine knows
the stage package only by what it registered (build.registry).
Type-checking-only imports (`if TYPE_CHECKING:`) run nothing and are not followed.
Within the modules reached, only the definitions the stage's code reaches count, and of
the operator records only the facets the stage reads (build.definitions): editing an
op's C emitter does not move a `train` key.

Editing the quantizer thus changes the key of `quantize` and of what reads its output, not
of `train`. The digests are computed once per edgebuild source tree and remembered in the
cache under the package's fingerprint.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from edgebuild.build import definitions, registry
from edgebuild.build.cache import write_atomic
from edgebuild.build.definitions import NO_CUT, Cut
from edgebuild.core import boundedjson

PACKAGE = Path(__file__).resolve().parents[1]


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported(path: Path, name: str) -> set[str]:
    """Every dotted name the file imports, outside `if TYPE_CHECKING:` blocks (`graph`
    resolves each to the deepest module it names)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    pending: list[ast.AST] = [ast.parse(path.read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending += node.orelse
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):  # `from P import x`: P.x if it is a module,
            base = definitions.absolute(node, name, is_package)  # else a name defined by P itself
            found.update(f"{base}.{alias.name}" for alias in node.names)
        pending += list(ast.iter_child_nodes(node))
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def graph(package: Path = PACKAGE, not_followed: frozenset[str] | None = None
          ) -> dict[str, set[str]]:
    """edgebuild module -> the edgebuild modules it imports explicitly (none of
    `not_followed`; by default the registered provider's)."""
    if not_followed is None:
        not_followed = registry.provider().not_followed
    known = modules(package)
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = set()
        for target in imported(path, name):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target not in not_followed:
                targets.add(target)
        edges[name] = targets
    return edges


def closure(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    pending = [start]
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending += edges.get(module, ())
    return seen


def stage_digests(stages: Mapping[str, Cut] | Sequence[str],
                  package: Path = PACKAGE) -> dict[str, str]:
    """Per stage, the sha256 of its code: the definitions its module reaches
    (build.definitions; a stage given by name alone cuts nothing) as source text, per
    module, and the data files beside those modules."""
    cuts = stages if isinstance(stages, Mapping) else {stage: NO_CUT for stage in stages}
    return digests(parse(package), cuts, package)


def parse(package: Path = PACKAGE) -> dict[str, definitions.Module]:
    known = modules(package)
    return {name: definitions.parse(name, path, known) for name, path in known.items()}


def digests(parsed: dict[str, definitions.Module], cuts: Mapping[str, Cut],
            package: Path = PACKAGE) -> dict[str, str]:
    """`stage_digests` of parsed modules (a test swaps one for an edited copy)."""
    known = modules(package)
    provided = registry.provider()
    found = {}
    for stage, cut in cuts.items():
        reached = definitions.reach(parsed, f"{provided.stage_modules}.{stage}", cut,
                                    provided.not_followed)
        digest = hashlib.sha256()
        for module in sorted(reached.statements):
            digest.update(f"{module}\0".encode() + reached.text(parsed[module]) + b"\0")
            for data in _data_files(known[module], package):
                digest.update(f"{data.relative_to(package)}\0".encode() + data.read_bytes())
        found[stage] = digest.hexdigest()
    return found


def _data_files(module: Path, package: Path) -> list[Path]:
    """Non-Python files in the module's directory and its data subdirectories (those
    that are no packages), e.g. targets/max7800x/profiles/*.yaml. Not below the top-level
    package: an installed edgebuild keeps schemas/ and templates/ there (keyed as stage
    files where they matter), a checkout does not, and a key must not depend on which."""
    if module.parent == package:
        return []
    found = []
    for directory, subdirs, files in os.walk(module.parent):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs
                            if d != "__pycache__" and not (here / d / "__init__.py").exists())
        found += [here / f for f in sorted(files) if not f.endswith((".py", ".pyc"))]
    return found


def remembered_digests(cuts: Mapping[str, Cut], fingerprint: str,
                       cache_root: Path) -> dict[str, str]:
    """`stage_digests` of this installation, remembered under its fingerprint (parsing
    every module takes ~0.2 s; a source change changes the fingerprint)."""
    record = cache_root / "stat" / f"code-{fingerprint}.json"
    try:
        saved = boundedjson.read(record)
        if isinstance(saved, dict) and all(isinstance(saved.get(s), str) for s in cuts):
            return {s: saved[s] for s in cuts}
    except (OSError, ValueError):
        pass
    found = stage_digests(cuts)
    try:
        write_atomic(record, json.dumps(found, sort_keys=True))
    except OSError:
        pass  # an optimization (a read-only cache)
    return found
