"""What the engine needs of a checked manifest, as Protocols: the engine never imports the
package that checks manifests (`edgebuild.pipeline.validation`, which loads pydantic), so
it names only the attributes it reads. `pipeline.validation.Checked` satisfies `Checked`;
the stages, which read all of it, see their own type (`build.stage.Stage` is generic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from edgebuild.core.document import Document


class Graph(Protocol):
    """The model's graph, as far as a build's summary reads it."""

    @property
    def nodes(self) -> Sequence[object]: ...

    @property
    def params(self) -> int: ...

    @property
    def macs(self) -> int: ...


class Checked(Protocol):
    """A manifest that passed every check, for one target: what names its build, where it
    is, and the summary `check` prints."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def target(self) -> str | None: ...

    @property
    def document(self) -> Document: ...

    @property
    def graph(self) -> Graph: ...

    @property
    def warnings(self) -> tuple[str, ...]: ...
