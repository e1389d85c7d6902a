"""The command outputs the documentation shows, produced by running the commands, never typed;
and the manifest reference, produced from the manifest's JSON Schema.

    python docs/generate.py            rewrite every generated block and page
    python docs/generate.py --check    exit 1 (and say which) where one differs

A generated block is the fenced block after a `<!-- generated: NAME -->` line, in README.md
or in a page under docs/ (each name once):
  summary  the table a build of `manifests/` ends with: `edgebuild` run in this repository
           (it builds the examples first if they are not built; a no-op prints the table)
  check    `edgebuild check` on a manifest with three mistakes (the manifest is shown too)
  status   the quick start's `edgebuild status` after changing train.epochs (a digits
           project from `edgebuild init`, built once)
  locked   `edgebuild build --locked` after an edit the lock does not hold (the digits
           example, restored from the examples' cache)

A generated page is a whole file:
  reference  docs/reference/manifest.md: every key of the manifest, from the schema
             `edgebuild schema` prints (edgebuild.manifest.schema.generate)

The tests compare each block with a fresh run (tests/test_examples.py: summary, locked;
test_quickstart.py: status; test_readme.py: check) and the reference page with the schema
(test_docs.py), so the documentation cannot drift from what the tool prints. A build's `time`
cells are the one thing a rerun may change; `comparable` masks them in both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference" / "manifest.md"
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n+```text\n)(.*?)(```)", re.S)

# `check` finds every mistake at once: three here, one per kind (a value, a name, a key)
BAD_MANIFEST = """\
name: digits
dataset: {format: sklearn-digits}
model:
  input: [1, 8, 8]
  layers:
    - {name: conv1, op: conv2d, out: 16, kernel: 3, pad: 1, act: relu6}
    - {name: fc, op: lineer, out: 10, flatten: true}
train: {epoch: 30}
target: {device: cortex-m4, memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}}
"""
QUICK_START_EDIT = ("epochs: 20", "epochs: 3")  # the quick start's "change train.epochs"


def edgebuild(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    script = shutil.which("edgebuild")
    command = [script] if script else [sys.executable, "-m", "edgebuild"]
    env = {k: v for k, v in os.environ.items() if k != "EDGEBUILD_CACHE"}
    result = subprocess.run(command + args, cwd=cwd, env=env, capture_output=True, text=True,
                            stdin=subprocess.DEVNULL, timeout=3600)
    if check and result.returncode != 0:
        raise RuntimeError(f"edgebuild {' '.join(args)} in {cwd}: exit {result.returncode}\n"
                           f"{result.stderr[-3000:]}")
    return result


def summary_of(stderr: str) -> str:
    """The table a build ends with: its lines from the header on."""
    start = re.search(r"^manifest +stages +time", stderr, re.M)
    if start is None:
        raise RuntimeError(f"no summary table in:\n{stderr[-2000:]}")
    return "$ edgebuild\n" + stderr[start.start():]


def summary(scratch: Path) -> str:
    del scratch  # the examples build where the README says they build: in this repository
    return summary_of(edgebuild(["build"], REPO).stderr)


def check(scratch: Path) -> str:
    (scratch / "edgebuild.yaml").write_text(BAD_MANIFEST)
    result = edgebuild(["check"], scratch, check=False)
    assert result.returncode == 2, result.stderr
    return ("$ cat edgebuild.yaml\n" + BAD_MANIFEST + "$ edgebuild check\n" + result.stderr
            + f"$ echo $?\n{result.returncode}\n")


def status_of(stdout: str) -> str:
    return "$ edgebuild status\n" + stdout


def status(scratch: Path) -> str:
    project = scratch / "kws"
    edgebuild(["init", str(project), "--no-git"], scratch)
    edgebuild(["build"], project)
    manifest = project / "edgebuild.yaml"
    text = manifest.read_text()
    assert QUICK_START_EDIT[0] in text, "edgebuild init's manifest changed: update the edit"
    manifest.write_text(text.replace(*QUICK_START_EDIT, 1))
    return status_of(edgebuild(["status"], project).stdout)


def locked(scratch: Path) -> str:
    """CI's `--locked` after an edit nobody relocked: digits, restored from the examples'
    cache (their build must exist), then train.epochs changed."""
    (scratch / "manifests").mkdir()
    manifest = scratch / "manifests" / "digits.yaml"
    shutil.copy(REPO / "manifests" / "digits.yaml", manifest)
    cache = ["--cache-dir", str(REPO / "cache")]
    edgebuild(["build", *cache], scratch)
    text = manifest.read_text()
    assert "epochs: 30" in text, "manifests/digits.yaml changed: update the edit"
    manifest.write_text(text.replace("epochs: 30", "epochs: 20", 1))
    result = edgebuild(["build", "--locked", *cache], scratch, check=False)
    assert result.returncode == 1, result.stderr
    return ("$ edgebuild build --locked    # after train.epochs: 30 -> 20, not relocked\n"
            + result.stderr + f"$ echo $?\n{result.returncode}\n")


GENERATORS: dict[str, Callable[[Path], str]] = {"summary": summary, "check": check,
                                                "status": status, "locked": locked}


def blocks(text: str) -> dict[str, str]:
    """{name: content} of one file's generated blocks."""
    return {m.group(2): m.group(3) for m in BLOCK.finditer(text)}


