"""The build: checking manifests, the stages (one module each), the content-hash cache,
the build tree, the lock file, status, and the doit runner (the only importer of doit).

May import every package but `cli`.
"""
