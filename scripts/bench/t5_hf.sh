#!/usr/bin/env bash
# T5 against transformers (PyPI's current torch and transformers, same machine, same run):
#  1. import: a seeded random T5 v1.1 model (T5ForConditionalGeneration, gated-gelu, relative
#     positions, 4 + 4 layers of width 256 by default) made by transformers and imported with
#     `megatron convert --from hf`; the engine's decoder logits on a padded batch against
#     transformers' float64 logits (the ckpt_tests case HuggingFaceEngine.T5ImportComputes...);
#  2. round trip: `convert --from hf` then `convert --to hf`; transformers loads the original and
#     the returned directory and their logits on the same batch must be identical.
#
#   scripts/bench/t5_hf.sh [--layers N] [--d-model N]
#
# Builds nothing: expects build/default (or build/cpu) with bin/megatron and tests/ckpt_tests.
# Makes (or reuses) build/lm-eval-venv with PyPI torch and transformers.
set -euo pipefail
cd "$(dirname "$0")/../.."

shape=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layers|--d-model) shape+=("$1" "$2"); shift 2 ;;
    *) echo "usage: $0 [--layers N] [--d-model N]" >&2; exit 2 ;;
  esac
done
has_case() {
  [[ -x "$1/bin/megatron" && -x "$1/tests/ckpt_tests" ]] &&
    "$1/tests/ckpt_tests" --gtest_list_tests | grep -q T5ImportComputesTransformersLogits
}
build=build/default
has_case "$build" || build=build/cpu
has_case "$build" || { echo "build first (with tests): ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import transformers, torch, safetensors' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers safetensors
fi
python="$venv/bin/python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $("$build/bin/megatron" --version 2>/dev/null | head -1); $("$python" "scripts/bench/peers/hf_t5.py" --out "$work" "${shape[@]}" 2>/dev/null)"

echo
echo "## the engine's logits against transformers (float64) on a padded batch"
MEGATRON_T5_TRANSFORMERS_DIR="$work" "$build/tests/ckpt_tests" \
  --gtest_filter='HuggingFaceEngine.T5ImportComputesTransformersLogitsWhenGivenItsModel' | grep -E "T5 logits|OK|FAILED"

echo
echo "## convert --from hf, then --to hf: transformers' logits of the two directories"
"$build/bin/megatron" convert --quiet --from hf --load "$work/model" --save "$work/ckpt"
"$build/bin/megatron" convert --to hf --load "$work/ckpt" --save "$work/back" >/dev/null
"$python" scripts/bench/peers/hf_t5.py --compare "$work/model" "$work/back"
