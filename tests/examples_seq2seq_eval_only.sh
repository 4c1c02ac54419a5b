#!/usr/bin/env bash
# seq2seq_attention --eval-only: a finished g2p smoke run's checkpoint, scored in a new process
# without training, gives exactly the run's own final scores (greedy and beam search); a
# checkpoint of another variant is refused naming the flags; no checkpoint, an error naming it.
# Usage: examples_seq2seq_eval_only.sh <seq2seq_attention binary>
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--smoke --task g2p --threads 1 --rnn lstm --bidirectional --beam 3)
scores() { grep -o 'RESULT .* params=[0-9]*' "$1"; }  # the line without its timing
"$bin" "${flags[@]}" --out "$work/run" > "$work/train.log"
"$bin" "${flags[@]}" --out "$work/run" --eval-only > "$work/eval.log"
grep -q 'eval_only=1' "$work/eval.log" || { echo "eval-only: no RESULT ... eval_only=1"; exit 1; }
if [ "$(scores "$work/train.log")" != "$(scores "$work/eval.log")" ]; then
  echo "eval-only: scores differ"
  echo "training run: $(scores "$work/train.log")"
  echo "eval-only:    $(scores "$work/eval.log")"
  exit 1
fi
if "$bin" --smoke --task g2p --threads 1 --out "$work/run" --eval-only > "$work/other.log" 2>&1; then
  echo "eval-only: another variant's checkpoint was accepted"; exit 1
fi
grep -q "error: EncoderDecoder: the checkpoint is a '--rnn lstm --attention bahdanau --bidirectional' model and this one is '--rnn gru --attention bahdanau': --rnn and --bidirectional differ" \
  "$work/other.log" || { echo "eval-only: unexpected error:"; cat "$work/other.log"; exit 1; }
if "$bin" --smoke --task g2p --threads 1 --out "$work/none" --eval-only > "$work/none.log" 2>&1; then
  echo "eval-only: ran without a checkpoint"; exit 1
fi
grep -q "error: seq2seq_attention: --eval-only needs .*/none/checkpoint.safetensors" "$work/none.log" ||
  { echo "eval-only: unexpected error:"; cat "$work/none.log"; exit 1; }
echo "eval-only: identical scores ($(scores "$work/eval.log")); other variant and no checkpoint refused"
