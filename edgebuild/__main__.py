"""`python -m edgebuild` is the same as the `edgebuild` console script."""

from edgebuild.cli import entry

entry()
