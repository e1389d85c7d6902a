"""edgebuild.yamlsource: positions, duplicate keys, syntax errors, alias bombs, merge keys,
and the file-level limits (empty, not UTF-8, too large). Unit tests, no CLI."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import UserError


def parse(text: str):
    return yamlsource.parse(textwrap.dedent(text), "f.yaml")


def diagnostics(text: str):
    with pytest.raises(UserError) as info:
        parse(text)
    return info.value.diagnostics


# --- positions ---------------------------------------------------------------------------

NESTED = """\
name: tiny
model:
  input: [1, 8]
  layers:
    - {name: a, op: linear}
    - name: b
      op: add
"""


def test_positions_are_one_based_line_and_column():
    doc = parse(NESTED)
    assert doc.data["model"]["layers"][1] == {"name": "b", "op": "add"}
    assert doc.positions[("name",)] == (1, 1)
    assert doc.positions[("model",)] == (2, 1)
    assert doc.positions[("model", "input")] == (3, 3)
    assert doc.positions[("model", "layers")] == (4, 3)
    assert doc.positions[("model", "layers", 0)] == (5, 7)  # the flow mapping's `{`
    assert doc.positions[("model", "layers", 0, "op")] == (5, 17)
    assert doc.positions[("model", "layers", 1, "name")] == (6, 7)
    assert doc.positions[("model", "layers", 1, "op")] == (7, 7)
    assert doc.positions[("model", "input", 1)] == (3, 14)


def test_locate_falls_back_to_the_longest_existing_prefix_and_renders():
    doc = parse(NESTED)
    # a key pydantic reports as missing is not in the file: point at its parent
    assert doc.locate(("model", "layers", 0, "out")) == (5, 7)
    assert doc.locate(("nothing", "here")) == (1, 1)
    rendered = doc.diagnostic(("model", "layers", 0, "out"), "required field is missing").render()
    assert rendered == "f.yaml:5:7: model.layers[0].out: required field is missing"


def test_dotted_paths():
    assert yamlsource.dotted(("model", "layers", 2, "out")) == "model.layers[2].out"
    assert yamlsource.dotted(()) == ""


# --- duplicate keys ------------------------------------------------------------------------

def test_duplicate_key_reports_both_lines():
    (problem,) = diagnostics("""\
        seed: 1
        name: a
        seed: 2
        """)
    assert (problem.line, problem.col) == (3, 1)
    assert problem.field == "seed"
    assert "duplicate key 'seed'" in problem.message
    assert "first defined at line 1" in problem.message
    assert problem.render().startswith("f.yaml:3:1: seed: duplicate key 'seed'")


def test_every_duplicate_is_reported_with_its_path():
    problems = diagnostics("""\
        train:
          epochs: 1
          batch: 2
          epochs: 3
        model: {input: [1], input: [2]}
        """)
    assert [(p.line, p.col, p.field) for p in problems] == [
        (4, 3, "train.epochs"), (5, 21, "model.input")]
    assert "first defined at line 2" in problems[0].message
    assert "first defined at line 5" in problems[1].message


# --- syntax errors -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "col"), [
    ("a: b: c\n", 1, 5),
    ("a: 1\n b: 2\n", 2, 3),
    ("a: [1, 2\nb: 3\n", 2, 2),
    ("a: *nope\n", 1, 4),
    ("\tname: x\n", 1, 1),
])
def test_syntax_error_has_line_and_column(text, line, col):
    with pytest.raises(UserError) as info:
        yamlsource.parse(text, "f.yaml")  # not dedented: the tab case starts with a tab
    (problem,) = info.value.diagnostics
    assert (problem.line, problem.col) == (line, col)
    assert problem.message.startswith("YAML syntax error")
    assert problem.render().startswith(f"f.yaml:{line}:{col}: YAML syntax error")


@pytest.mark.parametrize("text", [
    "a: !!python/object:os.system x\n",
    "a: !!python/object/apply:os.system ['true']\n",
    "a: !!python/object/new:os.system {args: ['true']}\n",
    "a: !!set {x, y}\n",
    "a: !custom [1]\n",
])
def test_unsafe_and_unknown_tags_are_rejected_not_constructed(text):
    (problem,) = diagnostics(text)
    assert (problem.line, problem.col) == (1, 4)
    assert "tag" in problem.message


def test_standard_tags_are_fine():
    assert parse("a: !!seq [1]\nb: !!map {x: 1}\nc: !!str 3\n").data == {
        "a": [1], "b": {"x": 1}, "c": "3"}


def test_non_scalar_keys_and_multiple_documents_are_errors():
    (problem,) = diagnostics("? [1, 2]\n: 3\n")
    assert "plain scalars" in problem.message
    (problem,) = diagnostics("a: 1\n---\nb: 2\n")
    assert "single document" in problem.message


# --- alias bombs and nesting ---------------------------------------------------------------

def laughs(levels: int = 9, fanout: int = 9) -> str:
    """The classic: each level lists the previous anchor `fanout` times (9**9 values)."""
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        refs = ", ".join([f"*l{level - 1}"] * fanout)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_quickly():
    start = time.monotonic()
    with pytest.raises(UserError) as info:
        yamlsource.parse(laughs(), "bomb.yaml")
    assert time.monotonic() - start < 5  # a bound, not a benchmark: unbounded would never end
    (problem,) = info.value.diagnostics
    assert "aliases" in problem.message
    assert str(yamlsource.MAX_EXPANDED_NODES) in problem.message
    assert problem.line is not None


def test_mapping_alias_bomb_is_refused():
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}"]
    for level in range(1, 9):
        body = ", ".join(f"k{i}: *m{level - 1}" for i in range(8))
        lines.append(f"m{level}: &m{level} {{{body}}}")
    with pytest.raises(UserError, match="aliases"):
        yamlsource.parse("\n".join(lines) + "\n", "bomb.yaml")


def test_shared_aliases_below_the_budget_are_fine():
    doc = parse("""\
        pool: &p {mode: max, size: 2}
        a: {pool: *p}
        b: {pool: *p}
        """)
    assert doc.data["a"]["pool"] == doc.data["b"]["pool"] == {"mode": "max", "size": 2}
    # an aliased value's position is where it was written (the anchor)
    assert doc.positions[("b", "pool", "mode")] == (1, 11)


def test_recursive_alias_is_an_error():
    with pytest.raises(UserError):
        parse("a: &a [*a]\n")


def test_deep_nesting_is_a_user_error_not_a_recursion_crash():
    text = "a: " + "[" * 800 + "]" * 800 + "\n"  # the limit is near 500 levels
    with pytest.raises(UserError, match="too deep"):
        yamlsource.parse(text, "deep.yaml")


MERGE_BOMB = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from edgebuild.core import document as yamlsource
lines = ["a0: &a0 {k: 1}"]
lines += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}]}}" for i in range(1, 40)]
doc = yamlsource.parse("\n".join(lines) + "\n", "merge.yaml")
assert doc.data["a39"] == {"k": 1}, doc.data["a39"]
print("ok")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="uses RLIMIT_AS")
def test_merge_key_chain_is_linear_not_exponential():
    """`a_i: {<<: [*a_{i-1}, *a_{i-1}]}` doubles PyYAML's flattened key list per level
    (2**39 pairs here): it must resolve in linear time, in a child with 1 GiB and 20 s."""
    result = subprocess.run([sys.executable, "-c", MERGE_BOMB], capture_output=True,
                            text=True, timeout=20)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


# --- merge keys ----------------------------------------------------------------------------

def test_merge_key_copies_the_anchor():
    doc = parse("""\
        defaults: &d {kernel: 3, pad: 1, act: relu}
        layer:
          <<: *d
          out: 8
        """)
    assert doc.data["layer"] == {"kernel": 3, "pad": 1, "act": "relu", "out": 8}
    assert doc.positions[("layer", "out")] == (4, 3)
    assert doc.positions[("layer", "kernel")] == (1, 15)  # where the merged value is written


def test_explicit_keys_override_merged_ones():
    doc = parse("""\
        defaults: &d {kernel: 3, pad: 1}
        layer:
          <<: *d
          pad: 0
        """)
    assert doc.data["layer"] == {"kernel": 3, "pad": 0}
    assert doc.positions[("layer", "pad")] == (4, 3)


def test_merge_list_earlier_sources_win():
    doc = parse("""\
        a: &a {x: 1}
        b: &b {x: 2, y: 2}
        c: {<<: [*a, *b]}
        """)
    assert doc.data["c"] == {"x": 1, "y": 2}


def test_merge_of_a_merged_mapping_used_twice():
    doc = parse("""\
        base: &base {x: 1}
        mid: &mid {<<: *base, x: 2}
        top: [*mid, *mid, {<<: *mid, y: 3}]
        """)
    assert doc.data["mid"] == {"x": 2}
    assert doc.data["top"] == [{"x": 2}, {"x": 2}, {"x": 2, "y": 3}]


def test_duplicate_inside_a_merge_source_is_reported_once():
    problems = diagnostics("""\
        a: &a {x: 1, x: 2}
        b: *a
        c: {<<: *a}
        """)
    assert len(problems) == 1
    assert (problems[0].line, problems[0].col) == (1, 14)


@pytest.mark.parametrize("text", ["a: {<<: 3}\n", "a: {<<: [1]}\n", "a: &a {<<: *a}\n"])
def test_bad_merges_are_user_errors(text):
    with pytest.raises(UserError):
        parse(text)


# --- files ---------------------------------------------------------------------------------

def test_load_reads_a_file_and_uses_the_display_name(tmp_path: Path):
    path = tmp_path / "m.yaml"
    path.write_text("name: x\n")
    doc = yamlsource.load(path, "manifests/m.yaml")
    assert doc.data == {"name": "x"}
    assert doc.path == "manifests/m.yaml"
    dup = tmp_path / "dup.yaml"
    dup.write_text("a: 1\na: 2\n")
    with pytest.raises(UserError) as info:
        yamlsource.load(dup, "shown.yaml")
    assert info.value.diagnostics[0].render().startswith("shown.yaml:2:1: a: duplicate key")


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n"])
def test_empty_file_is_an_error(tmp_path: Path, content: str):
    path = tmp_path / "m.yaml"
    path.write_text(content)
    with pytest.raises(UserError, match="empty"):
        yamlsource.load(path)


def test_non_utf8_file_is_an_error(tmp_path: Path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"name: caf\xe9\n")  # latin-1
    with pytest.raises(UserError, match="not UTF-8") as info:
        yamlsource.load(path)
    assert info.value.diagnostics[0].file == str(path)


def test_utf8_with_bom_is_fine(tmp_path: Path):
    path = tmp_path / "m.yaml"
    path.write_bytes("\ufeffname: café\n".encode())
    assert yamlsource.load(path).data == {"name": "café"}


def test_file_over_the_size_limit_is_an_error(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: 1\n" + b"#" * yamlsource.MAX_FILE_BYTES)
    start = time.monotonic()
    with pytest.raises(UserError, match="limited") as info:
        yamlsource.load(path)
    assert time.monotonic() - start < 5  # refused before reading and parsing it
    assert str(path.stat().st_size) in str(info.value)


def test_the_size_limit_is_inclusive(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(yamlsource, "MAX_FILE_BYTES", 64)  # parsing 4 MiB takes seconds
    path = tmp_path / "m.yaml"
    path.write_bytes(b"a: 1\n" + b"#" * 59)
    assert yamlsource.load(path).data == {"a": 1}
    path.write_bytes(b"a: 1\n" + b"#" * 60)
    with pytest.raises(UserError, match="65 bytes; manifests are limited to 64 bytes"):
        yamlsource.load(path)


def test_missing_file_is_an_error(tmp_path: Path):
    with pytest.raises(UserError, match="file not found"):
        yamlsource.load(tmp_path / "nope.yaml")
