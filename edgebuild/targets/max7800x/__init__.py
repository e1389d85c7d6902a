"""MAX78000 / MAX78002 CNN accelerators. Every figure about a device comes from its
profile (`profiles/<device>.yaml`, read by `profile`); the modules hold only the rules.

May import what `edgebuild.targets` may.
"""
