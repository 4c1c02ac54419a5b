#!/usr/bin/env bash
# The README's run command: install what is missing, build optimised, run the main example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
./build/release/examples/transformer_langid/transformer_langid "$@"
