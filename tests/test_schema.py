"""The committed JSON Schema is current, valid, and agrees with the examples and the CLI."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from edgebuild.manifest import schema

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import DIGITS_MANIFEST, EXAMPLES, REPO, run_cli
except ImportError:
    from conftest import DIGITS_MANIFEST, EXAMPLES, REPO, run_cli

COMMITTED = REPO / "schemas" / "manifest.schema.json"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    document = json.loads(COMMITTED.read_text())
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def errors(validator, instance) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(instance)]


def test_committed_schema_is_current():
    assert COMMITTED.read_text() == schema.render(), (
        "schemas/manifest.schema.json is stale: run `python scripts/regen.py schemas` "
        "(it writes what `edgebuild schema` prints) and commit the result")


def test_schema_declares_draft_2020_12_and_forbids_unknown_top_level_keys():
    document = json.loads(COMMITTED.read_text())
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["additionalProperties"] is False
    assert {"name", "model"} <= set(document["required"])  # dataset: unless model.weights
    assert "$schema" in document["properties"]  # the editor hint line is allowed


def test_there_are_examples():
    assert [p.name for p in EXAMPLE_FILES] and "digits.yaml" in [p.name for p in EXAMPLE_FILES]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_validates_against_the_committed_schema(validator, path: Path):
    instance = yaml.safe_load(path.read_text())
    assert errors(validator, instance) == []


def test_the_test_manifest_validates(validator):
    assert errors(validator, yaml.safe_load(DIGITS_MANIFEST.format(name="small"))) == []


def digits() -> dict:
    return yaml.safe_load((EXAMPLES / "digits.yaml").read_text())


@pytest.mark.parametrize(("where", "key"), [
    ((), "epocs"),
    (("train",), "epocs"),
    (("target", "memory"), "l3"),
    (("model", "layers", 0), "kernal"),
    (("dataset",), "paht"),
])
def test_unknown_key_fails_the_schema(validator, where, key):
    instance = digits()
    node = instance
    for part in where:
        node = node[part]
    node[key] = 1
    assert errors(validator, instance), f"{key!r} under {where} should be rejected"


@pytest.mark.parametrize(("where", "value"), [
    (("target", "memory", "l1"), "12XB"),
    (("target", "memory", "l1"), "2TiB"),
    (("target", "memory", "l2"), -5),
    (("train", "epochs"), "many"),
    (("train", "epochs"), -1),  # 0: take train.init as it is
    (("seed",), -1),
    (("name",), "a/b"),
    (("name",), "has space"),
    (("model", "layers", 0, "out"), 0),
    (("model", "layers", 0, "op"), "conv3d"),
])
def test_bad_values_fail_the_schema(validator, where, value):
    instance = digits()
    node = instance
    for part in where[:-1]:
        node = node[part]
    node[where[-1]] = value
    assert errors(validator, instance)


@pytest.mark.parametrize("size", [16384, "16KiB", "2MiB", "512KB", "1 GiB", "0.5KiB"])
def test_sizes_with_units_pass_the_schema(validator, size):
    instance = digits()
    instance["target"]["memory"]["l1"] = size
    assert errors(validator, instance) == []


def test_valid_edits_keep_passing(validator):
    """The schema is not so strict that it rejects what edgebuild accepts."""
    instance = digits()
    edited = copy.deepcopy(instance)
    edited["$schema"] = "../schemas/manifest.schema.json"
    edited["train"]["optimizer"] = {"sgd": {"lr": 0.1, "momentum": 0.5}}
    edited["train"]["schedule"] = {"type": "cosine", "min_lr": 0.0}
    edited["model"]["layers"][0]["inputs"] = ["input"]
    edited["model"]["layers"][0]["doc"] = "first conv"
    assert errors(validator, edited) == []


def test_cli_schema_prints_the_same_json(tmp_path: Path):
    result = run_cli(["schema"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == schema.render()
    assert json.loads(result.stdout) == json.loads(COMMITTED.read_text())


def test_cli_schema_writes_a_file(tmp_path: Path):
    result = run_cli(["schema", "-o", "out.json"], tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert (tmp_path / "out.json").read_text() == COMMITTED.read_text()
