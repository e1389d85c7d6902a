"""Accelerator device profiles, one YAML file each (`edgebuild/device.py` reads them).

Adding a device is adding a file here: its stem becomes a `target.device` value.
"""
