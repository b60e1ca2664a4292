#!/usr/bin/env bash
# Classification fine-tuning on the bundled sentiment set (data/eval/fine_foods_*.jsonl: 4,000
# training and 1,000 test reviews, `great` or `other`; 65.8% of the test set is `great`, the
# majority-class baseline). Pre-trains the tiny BERT on the bundled Austen corpus, fine-tunes it
# on the reviews from that checkpoint and from random weights, and scores the test set of each
# with `megatron eval --task classification`; then the same for the tiny GPT (classifier on the
# last token). Prints accuracy and macro F1 against the baseline.
#
#   scripts/bench/finetune_sentiment.sh [--pretrain-iters N] [--epochs E] [--threads T]
#
# Builds nothing: expects build/default/bin/megatron (MEGATRON overrides).
set -euo pipefail
cd "$(dirname "$0")/../.."

pretrain=300
epochs=2
threads=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pretrain-iters) pretrain="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "usage: $0 [--pretrain-iters N] [--epochs E] [--threads T]" >&2; exit 2 ;;
  esac
done
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log="$work/log"
quiet() { "$@" >>"$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }; }

train=$PWD/data/eval/fine_foods_train.jsonl
test=$PWD/data/eval/fine_foods_test.jsonl
iters=$(( epochs * 4000 / 32 ))
finetune=(finetune.train_data="$train" "finetune.labels=[great, other]" "data.prefixes=[]" data.mock=false
          training.train_iters="$iters" training.lr=5e-4 training.min_lr=1e-5 training.lr_warmup_iters=10
          eval.interval=null logging.interval=50 --threads "$threads")
echo "# megatron $("$megatron" --version 2>/dev/null | head -1); $epochs epochs ($iters iterations of 32), majority baseline 0.658"
printf "%-6s %-26s %8s %8s %10s\n" model start acc f1 seconds
score() {  # label, checkpoint
  "$megatron" eval "$2/ckpt" --task classification --data "$test" --batch-size 32 --threads "$threads" \
    --json "$2/eval.json" >>"$log" 2>&1
  python3 - "$1" "$2/eval.json" "$2/seconds" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))["results"]["classification"]
model, start = sys.argv[1].split(":")
print(f"{model:6} {start:26} {r['acc,none']:8.4f} {r['f1,none']:8.4f} {float(open(sys.argv[3]).read()):10.1f}")
PY
}
run_finetune() {  # label, dir, recipe, extra args...
  local label=$1 dir=$2 recipe=$3
  shift 3
  local t0=$(date +%s.%N)
  quiet "$megatron" run "$recipe" "${finetune[@]}" checkpoint.save="$dir/ckpt" --run-dir "$dir/run" "$@"
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }' > "$dir/seconds"
  score "$label" "$dir"
}

# BERT: pre-train on Austen (sentence-split WordPiece), then fine-tune.
quiet "$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen-bert" \
  --tokenizer bert-wordpiece-lowercase --vocab-file data/tokenizers/bert-base-uncased/vocab.txt --split-sentences
quiet "$megatron" run recipes/bert-tiny.yaml "data.prefixes=[$work/austen-bert_text_sentence]" \
  training.train_iters="$pretrain" eval.interval=null checkpoint.save="$work/bert-pre" --threads "$threads" \
  --run-dir "$work/bert-pre-run"
run_finetune "bert:pre-trained ($pretrain iters)" "$work/bert-ft" recipes/bert-tiny.yaml finetune.pretrained="$work/bert-pre"
run_finetune "bert:random weights" "$work/bert-rand" recipes/bert-tiny.yaml

# GPT: pre-train on Austen (GPT-2 BPE), then fine-tune (the classifier on the last token).
gpt_files=(data.vocab_file="$PWD/data/tokenizers/gpt2/vocab.json" data.merge_file="$PWD/data/tokenizers/gpt2/merges.txt")
quiet "$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen-gpt" \
  --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json --merge-file data/tokenizers/gpt2/merges.txt --append-eod
quiet "$megatron" run recipes/gpt-tiny.yaml data.mock=false "data.prefixes=[$work/austen-gpt_text_document]" \
  training.train_iters="$pretrain" eval.interval=null checkpoint.save="$work/gpt-pre" --threads "$threads" \
  --run-dir "$work/gpt-pre-run"
run_finetune "gpt:pre-trained ($pretrain iters)" "$work/gpt-ft" recipes/gpt-tiny.yaml "${gpt_files[@]}" finetune.pretrained="$work/gpt-pre"
run_finetune "gpt:random weights" "$work/gpt-rand" recipes/gpt-tiny.yaml "${gpt_files[@]}"
