#!/usr/bin/env bash
# megatron eval against lm-evaluation-harness: trains the tiny GPT on the bundled corpus,
# exports it with `megatron convert --to hf`, builds perplexity, cloze (LAMBADA-style) and
# multiple-choice (zero- and few-shot) tasks from the corpus as local jsonl files, and scores
# each with `megatron eval` on the checkpoint and with PyPI's lm-eval (hf model, transformers,
# torch) on the export. Every metric both report, and every request's log-likelihood in both
# sides' logged samples, must agree within 1e-4 relative (is_greedy exactly); the whole-process
# time of each side, and its ratio, are printed per task (same threads, same batch).
#
#   scripts/bench/eval_lm_eval.sh [--iters N] [--docs N] [--questions N] [--batch B] [--threads T]
#                                 [--work DIR]
#
# --work keeps everything in DIR (and reuses the checkpoint and export a run left there).
# Builds nothing: expects build/default/bin/megatron (MEGATRON overrides). Makes (or reuses)
# build/lm-eval-venv with PyPI's current torch, transformers and lm-eval. Runs offline
# (HF_DATASETS_OFFLINE, HF_HUB_OFFLINE): the tasks read local files only.
set -euo pipefail
cd "$(dirname "$0")/../.."

iters=200
docs=4
questions=100
batch=16
threads=2
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iters) iters="$2"; shift 2 ;;
    --docs) docs="$2"; shift 2 ;;
    --questions) questions="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --work) keep="$2"; shift 2 ;;
    *) echo "usage: $0 [--iters N] [--docs N] [--questions N] [--batch B] [--threads T] [--work DIR]" >&2; exit 2 ;;
  esac
done
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import lm_eval, transformers, torch, accelerate' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers lm-eval accelerate
fi
python="$venv/bin/python"
peer=scripts/bench/peers/lm_eval_tasks.py
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=$threads

if [[ -n "$keep" ]]; then
  work="$keep"
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
vocab=data/tokenizers/gpt2/vocab.json
merges=data/tokenizers/gpt2/merges.txt
if [[ ! -f "$work/hf/config.json" ]]; then
  rm -rf "$work/run" "$work/ckpt"
  log="$work/prepare.log"
  {
    "$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen" \
      --tokenizer gpt2-bpe --vocab-file "$vocab" --merge-file "$merges" --append-eod &&
    "$megatron" run recipes/gpt-tiny.yaml data.mock=false "data.prefixes=[$work/austen_text_document]" \
      data.vocab_file="$PWD/$vocab" data.merge_file="$PWD/$merges" \
      training.train_iters="$iters" eval.interval=null checkpoint.save="$work/ckpt" \
      checkpoint.interval="$iters" --threads "$threads" --run-dir "$work/run" &&
    "$megatron" convert --to hf --load "$work/ckpt" --save "$work/hf"
  } >"$log" 2>&1 || { tail -30 "$log" >&2; echo "training or exporting the model failed (above)" >&2; exit 1; }
fi
"$python" "$peer" tokenizer --vocab "$vocab" --merges "$merges" --out "$work/hf"
"$python" "$peer" make --corpus data/corpora/austen.jsonl --out "$work/tasks" --docs "$docs" \
  --questions "$questions" --fewshot 3 >/dev/null

echo "# megatron $("$megatron" --version 2>/dev/null | head -1); $("$python" -c 'import torch, transformers, lm_eval; print("torch", torch.__version__, "transformers", transformers.__version__, "lm-eval", lm_eval.__version__)'); gpt-tiny after $iters iterations, f32, $threads threads, batch $batch"
seconds() { date +%s.%N; }
printf "%-26s %12s %12s %8s\n" task megatron_s lm_eval_s ratio
run_pair() {  # name lm-eval-task megatron-args...
  local name=$1 their=$2
  shift 2
  local t0 t1 t2
  t0=$(seconds)
  "$megatron" eval "$work/ckpt" "$@" --batch-size "$batch" --threads "$threads" \
    --json "$work/ours/$name.json" --log-samples "$work/ours/$name.samples.jsonl" >"$work/ours-$name.log" 2>&1 || { cat "$work/ours-$name.log" >&2; return 1; }
  t1=$(seconds)
  "$python" -m lm_eval --model hf --model_args "pretrained=$work/hf,dtype=float32" \
    --include_path "$work/tasks/tasks" --tasks "$their" --device cpu --batch_size "$batch" \
    --output_path "$work/theirs/$name" --log_samples >"$work/theirs-$name.log" 2>&1 || { tail -30 "$work/theirs-$name.log" >&2; return 1; }
  t2=$(seconds)
  awk -v n="$name" -v a="$t0" -v b="$t1" -v c="$t2" \
    'BEGIN { printf "%-26s %12.1f %12.1f %8.2f\n", n, b - a, c - b, (c - b) / (b - a) }'
}
rm -rf "$work/ours" "$work/theirs"
mkdir -p "$work/ours" "$work/theirs"
# Rolling windows only: lm-eval computes no Megatron overlapping windows, so both do the same work.
run_pair perplexity mt_perplexity --task perplexity --data "$work/tasks/perplexity.jsonl" --windows rolling
run_pair cloze mt_cloze --task cloze --data "$work/tasks/cloze.jsonl"
run_pair multiple_choice mt_choice --task multiple-choice --data "$work/tasks/choice.jsonl"
run_pair multiple_choice_fewshot mt_choice_fewshot --task multiple-choice \
  --data "$work/tasks/choice.jsonl" --num-fewshot 3
grep -h "scored" "$work"/ours-*.log | tail -4 || true
"$python" "$peer" compare --megatron-dir "$work/ours" --lm-eval-dir "$work/theirs"
