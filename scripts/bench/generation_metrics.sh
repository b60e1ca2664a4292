#!/usr/bin/env bash
# megatron eval's BLEU and chrF against sacreBLEU on the same outputs: runs the translation
# example (examples/translation: a tiny T5 trained on a generated word-substitution task), whose
# `megatron eval` writes every greedy translation beside its reference into runs/eval.json, then
# recomputes corpus BLEU and chrF from those with PyPI's sacrebleu
# (scripts/bench/peers/sacrebleu_check.py) and prints both to sacreBLEU's printed precision,
# failing when they differ. Also checks exact match and F1 of the instruction-tuning example
# against the SQuAD v1.1 script's definitions, re-implemented in Python in the same checker.
#
#   scripts/bench/generation_metrics.sh [--short] [--threads T]
#
# --short: the examples' short runs (untrained models: the outputs are noise, but they are the
# outputs the metric is computed on). Builds nothing: expects build/default/bin/megatron
# (MEGATRON overrides). Makes (or reuses) build/sacrebleu-venv with PyPI's sacrebleu.
set -euo pipefail
cd "$(dirname "$0")/../.."

args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --short) args+=(--short); shift ;;
    --threads) args+=(--threads "$2"); shift 2 ;;
    *) echo "usage: $0 [--short] [--threads T]" >&2; exit 2 ;;
  esac
done
export MEGATRON="${MEGATRON:-$PWD/build/default/bin/megatron}"
[[ -x "$MEGATRON" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/sacrebleu-venv
if ! "$venv/bin/python" -c 'import sacrebleu' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet sacrebleu
fi
echo "# sacrebleu $("$venv/bin/python" -c 'import sacrebleu; print(sacrebleu.__version__)')"
examples/translation/run.sh "${args[@]}"
"$venv/bin/python" scripts/bench/peers/sacrebleu_check.py examples/translation/runs/eval.json
examples/instruction-tuning/run.sh "${args[@]}"
"$venv/bin/python" scripts/bench/peers/sacrebleu_check.py examples/instruction-tuning/runs/eval.json
