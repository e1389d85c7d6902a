"""Stage `validate`: the resolved model graph — every layer's shapes, parameters and MACs."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from edgebuild.build.stage import Context, Stage

if TYPE_CHECKING:  # stage modules stay import-light: a no-op build never loads pydantic
    from edgebuild.core.jsontypes import JSON, JSONObject
    from edgebuild.pipeline.validation import Checked


def config(checked: Checked) -> JSONObject:
    """The model section with defaults resolved; `doc` strings never trigger a rebuild."""
    model = checked.manifest.model.model_dump(mode="json", exclude={"layers": {"__all__": {"doc"}}})
    return {"model": model}


def run(ctx: Context[Checked]) -> None:
    from edgebuild.model import graph as graphs

    # built here, not taken from validation (whose code keys no stage): the shape and MAC
    # arithmetic that writes graph.json is then this stage's code
    manifest = ctx.checked.manifest
    graph, problems = graphs.build(manifest.model.input, manifest.model.layers)
    assert graph is not None and not problems  # validation built the same graph
    (ctx.out / "graph.json").write_text(json.dumps(graph.to_json(), indent=1) + "\n")
    (ctx.out / "model.json").write_text(_dumps(ctx.checked.manifest.model.to_json()))
    print(graphs.table(graph), file=sys.stderr)


def _dumps(obj: JSON) -> str:
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


STAGE = Stage("validate", (), config, run,
              "resolve defaults; infer each layer's shape, parameters and MACs",
              artifacts={"graph.json": "graph.v1", "model.json": "model.v1"}, facets=())