def pages() -> list[Path]:
    """The files generated blocks may live in: README.md and docs/'s pages (not the
    generated reference, which is remade whole)."""
    return [README] + sorted(p for p in DOCS.rglob("*.md") if p != REFERENCE)


def located() -> dict[str, tuple[Path, str]]:
    """{name: (file, content)} of every generated block; a name in two places is an error."""
    found: dict[str, tuple[Path, str]] = {}
    for path in pages():
        for name, content in blocks(path.read_text()).items():
            if name in found:
                raise ValueError(f"generated block {name!r} in both {found[name][0]} and {path}")
            found[name] = (path, content)
    return found


def block(name: str) -> str:
    """The content of the generated block `name`, wherever it lives."""
    return located()[name][1]


def comparable(block: str) -> str:
    """`block` with a build's time cells masked: the one part of an output a rerun moves."""
    return re.sub(r"(?<=\s)\d+\.\ds(?=\s)", "#.#s", block)


def rewrite(text: str, fresh: dict[str, str]) -> str:
    return BLOCK.sub(lambda m: m.group(1) + fresh.get(m.group(2), m.group(3)) + m.group(4),
                     text)


# --- the manifest reference, from the JSON Schema -------------------------------------------

REFERENCE_HEAD = """\
<!-- Generated by `python docs/generate.py reference` from the manifest's JSON Schema
     (`edgebuild schema`, schemas/manifest.schema.json). Do not edit: edit the pydantic
     records in edgebuild/manifest/ and edgebuild/ops/, then regenerate. -->

# Manifest reference

Every key a manifest (`edgebuild.yaml`, `manifests/*.yaml`) may hold, with its type, default
and meaning, generated from the JSON Schema that `edgebuild check` validates against
(`edgebuild schema` prints it; `schemas/manifest.schema.json` is the committed copy, for
editors: `# yaml-language-server: $schema=../schemas/manifest.schema.json`). Unknown keys are
errors. The [manifest guide](../guide/manifest.md) explains the sections with examples.

Sizes (`size`) are a number of bytes or a string with a unit: `512`, `16KiB`, `2MiB`, `1.5KB`.
A field whose default is `null` is unset unless given.
"""


def reference_schema() -> dict:
    """The manifest schema, as `edgebuild schema` prints it."""
    from edgebuild.manifest import schema  # the installed edgebuild: no torch import

    return json.loads(schema.render())


def _cell(text: str) -> str:
    """Text fit for a Markdown table cell."""
    return _prose(text).replace("|", "\\|")


def _prose(text: str) -> str:
    """Schema text on one line, its angle-bracketed words (`<layer>`) escaped so Markdown
    shows them instead of reading them as HTML tags (inside backticks they need nothing)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;")
                    for i, part in enumerate(parts))


def _anchor(name: str) -> str:
    return name.lower()


def _bounds(node: dict) -> str:
    low = ([f">= {node['minimum']}"] if "minimum" in node else []) + \
        ([f"> {node['exclusiveMinimum']}"] if "exclusiveMinimum" in node else [])
    high = ([f"<= {node['maximum']}"] if "maximum" in node else []) + \
        ([f"< {node['exclusiveMaximum']}"] if "exclusiveMaximum" in node else [])
    return ", ".join(low + high)


def _scalar(node: dict) -> str:
    kind = node.get("type", "any")
    if kind == "string" and "[KMGkmg]" in node.get("pattern", ""):
        return "size string (`16KiB`)"
    if kind == "string" and "pattern" in node:
        return f"string matching `{node['pattern']}`"
    if kind == "string" and node.get("minLength"):
        return "non-empty string"
    bounds = _bounds(node)
    return f"{kind} ({bounds})" if bounds else kind


def type_of(node: dict) -> str:
    """A schema node as a short phrase, its named records as links."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{_anchor(name)})"
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " or ".join(dict.fromkeys(type_of(choice) for choice in node[key]))
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    if node.get("type") == "array":
        if "prefixItems" in node:
            return "[" + ", ".join(type_of(item) for item in node["prefixItems"]) + "]"
        sizes = _bounds({"minimum": node["minItems"]} if "minItems" in node else {})
        items = type_of(node.get("items", {}))
        return f"list of {items}" + (f" (length {sizes})" if sizes else "")
    if node.get("type") == "object" and "patternProperties" in node:
        (value,) = node["patternProperties"].values()
        return f"mapping of layer name to {type_of(value)}"
    if node.get("type") == "null":
        return "`null`"
    return _scalar(node)


