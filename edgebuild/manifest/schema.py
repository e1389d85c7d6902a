"""The manifest JSON Schema, generated from the pydantic records (one schema, one place).

`schemas/manifest.schema.json` is this output, committed for editors
(`# yaml-language-server: $schema=...`); a test fails when it is stale.
"""

from __future__ import annotations

import json

from edgebuild.core.jsontypes import JSONObject
from edgebuild.manifest import SCHEMA_ID, Manifest


def generate() -> JSONObject:
    schema = Manifest.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "edgebuild manifest", **schema}


def render() -> str:
    return json.dumps(generate(), indent=2, sort_keys=True) + "\n"
