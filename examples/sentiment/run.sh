#!/usr/bin/env bash
# Pre-trains the tiny BERT on the bundled Austen corpus, fine-tunes it to classify the bundled
# food reviews (4,000 for training; real data, data/README.md) and scores the 1,000 test reviews
# against always answering the majority class (`great`, 65.8% of them).
#
#   examples/sentiment/run.sh [--short] [--threads N]
#
# --short: a few iterations of each step (what CI runs: it checks the steps, not the score).
source "$(dirname "$0")/../common.sh"

if $short; then
  pretrain=(training.train_iters=5 training.global_batch_size=8)
  tune=(training.train_iters=5 training.lr_warmup_iters=1 training.global_batch_size=8)
else
  pretrain=(); tune=()
fi
step "tokenize the corpus (megatron preprocess, WordPiece, one sentence a sequence)" \
  "$megatron" preprocess --input "$root/data/corpora/austen.jsonl" --output-prefix data/austen \
  --tokenizer bert-wordpiece-lowercase --vocab-file "$root/data/tokenizers/bert-base-uncased/vocab.txt" \
  --split-sentences --workers "$threads" --quiet
step "pre-train (megatron run pretrain.yaml)" "$megatron" run pretrain.yaml "${pretrain[@]}" \
  --threads "$threads" --run-dir runs/pretrain-run
step "fine-tune (megatron run finetune.yaml)" "$megatron" run finetune.yaml "${tune[@]}" \
  --threads "$threads" --run-dir runs/finetune-run
step "classify the test reviews (megatron eval runs/finetune)" "$megatron" eval runs/finetune \
  --batch-size 32 --threads "$threads" --json runs/eval.json
echo "accuracy $(metric runs/eval.json classification acc), macro F1" \
  "$(metric runs/eval.json classification f1); always answering 'great': accuracy 0.658"
