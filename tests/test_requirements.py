"""The pinned environment (requirements/*.txt, written by requirements/lock.sh) agrees with
pyproject.toml and is what the README installs.

Read statically, with `packaging`: a dependency added, removed or re-ranged in
pyproject.toml without re-running lock.sh fails here, naming it, whatever is installed.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCKS = REPO / "requirements"
EXTRAS = ("test", "s3", "dask")  # what test.txt resolves beside the dependencies
# left out of main.txt/test.txt by lock.sh (--no-emit-package): the README installs it alone
UNEMITTED = {"torch"}
SELF = "edgebuild"


@dataclass(frozen=True)
class Pin:
    version: Version
    hashes: tuple[str, ...]
    via: tuple[str, ...]  # who asked for it: package names, or "edgebuild" for pyproject


def read_lock(path: Path) -> dict[str, Pin]:
    """{canonical name: Pin} of a `uv pip compile --generate-hashes` file."""
    pins: dict[str, Pin] = {}
    for block in re.split(r"\n(?=\S)", path.read_text().strip()):
        head = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if head is None:
            assert block.startswith("#"), f"{path.name}: cannot read {block[:60]!r}"
            continue
        via = re.findall(r"#\s+(?:via\s+)?([A-Za-z0-9._-]+)(?: \(|\s*$)", block, re.M)
        pins[canonicalize_name(head.group(1))] = Pin(
            Version(head.group(2)), tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)),
            tuple(canonicalize_name(name) for name in via if name != "via"))
    return pins


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def requirements(*extras: str) -> list[Requirement]:
    """pyproject's dependencies (and `extras`) that apply to this Python and platform."""
    project = pyproject()["project"]
    listed = project["dependencies"] + [r for e in extras
                                        for r in project["optional-dependencies"][e]]
    found = [Requirement(text) for text in listed]
    return [r for r in found if r.marker is None or r.marker.evaluate({"extra": ""})]


@pytest.fixture(scope="module")
def locks() -> dict[str, dict[str, Pin]]:
    return {name: read_lock(LOCKS / f"{name}.txt") for name in ("main", "test", "data")}


def reader():
    """.ci/readme_commands.py, the module CI reads the README's commands with."""
    spec = importlib.util.spec_from_file_location("readme_commands",
                                                  REPO / ".ci" / "readme_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_commands() -> dict[str, str]:
    return reader().commands((REPO / "README.md").read_text())


@pytest.mark.parametrize(("lock", "extras"), [("main", ()), ("test", EXTRAS)])
def test_every_dependency_is_pinned_within_its_range(locks, lock, extras):
    pins = locks[lock]
    wrong = []
    for requirement in requirements(*extras):
        name = canonicalize_name(requirement.name)
        if name in UNEMITTED:
            continue
        pin = pins.get(name)
        if pin is None:
            wrong.append(f"{requirement} is not in requirements/{lock}.txt")
        elif not requirement.specifier.contains(pin.version, prereleases=True):
            wrong.append(f"{requirement}: requirements/{lock}.txt pins {pin.version}")
    assert not wrong, "pyproject.toml and the lock disagree (run requirements/lock.sh):\n" \
        + "\n".join(wrong)


@pytest.mark.parametrize(("lock", "extras"), [("main", ()), ("test", EXTRAS)])
def test_the_lock_holds_only_what_pyproject_asks_for(locks, lock, extras):
    """A package pyproject names directly is `via edgebuild`; every other pin is asked for
    by a pinned package (or torch): nothing stale survives a removed dependency."""
    pins = locks[lock]
    direct = {canonicalize_name(r.name) for r in requirements(*extras)}
    said_direct = {name for name, pin in pins.items() if SELF in pin.via}
    assert said_direct == direct - UNEMITTED, (
        f"requirements/{lock}.txt was resolved from other dependencies than pyproject.toml's "
        f"(run requirements/lock.sh): only in the lock {sorted(said_direct - direct)}, only in "
        f"pyproject {sorted(direct - UNEMITTED - said_direct)}")
    orphans = {name: pin.via for name, pin in pins.items()
               if not pin.via or not set(pin.via) <= set(pins) | UNEMITTED | {SELF}}
    assert not orphans, f"requirements/{lock}.txt: pins asked for by nothing pinned: {orphans}"


def test_main_is_the_test_environment_without_the_extras(locks):
    main, test = locks["main"], locks["test"]
    assert set(main) <= set(test)
    assert {n: str(p.version) for n, p in main.items() if test[n].version != p.version} == {}


def test_every_pin_has_hashes(locks):
    """pip's --require-hashes mode: a file on the index that changed is refused."""
    assert {f"{lock}:{name}" for lock, pins in locks.items() for name, pin in pins.items()
            if not pin.hashes} == set()


def test_the_build_backend_is_pinned(locks):
    """`pip install --no-build-isolation .` builds with the lock's setuptools."""
    requires = [Requirement(r) for r in pyproject()["build-system"]["requires"]]
    for requirement in requires:
        pin = locks["main"].get(canonicalize_name(requirement.name))
        assert pin is not None and requirement.specifier.contains(pin.version), requirement


def test_the_data_packages_edgebuild_reads_are_pinned(locks):
    """Every `package:` an example reads its data from, installed by data.txt."""
    used = set(re.findall(r"package: *([A-Za-z0-9_]+)", "".join(
        p.read_text() for p in EXAMPLES.glob("*.yaml")))) | {"sklearn"}
    from edgebuild.data.dataset import DISTRIBUTIONS

    assert {canonicalize_name(DISTRIBUTIONS.get(m, m)) for m in used} <= set(locks["data"])


def test_the_readme_installs_the_lock():
    commands = readme_commands()
    for name, lock in (("main", "main"), ("test", "test")):
        command = commands[name]
        assert (f"pip install --require-hashes --no-deps -r requirements/{lock}.txt "
                "-r requirements/data.txt") in command, command
        assert "pip install --no-deps --no-build-isolation ." in command, command
        torch = re.search(r"pip install torch==(\S+)", command)
        assert torch is not None, command
        spec = next(r.specifier for r in requirements() if r.name == "torch")
        assert spec.contains(torch.group(1)), f"README torch=={torch.group(1)} vs {spec}"
        lock_sh = (LOCKS / "lock.sh").read_text()
        assert f"torch=={torch.group(1)}+cpu" in lock_sh, "lock.sh resolves another torch"


def test_the_readme_command_reader_refuses_what_it_cannot_run():
    """CI runs what the reader returns: a README without a marked one-line block is an error,
    not an empty command."""
    module = reader()
    block = "<!-- set-up: {} -->\n\n```sh\n{}\n```\n"
    good = block.format("main", "pip install . && edgebuild") + block.format("test", "pytest")
    assert module.commands(good) == {"main": "pip install . && edgebuild", "test": "pytest"}
    for bad, says in [(block.format("main", "x"), "no `<!-- set-up: NAME -->` block"),
                      (good + block.format("test", "y"), "two set-up blocks"),
                      (good.replace("pytest", "pip install .\npytest"), "more than one line")]:
        with pytest.raises(ValueError, match=says):
            module.commands(bad)
