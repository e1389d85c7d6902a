"""Accelerator device profiles: the rules of a MAX7800x-style device, read from data.

Each `edgebuild/devices/<name>.yaml` is one profile; its stem is a `target.device` value
(`DEVICE_NAMES`). Nothing about a device is written in code: operator limits, number format,
processors, data/kernel/bias memories all come from the file, so adding a device is adding
a file. Profiles are validated like manifests (strict, frozen records) when first used.
"""

from __future__ import annotations

import functools
from pathlib import Path

DEVICES_DIR = Path(__file__).resolve().parent / "devices"


def _names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in DEVICES_DIR.glob("*.yaml")))


DEVICE_NAMES: tuple[str, ...] = _names()


def is_accelerator(device: str) -> bool:
    return device in DEVICE_NAMES


@functools.cache
def profile(name: str):
    """The validated profile of device `name` (a `records.Profile`)."""
    import yaml
    from pydantic import ValidationError

    from edgebuild.device_records import Profile
    from edgebuild.errors import UserError

    path = DEVICES_DIR / f"{name}.yaml"
    try:
        return Profile.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise UserError(f"{path}: invalid device profile: {exc}") from None
