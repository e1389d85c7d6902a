"""Foundations every other package builds on: user-facing errors, the manifest's field types
and units, YAML documents that remember positions, the number format (numerics), shape and
window geometry, deterministic array files, and where shipped files are.

Owns no operator, stage or target. Imports nothing from edgebuild outside `core`.
"""
