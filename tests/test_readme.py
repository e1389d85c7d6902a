"""The command outputs README.md and docs/ show are what the tool prints (docs/generate.py
makes them; a block may live in README.md or in any page under docs/).

The `check` block is remade here; `summary` and `locked` in test_examples.py (from the
examples' build) and `status` in test_quickstart.py (from the quick start's own run), where
those builds already are.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import REPO


def generator():
    """docs/generate.py, as a module."""
    spec = importlib.util.spec_from_file_location("generate", REPO / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_block(name: str) -> str:
    """The generated block `name`, wherever it lives (README.md or a page of docs/)."""
    return generator().block(name)


def assert_current(name: str, fresh: str) -> None:
    """The `name` block is `fresh` (time cells aside); else say where it is and how to
    remake it."""
    docs = generator()
    path, shown = docs.located()[name]
    assert docs.comparable(shown) == docs.comparable(fresh), (
        f"{path.relative_to(REPO)}'s generated `{name}` block is stale: run `python "
        f"docs/generate.py {name}`. The tool now prints:\n{fresh}")


def test_every_generated_block_has_a_generator():
    docs = generator()
    assert set(docs.located()) == set(docs.GENERATORS)


def test_the_quick_start_status_stays_in_the_readme():
    """The first ten minutes (README.md) show what `status` says after an edit."""
    assert generator().located()["status"][0] == REPO / "README.md"


def test_a_block_in_two_places_is_an_error(tmp_path: Path, monkeypatch):
    docs = generator()
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    text = "<!-- generated: check -->\n\n```text\nold\n```\n"
    page.write_text(text)
    (tmp_path / "README.md").write_text(text)
    monkeypatch.setattr(docs, "README", tmp_path / "README.md")
    monkeypatch.setattr(docs, "DOCS", tmp_path / "docs")
    with pytest.raises(ValueError, match="'check' in both"):
        docs.located()


def test_the_check_example_is_what_check_prints(tmp_path: Path):
    assert_current("check", generator().check(tmp_path))


def test_a_rewrite_replaces_only_the_blocks_content():
    docs = generator()
    text = "intro\n<!-- generated: check -->\n\n```text\nold\n```\nrest\n"
    assert docs.rewrite(text, {"check": "new\n"}) == (
        "intro\n<!-- generated: check -->\n\n```text\nnew\n```\nrest\n")
    assert docs.comparable("digits  up to date  0.3s  99.2%\n") == \
        "digits  up to date  #.#s  99.2%\n"
