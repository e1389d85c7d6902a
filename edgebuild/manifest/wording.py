"""Schema errors in edgebuild's voice: what was given, what is allowed, in plain words.

pydantic words its errors for Python programmers ("Input should be a valid integer,
unable to parse string as an integer"); a manifest's author wrote YAML. Each error type
that a manifest can meet gets a sentence here, built from the error's own context (the
bound, the allowed values, the given value); anything else keeps pydantic's text with its
"Input should be" turned into "expected".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Context = Mapping[str, Any]


def _given(value: object) -> str:
    """The offending value as the author wrote it (YAML spelling for the plain kinds)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _choices(expected: object) -> str:
    return str(expected).replace("'", "")


_PHRASES: dict[str, Callable[[Context], str]] = {
    "int_type": lambda c: "expected a whole number",
    "int_parsing": lambda c: "expected a whole number",
    "int_from_float": lambda c: "expected a whole number, not a fraction",
    "float_type": lambda c: "expected a number",
    "float_parsing": lambda c: "expected a number",
    "bool_type": lambda c: "expected true or false",
    "bool_parsing": lambda c: "expected true or false",
    "string_type": lambda c: "expected text",
    "list_type": lambda c: "expected a list",
    "tuple_type": lambda c: "expected a list",
    "dict_type": lambda c: "expected a mapping of keys to values",
    "model_type": lambda c: "expected a mapping of keys to values",
    "model_attributes_type": lambda c: "expected a mapping of keys to values",
    "greater_than": lambda c: f"must be greater than {c.get('gt')}",
    "greater_than_equal": lambda c: f"must be at least {c.get('ge')}",
    "less_than": lambda c: f"must be less than {c.get('lt')}",
    "less_than_equal": lambda c: f"must be at most {c.get('le')}",
    "literal_error": lambda c: f"must be one of {_choices(c.get('expected'))}",
    "enum": lambda c: f"must be one of {_choices(c.get('expected'))}",
    "too_short": lambda c: f"needs at least {c.get('min_length')} "
                           f"item{'s' if c.get('min_length') != 1 else ''}",
    "too_long": lambda c: f"takes at most {c.get('max_length')} "
                          f"item{'s' if c.get('max_length') != 1 else ''}",
    "string_too_short": lambda c: f"needs at least {c.get('min_length')} characters",
    "string_too_long": lambda c: f"takes at most {c.get('max_length')} characters",
    "string_pattern_mismatch": lambda c: f"must match the pattern {c.get('pattern')}",
}


def phrase(kind: str, message: str, ctx: Context | None, given: object) -> str:
    """One error as a sentence: the rule, then what was given."""
    make = _PHRASES.get(kind)
    if make is None:
        text = message.replace("Input should be", "expected").replace("Input should have",
                                                                       "expected")
        return text
    return f"{make(ctx or {})}, got {_given(given)}"
