"""The build engine, free of any domain: the content-hash cache and the shared remote
cache, the build tree, the lock file, claims, the no-op index, provenance, status, the
code keys (sources, definitions), the scheduler and the doit runner (the only importer of
doit). It learns the stages and how to check a manifest by registration
(`build.registry`), never by importing the package that defines them.

May import only `core` (not even for type checking; tests/test_architecture.py).
"""
