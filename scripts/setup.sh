#!/usr/bin/env bash
# Installs, with apt, only the Debian packages nabla needs that are missing. Idempotent: on a
# machine that has everything it changes nothing and needs no network.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's dnnl-config.cmake requires OpenCL (its GPU runtime), a Recommends
# that --no-install-recommends skips.

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev catch2 libfmt-dev zlib1g-dev nlohmann-json3-dev
  libcli11-dev clang-format libgraphviz-dev libdnnl-dev ocl-icd-opencl-dev
  clang libclang-rt-14-dev libomp-14-dev
  libcairo2-dev libpango1.0-dev libfontconfig-dev fonts-dejavu-core libexpat1-dev
  dataset-fashion-mnist
  fortunes fortunes-min fortunes-de fortunes-es fortunes-it fortunes-br fortunes-cs fortunes-pl
  fortunes-ru
  bible-kjv
  libcpp-httplib-dev
  libopenmpi-dev openmpi-bin
)
# Extra groups: `setup.sh --torch` adds PyTorch for fixtures and benchmarks.
if [[ " $* " == *" --torch "* ]]; then packages+=(python3-torch python3-numpy); fi
# `setup.sh --browser` adds chromium: the page tests of nabla-serve (langid, ViT) run it headless.
if [[ " $* " == *" --browser "* ]]; then packages+=(chromium); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# festlex-cmu (seq2seq_attention --task g2p) is unpacked, not installed: it depends on festival.
# Only that example needs it, so a machine without a mirror still builds and tests.
if [[ ! -s /usr/share/festival/dicts/cmu/cmudict-0.4.out ]]; then
  bash "$(dirname "$0")/get-cmudict.sh" >/dev/null ||
    echo "setup: warning: could not unpack festlex-cmu; seq2seq_attention --task g2p needs it"
fi
