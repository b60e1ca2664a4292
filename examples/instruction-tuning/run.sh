#!/usr/bin/env bash
# Pre-trains the tiny GPT on the bundled Austen corpus, instruction-tunes it to name the novel a
# passage comes from (make_data.py), and scores its greedy answers on held-out chapters by
# exact match against always answering the commonest novel.
#
#   examples/instruction-tuning/run.sh [--short] [--threads N]
#
# --short: a few iterations of each step (what CI runs: it checks the steps, not the score).
source "$(dirname "$0")/../common.sh"

if $short; then
  small=(training.train_iters=5 training.lr_warmup_iters=1 training.global_batch_size=8)
  sizes=(--train 200 --test 10); pretrain=("${small[@]}"); tune=("${small[@]}" eval.interval=null)
else
  sizes=(); pretrain=(); tune=()
fi
baseline=$(python3 make_data.py "$root/data/corpora/austen.jsonl" data "${sizes[@]}")
echo "==> data: $baseline"
step "tokenize the corpus (megatron preprocess, GPT-2 BPE)" \
  "$megatron" preprocess --input "$root/data/corpora/austen.jsonl" --output-prefix data/austen \
  --tokenizer gpt2-bpe --vocab-file "$root/data/tokenizers/gpt2/vocab.json" \
  --merge-file "$root/data/tokenizers/gpt2/merges.txt" --append-eod --workers "$threads" --quiet
step "pre-train (megatron run pretrain.yaml)" "$megatron" run pretrain.yaml "${pretrain[@]}" \
  --threads "$threads" --run-dir runs/pretrain-run
step "instruction-tune (megatron run sft.yaml)" "$megatron" run sft.yaml "${tune[@]}" \
  --threads "$threads" --run-dir runs/sft-run
step "evaluate on held-out chapters (megatron eval runs/sft)" "$megatron" eval runs/sft \
  --batch-size 16 --threads "$threads" --json runs/eval.json --log-samples runs/samples.jsonl
em=$(metric runs/eval.json generation exact_match)
echo "exact match $em on the test passages; ${baseline#*; }"
