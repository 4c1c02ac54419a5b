#!/usr/bin/env bash
# Installs the built nabla into a temporary prefix, then configures, builds and runs the README's
# "write your own model" program (examples/user_project) out of tree with find_package(nabla).
# Usage: check_find_package.sh <nabla build dir> <nabla source dir> [extra cmake args...]
# NABLA_PROJECT and NABLA_PROGRAM pick another project (a folder of the source tree) and its program;
# NABLA_RUNNER, words put before the program (e.g. "mpiexec -np 2"), how to run it.
set -euo pipefail
build=$1 src=$2
project=${NABLA_PROJECT:-examples/user_project} program=${NABLA_PROGRAM:-my_model}
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Each step's output goes to a log that is printed when the step fails: Ninja reports compile
# and link errors on stdout, so discarding stdout would hide them.
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log"; echo "failed: $*" >&2; exit 1; }; }
quiet cmake --install "$build" --prefix "$work/prefix"
# Every header under <prefix>/include/nabla/: nothing generic (core/, data/) on a user's path.
top=$(ls "$work/prefix/include")
if [[ $top != nabla ]]; then
  echo "install: <prefix>/include holds '$top', expected only nabla/" >&2
  exit 1
fi
quiet cmake -S "$src/$project" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" "$@"
quiet cmake --build "$work/build"
read -ra runner <<<"${NABLA_RUNNER:-}"
"${runner[@]}" "$work/build/$program" || { rc=$?; echo "$program exited with status $rc" >&2; exit "$rc"; }
