"""JSON read with limits that apply before the parser runs: size and nesting depth.

Every JSON file edgebuild reads may come from somewhere it does not control: a shared
remote cache, a cache directory another user can write, a lock file in a pull request.
`json.loads` of a document nested 100,000 deep raises RecursionError (an internal error
that stuck: every build, `status` and `cache verify` failed until the file was deleted
by hand), and a 2 GB file is read whole. Here the size is checked before reading more
than the limit, and the depth by one linear scan over the brackets outside strings
before parsing; both raise `JSONLimitError`, a ValueError, so every caller that already
treats malformed JSON as "no entry" or as a user error treats these the same way.

Nothing edgebuild writes nests deeper than a dozen levels (a cache entry's key material:
settings inside layers inside the model inside the config).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

MAX_DEPTH = 64
MAX_BYTES = 64 * 1024 * 1024  # the largest lock or index of a project of thousands of manifests

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


class JSONLimitError(ValueError):
    """A JSON document over a limit: `str()` says which, without a file name (the caller
    adds it where it reports one)."""


def depth(text: str) -> int:
    """The deepest nesting of arrays and objects, counting brackets outside strings."""
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    deepest = level = 0
    for char in brackets:
        if char in "[{":
            level += 1
            deepest = max(deepest, level)
        else:
            level -= 1
    return deepest


def loads(data: str | bytes, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """`json.loads`, refusing a document over `max_bytes` or nested over `max_depth`."""
    if len(data) > max_bytes:
        raise JSONLimitError(f"larger than {max_bytes} bytes")
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if depth(text) > max_depth:
        raise JSONLimitError(f"nested deeper than {max_depth} levels")
    return json.loads(text)


def read(path: Path | str, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON document in `path`, reading at most `max_bytes` + 1 bytes of it.
    OSError for a file that cannot be read; ValueError (JSONLimitError included) for one
    that is no JSON within the limits."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    return loads(data, max_depth, max_bytes)
