#!/usr/bin/env bash
# Installs the built nabla into a temporary prefix, then configures, builds and runs the README's
# "write your own model" program (examples/user_project) out of tree with find_package(nabla).
# Usage: check_find_package.sh <nabla build dir> <nabla source dir> [extra cmake args...]
# NABLA_PROJECT and NABLA_PROGRAM pick another project (a folder of the source tree) and its program.
set -euo pipefail
build=$1 src=$2
project=${NABLA_PROJECT:-examples/user_project} program=${NABLA_PROGRAM:-my_model}
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Every header under <prefix>/include/nabla/: nothing generic (core/, data/) on a user's path.
top=$(ls "$work/prefix/include")
if [[ $top != nabla ]]; then
  echo "install: <prefix>/include holds '$top', expected only nabla/" >&2
  exit 1
fi
cmake -S "$src/$project" -B "$work/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" "$@" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/$program"
