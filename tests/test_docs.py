"""The documentation site (mkdocs.yml, docs/) builds with `mkdocs build --strict` — no broken
link, anchor or included README section — and its manifest reference is the one the schema
makes now (docs/generate.py), so a field added to the manifest cannot be missing there.

`.ci/run` builds the site too, after the suite.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_readme import generator


def test_the_manifest_reference_is_current():
    docs = generator()
    assert docs.REFERENCE.read_text() == docs.manifest_reference(docs.reference_schema()), (
        "docs/reference/manifest.md is stale: run `python docs/generate.py reference`")


def test_the_reference_names_every_key_of_the_schema():
    docs = generator()
    schema = docs.reference_schema()
    text = docs.REFERENCE.read_text()
    for record in schema["$defs"]:
        assert f"\n## {record}\n" in text, record
    for record in [schema, *schema["$defs"].values()]:
        for key in record.get("properties", {}):
            assert f"| `{key}` |" in text, key


def test_a_type_is_written_as_a_reader_wants_it():
    docs = generator()
    assert docs.type_of({"$ref": "#/$defs/Target"}) == "[Target](#target)"
    assert docs.type_of({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}) \
        == "integer (>= 1) or `null`"
    assert docs.type_of({"enum": ["avg", "max"]}) == '`"avg"` \\| `"max"`'
    assert docs.type_of({"type": "array", "items": {"type": "string"}}) == "list of string"


def test_the_readme_links_only_to_pages_that_exist():
    text = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", text)
    assert links, "README.md links into docs/"
    assert [link for link in links if not (REPO / link).is_file()] == []


def test_every_page_is_in_the_navigation():
    """A page left out of mkdocs.yml's nav is only a warning there; here it fails."""
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md"))
    assert [page for page in pages if page not in nav] == []


def mkdocs() -> list[str]:
    script = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or \
        shutil.which("mkdocs")
    return [script] if script else [sys.executable, "-m", "mkdocs"]


def test_the_site_builds_strictly(tmp_path: Path):
    pytest.importorskip("material", reason="mkdocs-material (the test extra) is not installed")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([*mkdocs(), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr[-4000:]
    page = (tmp_path / "site" / "guide" / "getting-started" / "index.html").read_text()
    assert "set-up: main" in page and "edgebuild status" in page  # README's sections included
