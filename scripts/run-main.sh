#!/usr/bin/env bash
# The README's run command: install what is missing, build the main example optimised (only
# what it needs), run it with its defaults. Extra arguments go to the trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target transformer_langid
./build/release/examples/transformer_langid/transformer_langid "$@"
