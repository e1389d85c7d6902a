"""The README's set-up commands, read from README.md: CI runs them, never a copy of them.

    python3 .ci/readme_commands.py main|test     prints that command (one shell line)

Each command is the first ```sh block after a `<!-- set-up: NAME -->` line in README.md.
Standard library only: it runs before the environment it describes exists.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
NAMES = ("main", "test")


def commands(text: str) -> dict[str, str]:
    """{name: command} for every marked block; a marker without its block is an error."""
    found: dict[str, str] = {}
    for match in re.finditer(r"<!-- set-up: (\w+) -->\n+```sh\n(.*?)\n```", text, re.S):
        name, body = match.group(1), match.group(2).strip()
        if name in found:
            raise ValueError(f"README.md: two set-up blocks named {name!r}")
        if "\n" in body:
            raise ValueError(f"README.md: the {name!r} set-up block is more than one line")
        found[name] = body
    missing = [name for name in NAMES if name not in found]
    if missing:
        raise ValueError(f"README.md: no `<!-- set-up: NAME -->` block for {missing}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in NAMES:
        print(f"usage: {Path(__file__).name} {'|'.join(NAMES)}", file=sys.stderr)
        return 2
    try:
        print(commands(README.read_text())[argv[0]])
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
