#!/usr/bin/env bash
# Unpacks the CMU Pronouncing Dictionary from Debian's festlex-cmu for seq2seq_attention --task
# g2p. `dpkg -x` extracts the .deb without installing it, so festival is not pulled in.
# Prints the directory to pass as --cmu-dir (the example also looks there by default).
set -euo pipefail
dest=${NABLA_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nabla}/festlex-cmu
dict=$dest/usr/share/festival/dicts/cmu
if [[ ! -s $dict/cmudict-0.4.out ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && apt-get download festlex-cmu >/dev/null 2>&1); then
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
    "${sudo_cmd[@]}" apt-get update -qq
    (cd "$tmp" && apt-get download festlex-cmu >/dev/null)
  fi
  mkdir -p "$dest"
  dpkg -x "$tmp"/festlex-cmu_*.deb "$tmp/x"
  rm -rf "$dest/usr" && mv "$tmp/x/usr" "$dest/usr"
fi
echo "$dict"
