#!/usr/bin/env bash
# BERT against Hugging Face transformers: trains a small BERT for a few iterations on the
# bundled corpus (f32, no dropout), exports the checkpoint of iteration N-1 with
# `megatron convert --to hf`, and has transformers' MegatronBertForPreTraining score iteration
# N's global batch: its LM and sentence-order losses must equal the ones megatron logged for
# iteration N (same weights, before that update) within 1e-4 relative. The vocabulary is not
# padded (make_vocab_size_divisible_by=1): Megatron's softmax runs over the padded rows too, which
# Hugging Face does not have.
#
#   scripts/bench/bert_hf.sh [--layers L] [--hidden H] [--heads A] [--seq S]
#
# Builds nothing: expects build/default/bin/megatron (MEGATRON overrides). Makes (or reuses)
# the venv of hf_interop.sh (build/hf-venv: system torch, transformers 4.38.2).
set -euo pipefail
cd "$(dirname "$0")/../.."

layers=2
hidden=128
heads=4
seq=128
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layers) layers="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    --heads) heads="$2"; shift 2 ;;
    --seq) seq="$2"; shift 2 ;;
    *) echo "usage: $0 [--layers L] [--hidden H] [--heads A] [--seq S]" >&2; exit 2 ;;
  esac
done
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/hf-venv
if ! "$venv/bin/python" -c 'import transformers, safetensors' >/dev/null 2>&1; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "transformers==4.38.2" "safetensors>=0.4.1,<0.5"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
vocab=data/tokenizers/bert-base-uncased/vocab.txt
"$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen" \
  --tokenizer bert-wordpiece-lowercase --vocab-file "$vocab" --split-sentences
iters=3 mbs=4 gbs=8
"$megatron" run recipes/bert-tiny.yaml "data.prefixes=[$work/austen_text_sentence]" \
  data.vocab_file="$PWD/$vocab" data.split=100,0,0 data.seq_length="$seq" \
  model.num_layers="$layers" model.hidden_size="$hidden" model.num_attention_heads="$heads" \
  model.make_vocab_size_divisible_by=1 \
  training.train_iters=$iters training.micro_batch_size=$mbs training.global_batch_size=$gbs \
  logging.interval=1 checkpoint.save="$work/ckpt" checkpoint.interval=$((iters - 1)) \
  --run-dir "$work/run" >/dev/null
"$megatron" convert --to hf --load "$work/ckpt/iter_$(printf %07d $((iters - 1)))" --save "$work/hf" >/dev/null
echo "# megatron $("$megatron" --version 2>/dev/null | head -1); BERT L$layers h$hidden a$heads s$seq, f32"
"$venv/bin/python" scripts/bench/peers/hf_bert.py --hf "$work/hf" --prefix "$work/austen_text_sentence" \
  --vocab "$vocab" --metrics "$work/run/metrics.jsonl" --iteration $iters --seq "$seq" \
  --micro-batch $mbs --global-batch $gbs --train-iters $iters
