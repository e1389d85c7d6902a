"""The imported manifest as YAML text: one flow mapping per layer and placement entry, with
the network layer each comes from as a comment.
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "none", "y", "n"}


def _scalar_text(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if key in ("processors", "output_processors"):
            return f"0x{value:016x}"
        if key in ("in_offset", "out_offset"):
            return f"0x{value:04x}"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED_WORDS:
        return text
    import json

    return json.dumps(text)


def flow(value: Any, key: str = "") -> str:
    """YAML flow text of plain data (mappings keep their order)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v, k)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v, key) for v in value) + "]"
    return _scalar_text(value, key)


def manifest_text(manifest: dict[str, Any], header: list[str], notes: dict[str, str]) -> str:
    lines = [f"# {line}" if line else "#" for line in header]
    lines.append(f"name: {manifest['name']}")
    model = manifest["model"]
    lines.append("model:")
    lines.append(f"  input: {flow(list(model['input']))}")
    if "weights" in model:
        lines.append(f"  weights: {_scalar_text(model['weights'])}")
    lines.append("  layers:")
    for layer in model["layers"]:
        note = notes.get(layer["name"])
        lines.append(f"    - {flow(layer)}" + (f"  # {note}" if note else ""))
    if manifest.get("qat"):
        lines.append("qat:")
        lines.append("  overrides:  # the description's `quantization` (weight bits)")
        for name, entry in manifest["qat"]["overrides"].items():
            lines.append(f"    {name}: {flow(entry)}")
    lines.append("target:")
    lines.append(f"  device: {manifest['target']['device']}")
    if manifest.get("placement"):
        lines.append("placement:")
        for name, entry in manifest["placement"].items():
            lines.append(f"  {name}: {flow(entry)}")
    if manifest.get("kat"):
        lines.append(f"kat: {flow(manifest['kat'])}")
    return "\n".join(lines) + "\n"
