#!/usr/bin/env bash
# Re-resolve the pinned environment after editing pyproject.toml's dependencies:
#     requirements/lock.sh        (needs `uv`: pip install uv; the registries, no other network)
# Writes, with sha256 hashes of every file pip may install:
#   test.txt  pyproject's dependencies + the test, s3 and dask extras: the test command's set
#   main.txt  pyproject's dependencies alone, at test.txt's versions (resolved under it)
#   data.txt  the packages edgebuild reads data files from, without their dependencies
# torch is left out of main/test (--no-emit-package): the README installs torch==2.13.0 by
# itself, a CPU build that pip takes from this machine's disk; it is resolved here as that
# build (its metadata, from --find-links, names no CUDA packages) so its dependencies are
# pinned like everything else. tests/test_requirements.py fails when pyproject.toml and the lock disagree.
set -euo pipefail
cd "$(dirname "$0")"
TORCH=${EDGEBUILD_TORCH_WHEELS:-/opt/wheels}
common=(--python-version 3.11 --generate-hashes --no-header --quiet)
echo "torch==2.13.0+cpu" > /tmp/edgebuild-torch-pin.txt
uv pip compile ../pyproject.toml --extra test --extra s3 --extra dask "${common[@]}" \
    --find-links "$TORCH" -c /tmp/edgebuild-torch-pin.txt --no-emit-package torch -o test.txt
uv pip compile ../pyproject.toml "${common[@]}" \
    --find-links "$TORCH" -c /tmp/edgebuild-torch-pin.txt -c test.txt --no-emit-package torch -o main.txt
uv pip compile data.in "${common[@]}" --no-deps -o data.txt
rm -f /tmp/edgebuild-torch-pin.txt
