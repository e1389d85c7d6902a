"""The shipped examples, built once per run (conftest.examples_build): they hold
edgebuild.lock, and the README's summary table is what their build prints."""

from __future__ import annotations

import json

from conftest import REPO, run_cli
from test_readme import assert_current, generator


def test_the_examples_build_exactly_as_locked(examples_build):
    """CI's promise: every key and output digest of every example as edgebuild.lock
    records it (a no-op after the session's build, which it checks rather than repeats)."""
    result = run_cli(["build", "--locked", "--json"], REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    tally = json.loads(result.stdout)["tally"]
    assert set(tally) == {"up-to-date"}, tally


def test_the_readme_summary_is_what_the_build_prints(examples_build):
    result = run_cli(["build"], REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    assert_current("summary", generator().summary_of(result.stderr))


def test_the_readme_locked_example_is_what_locked_prints(examples_build, tmp_path):
    assert_current("locked", generator().locked(tmp_path))
