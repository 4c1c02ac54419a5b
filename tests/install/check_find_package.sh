#!/usr/bin/env bash
# Installs the built nabla into a temporary prefix, then configures, builds and runs the README's
# "write your own model" program (examples/user_project) out of tree with find_package(nabla).
# Usage: check_find_package.sh <nabla build dir> <nabla source dir> [extra cmake args...]
set -euo pipefail
build=$1 src=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/user_project" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" "$@" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/my_model"
