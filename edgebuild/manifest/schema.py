"""The manifest JSON Schema, generated from the pydantic records (one schema, one place).

`schemas/manifest.schema.json` is this output, committed for editors
(`# yaml-language-server: $schema=...`); a test fails when it is stale. So is
`schemas/artifacts/model.v1.schema.json`, the schema of the `validate` stage's model.json
(the model section as written: every field present, defaults resolved).
"""

from __future__ import annotations

import json

from edgebuild.core.jsontypes import JSONObject
from edgebuild.manifest import SCHEMA_ID, Manifest, Model


def generate() -> JSONObject:
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    one = schema["properties"]["target"]
    schema["properties"]["target"] = {  # manifest.targets: one mapping or a list of them
        "anyOf": [{"$ref": one["$ref"]},
                  {"type": "array", "items": {"$ref": one["$ref"]}, "minItems": 1}],
        "default": one["default"],
        "description": "the device and its budgets; a list builds one training for several "
                       "targets, each into build/<name>/<label>/"}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "edgebuild manifest", **schema}


def render() -> str:
    return json.dumps(generate(), indent=2, sort_keys=True) + "\n"


MODEL_ARTIFACT_ID = "https://edgebuild.dev/schemas/artifacts/model.v1.schema.json"


def model_artifact() -> dict:
    """model.json's schema: the `model` section's records as serialized. model.json holds
    every field (`Model.to_json`), so every property of every record is required."""
    schema = Model.model_json_schema(by_alias=True, mode="serialization")
    for record in (schema, *schema.get("$defs", {}).values()):
        if "properties" in record:
            record["required"] = list(record["properties"])
    return {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": MODEL_ARTIFACT_ID, "title": "model.json (stage validate)",
            "description": "The manifest's model section with every default resolved. Record: "
                           "edgebuild.manifest.Model."}


def render_model_artifact() -> str:
    return json.dumps(model_artifact(), indent=2, sort_keys=True) + "\n"
