#!/usr/bin/env bash
# The README's test command: install what is missing, build with warnings as errors, run every
# test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset dev >/dev/null
cmake --build --preset dev
ctest --preset dev -j2 "$@"
