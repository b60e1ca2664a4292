#!/usr/bin/env bash
# The same samples as Megatron-LM: tokenizes the bundled Austen corpus, lets `megatron run`
# build its GPT dataset indices for several seeds, sequence lengths and training lengths (one
# epoch; several epochs with a separate final epoch; a blend-free 3-way split), and compares
# each split's document range, document index, sample index, shuffle index and every sample's
# tokens with PyPI megatron-core's own GPTDataset (its prebuilt C++ helpers) on the same files.
# Prints one line per split and case; exits 1 on any difference.
#
#   scripts/bench/gpt_indices_vs_megatron_core.sh
#
# Builds nothing: expects build/default/bin/megatron (MEGATRON overrides). Makes (or reuses)
# build/lm-eval-venv (PyPI torch, megatron-core).
set -euo pipefail
cd "$(dirname "$0")/../.."

megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import megatron.core.datasets.helpers_cpp' >/dev/null 2>&1; then
  echo "==> making $venv (PyPI torch, megatron-core)"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu
  "$venv/bin/pip" install -q megatron-core numpy
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "# megatron $("$megatron" --version | head -1); megatron-core $("$venv/bin/pip" show megatron-core | sed -n 's/^Version: //p')"
"$megatron" preprocess --quiet --input data/corpora/austen.jsonl --output-prefix "$work/austen" \
  --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json \
  --merge-file data/tokenizers/gpt2/merges.txt --append-eod >/dev/null
prefix="$work/austen_text_document"
failed=0
# seed, sequence length, training iterations (of 32 samples), split
for case in "1234 128 100 969,30,1" "1234 128 600 969,30,1" "7 64 900 90,7,3" "31337 256 250 949,50,1"; do
  read -r seed seq iters split <<<"$case"
  rm -rf "$work/cache"  # where megatron caches the indices: beside the dataset
  # A time limit of 0.001 minutes stops after the first iteration: every index is built by then.
  "$megatron" run recipes/gpt-tiny.yaml data.mock=false "data.prefixes=[$prefix]" \
    data.vocab_file="$PWD/data/tokenizers/gpt2/vocab.json" data.merge_file="$PWD/data/tokenizers/gpt2/merges.txt" \
    data.split="$split" data.seq_length="$seq" model.max_position_embeddings="$seq" \
    training.seed="$seed" training.train_iters="$iters" --time-limit 0.001 --threads 2 \
    --run-dir "$work/run" --force >"$work/log" 2>&1 || { tail -20 "$work/log" >&2; exit 1; }
  echo "## seed $seed, sequence length $seq, $iters iterations, split $split"
  "$venv/bin/python" -W ignore scripts/bench/peers/megatron_core_gpt_indices.py --prefix "$prefix" \
    --cache "$work/cache" --split "$split" 2> >(grep -v -i "warn\|legacy tokenizer\|CUDA" >&2) || failed=1
done
exit $failed
