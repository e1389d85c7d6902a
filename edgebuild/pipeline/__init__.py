"""Checking manifests (`validation`) and the stages (one module each), registered with
the build engine (`edgebuild.build`) when `pipeline.stages` is imported.

May import every package but `cli`.
"""
