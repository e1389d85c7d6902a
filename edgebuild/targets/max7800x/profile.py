"""Accelerator device profiles: the rules of a MAX7800x-style device, read from data.

Each `profiles/<name>.yaml` (core.resources.device_profiles) is one profile; its stem is a `target.device` value
(`DEVICE_NAMES`). Nothing about a device is written in code: operator limits, number format,
processors, data/kernel/bias memories all come from the file, so adding a device is adding
a file. Profiles are validated like manifests (strict, frozen records) when first used.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from edgebuild.core.resources import device_profiles

if TYPE_CHECKING:  # pydantic loads with the first profile read
    from edgebuild.targets.max7800x.records import Profile

DEVICE_NAMES: tuple[str, ...] = tuple(device_profiles())


def is_accelerator(device: str) -> bool:
    return device in DEVICE_NAMES


@functools.cache
def profile(name: str) -> Profile:
    """The validated profile of device `name` (a `records.Profile`)."""
    import yaml
    from pydantic import ValidationError

    from edgebuild.core.errors import UserError
    from edgebuild.targets.max7800x.records import Profile

    path = device_profiles()[name]
    try:
        return Profile.model_validate(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise UserError(f"{path}: invalid device profile: {exc}") from None
