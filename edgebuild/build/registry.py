"""The stages the engine builds, and how it loads a manifest: registered by the package
that defines them, never imported by name from the engine (`edgebuild.build` imports only
`core` and itself; tests/test_architecture.py).

`STAGES` is empty until the stage package registers its stages (in pipeline order) and its
`Provider`. The first read of an empty registry imports that package by the name in
`PROVIDER`, so any process — a doit worker, a Dask worker, a test — that reaches the
engine finds the stages without importing them itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Container, Iterator, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.build.checked import Checked
from edgebuild.build.stage import Stage

# The module that registers the stages and the provider when imported.
PROVIDER = "edgebuild.pipeline.stages"


def _none(name: str) -> str | None:
    return None


@dataclass(frozen=True)
class Provider:
    """What the engine asks of the package that defines the stages.

    `load` / `load_all`: a manifest's checked form for one target / for every target (the
    full, slow path; a no-op build never calls them). `generated`: the text the code makes
    of a generated artifact schema (None: written by hand), for the stale-schema message
    (build.contracts). `stage_modules`: the package whose module `<stage_modules>.<stage>`
    holds each stage, where its code key starts (build.sources); `not_followed`: modules
    whose imports the code key does not follow, because what flows along them is keyed by
    value (the manifest checker: its result is the stage's config)."""

    load: Callable[[Path, str | None, str | None], Checked]
    load_all: Callable[[Path, str | None], Sequence[Checked]]
    stage_modules: str
    not_followed: frozenset[str] = frozenset()
    generated: Callable[[str], str | None] = _none


class Registry(MutableMapping[str, Stage[Any]]):
    """Stage name -> Stage, in pipeline order; loads the provider on first use."""

    def __init__(self) -> None:
        self._stages: dict[str, Stage[Any]] = {}
        self._provider: Provider | None = None

    def _loaded(self) -> dict[str, Stage[Any]]:
        if not self._stages:
            importlib.import_module(PROVIDER)
        return self._stages

    def register(self, stages: Sequence[Stage[Any]], provider: Provider) -> None:
        """The stage package's one call: its stages, in pipeline order, and its provider."""
        self._stages.update((stage.name, stage) for stage in stages)
        self._provider = provider

    def provider(self) -> Provider:
        self._loaded()
        if self._provider is None:
            raise RuntimeError(f"{PROVIDER} registered no provider")
        return self._provider

    def __getitem__(self, name: str) -> Stage[Any]:
        return self._loaded()[name]

    def __setitem__(self, name: str, stage: Stage[Any]) -> None:
        self._loaded()[name] = stage

    def __delitem__(self, name: str) -> None:
        del self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded()


STAGES = Registry()


def provider() -> Provider:
    return STAGES.provider()


def upstream(stage: Stage[Any], active: Container[str]) -> tuple[str, ...]:
    """The stage's upstream stages that exist for a manifest (`active`: applicable names)."""
    return tuple(name for name in stage.upstream if name in active)


def closure(target: str) -> list[str]:
    """`target` and everything upstream of it, in pipeline order."""
    needed = {target}
    for name in reversed(list(STAGES)):
        if name in needed:
            needed.update(STAGES[name].upstream)
    return [name for name in STAGES if name in needed]
