"""What a stage is: a pure function from (its config, upstream artifacts) to one directory."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from edgebuild.build.checked import Checked
from edgebuild.build.definitions import Cut
from edgebuild.core.jsontypes import JSONObject

# The checked manifest's type: the engine knows only the `Checked` protocol; a stage
# package's stages take its own, fuller record (pipeline.validation.Checked).
C = TypeVar("C", bound=Checked)

# A directory of this name anywhere in a stage's output belongs to the user: the generated
# Makefiles put what `make` builds there. It is not part of the artifact — not tracked,
# hashed, copied into later stages nor lost when the stage is restored.
SCRATCH = "build"


def scratch(directory: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s `ignore`: leave the user's build products behind."""
    return {SCRATCH} & set(names)


@dataclass(frozen=True)
class Context(Generic[C]):
    """Everything a stage's `run` may read. It writes only below `out`."""

    checked: C
    out: Path
    inputs: dict[str, Path]
    cache_root: Path
    build_dir: Path
    stage: str = ""  # the stage's name, for the lines that must say where they come from

    def log(self, message: str) -> None:
        """Progress for people, on stderr (stdout belongs to `--json`)."""
        print(message, file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """Something the user should act on although the stage succeeded: one line naming
        the build and the stage (`warning: digits.quantize: ...`), since with several
        manifests and `-j` the line around it need not be its own."""
        self.log(warning(f"{self.checked.name}.{self.stage}", message))


def warning(where: str, message: str) -> str:
    """The one form of a build's warnings: `warning: <manifest>[/<target>].<stage>: ...`."""
    return f"warning: {where}: {message}"


@dataclass(frozen=True)
class Stage(Generic[C]):
    """`config` returns the plain-JSON settings that key the cache (defaults resolved,
    cosmetic fields left out); `files` the data files whose *content* also keys it;
    `tools` names packages whose versions change outputs; `artifacts` maps each JSON file
    the stage writes to the versioned schema it must match (`plan.json` -> `plan.v1`:
    schemas/artifacts/plan.v1.schema.json), checked after `run` (build.contracts)."""

    name: str
    upstream: tuple[str, ...]
    config: Callable[[C], JSONObject]
    run: Callable[[Context[C]], None]
    summary: str
    tools: tuple[str, ...] = ()
    files: Callable[[C], list[Path]] = lambda checked: []
    exports: tuple[str, ...] = ()  # files also copied to build/<name>/ itself
    # Whether the stage exists for a manifest: an imported model with pre-quantized weights
    # has no training stages, a model without a dataset no data stage. Upstream stages that
    # do not apply are simply absent from `Context.inputs`.
    applies: Callable[[C], bool] = lambda checked: True
    artifacts: dict[str, str] = field(default_factory=dict)
    # The operator record's facets (ops.operator.Operator fields) the stage's code reads
    # besides IDENTITY; the others are left out of its code key (build.definitions).
    # None: every facet. tests/test_facets.py runs the stages and fails on a facet read
    # that is not declared.
    facets: tuple[str, ...] | None = None

    def cut(self) -> Cut:
        """What of the operator records this stage's code key leaves out."""
        keep = None if self.facets is None else IDENTITY | frozenset(self.facets)
        return Cut("Operator", keep)


# The fields of an operator record every stage may read: what a layer is (its op, record,
# role, arity and shape arithmetic), not how a facet computes it.
IDENTITY = frozenset({"name", "params", "arity", "role", "out_shape", "param_count", "macs",
                      "l2_traffic"})
