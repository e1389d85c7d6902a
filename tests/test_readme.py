"""README.md's command outputs are what the tool prints (docs/generate.py makes them).

The `check` block is remade here; `summary` in test_examples.py (from the examples' build)
and `status` in test_quickstart.py (from the quick start's own run), where those builds
already are.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from conftest import REPO


def generator():
    """docs/generate.py, as a module."""
    spec = importlib.util.spec_from_file_location("generate", REPO / "docs" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_block(name: str) -> str:
    return generator().blocks((REPO / "README.md").read_text())[name]


def assert_current(name: str, fresh: str) -> None:
    """The README's `name` block is `fresh` (time cells aside); else say how to remake it."""
    docs = generator()
    assert docs.comparable(readme_block(name)) == docs.comparable(fresh), (
        f"README.md's generated `{name}` block is stale: run `python docs/generate.py "
        f"{name}`. The tool now prints:\n{fresh}")


def test_every_generated_block_has_a_generator():
    docs = generator()
    assert set(docs.blocks((REPO / "README.md").read_text())) == set(docs.GENERATORS)


def test_the_check_example_is_what_check_prints(tmp_path: Path):
    assert_current("check", generator().check(tmp_path))


def test_a_rewrite_replaces_only_the_blocks_content():
    docs = generator()
    text = "intro\n<!-- generated: check -->\n\n```text\nold\n```\nrest\n"
    assert docs.rewrite(text, {"check": "new\n"}) == (
        "intro\n<!-- generated: check -->\n\n```text\nnew\n```\nrest\n")
    assert docs.comparable("digits  up to date  0.3s  99.2%\n") == \
        "digits  up to date  #.#s  99.2%\n"
