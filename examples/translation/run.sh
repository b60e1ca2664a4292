#!/usr/bin/env bash
# Trains the tiny T5 from scratch on a generated translation-like task (make_data.py: Austen's
# clauses "translated" by a word-substitution cipher that also swaps the last two words) and
# scores its greedy translations of held-out clauses with corpus BLEU and chrF, against copying
# the source (BLEU 0.09, chrF 10.96 on this test set, measured with sacreBLEU 2.6.0).
#
#   examples/translation/run.sh [--short] [--threads N]
#
# --short: a few iterations (what CI runs: it checks the steps, not the score).
source "$(dirname "$0")/../common.sh"

if $short; then
  sizes=(--train 300 --test 20); train=(training.train_iters=5 training.global_batch_size=8 eval.interval=null)
else
  sizes=(); train=()
fi
echo "==> data: $(python3 make_data.py "$root/data/corpora/austen.jsonl" data "${sizes[@]}")"
step "train (megatron run t5.yaml)" "$megatron" run t5.yaml "${train[@]}" --threads "$threads" \
  --run-dir runs/t5-run
step "translate the test clauses (megatron eval runs/t5)" "$megatron" eval runs/t5 \
  --batch-size 32 --threads "$threads" --json runs/eval.json --log-samples runs/samples.jsonl
echo "BLEU $(metric runs/eval.json generation bleu), chrF $(metric runs/eval.json generation chrf);" \
  "copying the source: BLEU 0.09, chrF 10.96"
