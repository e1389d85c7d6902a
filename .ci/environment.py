"""Is this Python's environment exactly what the README installed?  Run inside CI's venv.

    python .ci/environment.py requirements/test.txt requirements/data.txt

Exits 1 when this is not a virtual environment that hides the machine's own
site-packages, when a locked package is missing or at another version, or when something
is installed that no lock names (torch, edgebuild, and pip itself aside: the README
installs them by name). Standard library only.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

BY_NAME = {"torch", "edgebuild", "pip"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(paths: list[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in paths:
        for name, version in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", path.read_text(), re.M):
            found[canonical(name)] = version
    return found


def problems(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    wrong = [f"{name} {installed.get(name, 'missing')} (lock: {version})"
             for name, version in sorted(locked.items()) if installed.get(name) != version]
    extra = [f"{name} {version} (in no lock)" for name, version in sorted(installed.items())
             if name not in locked and name not in BY_NAME]
    return wrong + extra


def main(argv: list[str]) -> int:
    if sys.prefix == sys.base_prefix:
        print("not a virtual environment: CI installs into a new venv", file=sys.stderr)
        return 1
    outside = [p for p in sys.path if p.startswith(sys.base_prefix) and "site-packages" in p]
    if outside:
        print(f"the machine's site-packages are visible: {outside}", file=sys.stderr)
        return 1
    installed = {canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}
    wrong = problems(pins([Path(a) for a in argv]), installed)
    for line in wrong:
        print(f"not as locked: {line}", file=sys.stderr)
    if not wrong:
        print(f"{len(installed)} distributions in {sysconfig.get_paths()['purelib']}, "
              "each as locked")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
