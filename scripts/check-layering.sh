#!/usr/bin/env bash
# Fails on any #include against the layer order of docs/architecture.md: core includes nothing
# from ops, nn, optim or data; ops only core; nn only ops and core; optim only ops and core; data
# only core; no layer includes nabla.h or examples/. Also: only ops/gemm.cpp (GEMM) and
# core/parallel.cpp (OpenBLAS's thread count) include cblas.h.
# The CMake targets cannot enforce this themselves: every layer's includes are written as
# "nabla/<layer>/...", and one include directory (build/include/nabla -> the repository root) serves all.
#   check-layering.sh [source dir]   check the tree (default: this script's repository)
#   check-layering.sh --self-test    check that each kind of wrong include is caught
set -euo pipefail

declare -A allowed=(
  [core]="core"
  [ops]="core ops"
  [nn]="core ops nn"
  [optim]="core ops optim"
  [data]="core data"
)
cblas_users=" core/parallel.cpp ops/gemm.cpp "

# Prints one line per wrong include under $1; returns 1 if there is any.
check() {
  local root=$1 bad=0 layer file line text target
  for layer in core ops nn optim data; do
    [[ -d $root/$layer ]] || continue
    while IFS=: read -r file line text; do
      file=${file#"$root"/}
      if [[ $text =~ \#[[:space:]]*include[[:space:]]*[\<\"]cblas\.h[\>\"] ]]; then
        if [[ $cblas_users != *" $file "* ]]; then
          echo "$file:$line: includes cblas.h; only${cblas_users% } may (docs/architecture.md)"
          bad=1
        fi
        continue
      fi
      [[ $text =~ \#[[:space:]]*include[[:space:]]*[\<\"]([^\>\"]+)[\>\"] ]] || continue
      target=${BASH_REMATCH[1]}
      target=${target#nabla/}
      case $target in
        nabla.h | examples/*)
          echo "$file:$line: $layer includes $target: a layer includes only the layers below it"
          bad=1
          ;;
        core/* | ops/* | nn/* | optim/* | data/*)
          if [[ " ${allowed[$layer]} " != *" ${target%%/*} "* ]]; then
            echo "$file:$line: $layer includes $target; $layer may include only ${allowed[$layer]}"
            bad=1
          fi
          ;;
      esac
    done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include' "$root/$layer" \
      --include='*.h' --include='*.cpp' || true)
  done
  return $bad
}

self_test() {
  local tmp failures=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # Each case: a file, the include it gets, and whether the check must refuse it.
  local cases=(
    "core/a.h|#include \"nabla/ops/softmax.h\"|refuse"
    "core/a.cpp|#include \"nabla/nn/module.h\"|refuse"
    "ops/a.cpp|#include \"nabla/nn/linear.h\"|refuse"
    "ops/a.cpp|#include \"nabla/data/idx.h\"|refuse"
    "nn/a.cpp|#include \"nabla/optim/sgd.h\"|refuse"
    "nn/a.cpp|#include \"nabla/data/text.h\"|refuse"
    "optim/a.h|#include \"nabla/nn/module.h\"|refuse"
    "data/a.cpp|#include \"nabla/ops/reduce.h\"|refuse"
    "data/a.cpp|#include <nabla/nn/module.h>|refuse"
    "ops/a.cpp|#include \"nabla/nabla.h\"|refuse"
    "nn/a.cpp|#include \"examples/common/cli.h\"|refuse"
    "ops/a.cpp|#include <cblas.h>|refuse"
    "ops/a.cpp|  #  include \"nabla/nn/linear.h\"|refuse"
    "ops/gemm.cpp|#include <cblas.h>|accept"
    "core/parallel.cpp|#include <cblas.h>|accept"
    "ops/a.cpp|#include \"nabla/core/tensor.h\"|accept"
    "nn/a.cpp|#include \"nabla/ops/linear.h\"|accept"
    "optim/a.cpp|#include \"nabla/ops/reduce.h\"|accept"
    "data/a.cpp|#include \"nabla/core/tensor.h\"|accept"
    "core/a.cpp|#include <vector>|accept"
  )
  local c file include expect got
  for c in "${cases[@]}"; do
    IFS='|' read -r file include expect <<<"$c"
    rm -rf "${tmp:?}"/*
    mkdir -p "$tmp/$(dirname "$file")"
    printf '// a file\n%s\n' "$include" >"$tmp/$file"
    if check "$tmp" >/dev/null; then got=accept; else got=refuse; fi
    if [[ $got != "$expect" ]]; then
      echo "self-test: $file with '$include': expected $expect, got $got"
      failures=1
    fi
  done
  if ((failures)); then return 1; fi
  echo "layering self-test: ${#cases[@]} cases as expected"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
  exit
fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
if check "$root"; then
  echo "layering: every include follows core <- ops <- nn/optim, core <- data"
else
  echo "layering: wrong-direction includes (see docs/architecture.md)"
  exit 1
fi