def _default(name: str, node: dict, required: list[str]) -> str:
    if name in required:
        return "**required**"
    if "default" not in node:
        return ""
    text = json.dumps(node["default"], separators=(", ", ": "))
    return f"`{text}`" if len(text) <= 40 else "see its fields"


def _fields(record: dict) -> list[str]:
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    required = record.get("required", [])
    for name, node in record["properties"].items():
        meaning = node.get("description", "")
        rows.append(f"| `{name}` | {_cell(type_of(node))} | "
                    f"{_cell(_default(name, node, required))} | {_cell(meaning)} |")
    return rows


def _section(name: str, record: dict) -> list[str]:
    lines = [f"## {name}", ""]
    if record.get("description"):
        lines += [_prose(record["description"]), ""]
    if "properties" in record:
        lines += _fields(record)
    else:
        lines.append(f"One of: {type_of(record)}.")
    return lines + [""]


def _references(node: object) -> list[str]:
    """The record names `node` links to, in document order."""
    if isinstance(node, dict):
        here = [node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else []
        return here + [name for value in node.values() for name in _references(value)]
    if isinstance(node, list):
        return [name for value in node for name in _references(value)]
    return []


def _record_order(schema: dict) -> list[str]:
    """The records breadth first from the top level: each section after the one that
    first names it; records nothing names (none today) last."""
    definitions = schema.get("$defs", {})
    order: list[str] = []
    queue = _references(schema["properties"])
    while queue:
        name = queue.pop(0)
        if name not in order and name in definitions:
            order.append(name)
            queue += _references(definitions[name].get("properties", definitions[name]))
    return order + sorted(set(definitions) - set(order))


def manifest_reference(schema: dict) -> str:
    """docs/reference/manifest.md for `schema`."""
    top = {"properties": schema["properties"], "required": schema.get("required", [])}
    lines = [REFERENCE_HEAD, "## Top level", "",
             _prose(schema.get("description", "")), "", *_fields(top), ""]
    for name in _record_order(schema):
        lines += _section(name, schema["$defs"][name])
    return "\n".join(lines).rstrip("\n") + "\n"


PAGES: dict[str, tuple[Path, Callable[[], str]]] = {
    "reference": (REFERENCE, lambda: manifest_reference(reference_schema()))}


def _check_pages(names: list[str]) -> int:
    """Compare the generated pages `names` with fresh ones: 1 (and say which) on drift."""
    stale = [name for name in names
             if not PAGES[name][0].exists() or PAGES[name][0].read_text() != PAGES[name][1]()]
    for name in stale:
        print(f"{PAGES[name][0].relative_to(REPO)} ({name}) differs from what the schema "
              f"makes now: run `python docs/generate.py {name}`", file=sys.stderr)
    return 1 if stale else 0


def _write_pages(names: list[str]) -> None:
    for name in names:
        path, make = PAGES[name]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make())
        print(f"{path.relative_to(REPO)}: made", file=sys.stderr)


def _make_blocks(names: list[str], found: dict[str, tuple[Path, str]], check_only: bool) -> int:
    fresh: dict[str, str] = {}
    for name in names:
        with tempfile.TemporaryDirectory() as scratch:
            fresh[name] = GENERATORS[name](Path(scratch))
    drifted = [name for name, made in fresh.items()
               if comparable(made) != comparable(found[name][1])]
    if check_only:
        for name in drifted:
            print(f"{found[name][0].relative_to(REPO)}'s {name} block differs from what the "
                  f"tool prints now", file=sys.stderr)
        return 1 if drifted else 0
    for path in sorted({found[name][0] for name in fresh}):
        path.write_text(rewrite(path.read_text(), fresh))
    print(f"{len(fresh)} block(s) made, {len(drifted)} changed", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare, exit 1 on drift")
    everything = [*GENERATORS, *PAGES]
    parser.add_argument("names", nargs="*", help=f"blocks and pages to make (default: all of "
                        f"{', '.join(everything)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(everything))
    if unknown:
        parser.error(f"nothing generated is named {unknown}; there are {', '.join(everything)}")
    names = args.names or everything
    found = located()
    missing = sorted(set(GENERATORS) - set(found))
    if missing:
        print(f"README.md and docs/ have no generated block {missing}", file=sys.stderr)
        return 1
    page_names = [name for name in names if name in PAGES]
    block_names = [name for name in names if name in GENERATORS]
    if args.check:
        return max(_check_pages(page_names), _make_blocks(block_names, found, True))
    _write_pages(page_names)
    return _make_blocks(block_names, found, False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
