#!/usr/bin/env bash
# --resume with a checkpoint written by another configuration must stop with an error naming
# both configurations, before any tensor is loaded.
# Usage: examples_g2p_other_config.sh <transformer_g2p binary>
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" --smoke --threads 1 --out "$work/run" --stop-after 1 >/dev/null
if "$bin" --smoke --threads 1 --out "$work/run" --resume --d-model 16 >"$work/log" 2>&1; then
  echo "other config: the resumed run did not fail"; exit 1
fi
cat "$work/log"
