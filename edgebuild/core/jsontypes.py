"""Plain JSON data, as a type: what stage configs, cache key material, state records and
the lock file hold (everything `json.dumps` writes and `json.loads` gives back)."""

from __future__ import annotations

from typing import TypeAlias

JSON: TypeAlias = None | bool | int | float | str | list["JSON"] | dict[str, "JSON"]
JSONObject: TypeAlias = dict[str, JSON]
