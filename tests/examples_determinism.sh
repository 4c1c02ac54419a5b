#!/usr/bin/env bash
# The same seed and thread count give the same run: a trainer's --smoke run, twice in new
# processes, writes the same metrics.csv and a checkpoint with the same tensors, byte for byte.
# Usage: examples_determinism.sh <safetensors_equal binary> <trainer binary> [extra flags]
set -euo pipefail
exec "$(dirname "$0")/examples/same_run_with_flag.sh" "$1" "$2" - "${@:3}"
