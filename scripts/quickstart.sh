#!/usr/bin/env bash
# From a fresh clone to a first trained model: installs what is missing, builds, tokenizes the
# bundled Jane Austen corpus into Megatron's indexed format, and trains the tiny GPT recipe on
# it on the CPU for a few minutes, printing the falling loss and the validation perplexity.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
echo "==> installing dependencies (Debian packages)"
./scripts/install-deps.sh
installed=$(date +%s)
# Only the command this script runs; the CUDA backend only where a GPU is visible (or
# MEGATRON_CUDA=1 asks for it): the tests and kernels are ./scripts/test.sh's business.
preset=cpu
if [[ "${MEGATRON_CUDA:-}" == 1 ]] || { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
  preset=default
fi
echo "==> building the megatron command (preset: $preset)"
./scripts/build.sh "$preset" megatron
megatron=build/$preset/bin/megatron
built=$(date +%s)

echo "==> $megatron --version"
"$megatron" --version
echo
echo "==> $megatron plan recipes/gpt-tiny.yaml"
"$megatron" plan recipes/gpt-tiny.yaml | sed -n '/^Memory per rank/,/^$/p;/^Estimate/,$p'
echo
mkdir -p build/quickstart
echo "==> $megatron preprocess (the bundled Austen corpus, GPT-2 BPE)"
"$megatron" preprocess --input data/corpora/austen.jsonl --output-prefix build/quickstart/austen \
  --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json \
  --merge-file data/tokenizers/gpt2/merges.txt --append-eod --workers "$(nproc)"
echo
run_dir=build/quickstart/run
ckpt=build/quickstart/ckpt
rm -rf "$run_dir" "$ckpt"
echo "==> $megatron run recipes/gpt-tiny.yaml on the Austen corpus (at most 75 seconds)"
"$megatron" run recipes/gpt-tiny.yaml data.mock=false \
  "data.prefixes=[$PWD/build/quickstart/austen_text_document]" \
  data.vocab_file="$PWD/data/tokenizers/gpt2/vocab.json" data.merge_file="$PWD/data/tokenizers/gpt2/merges.txt" \
  training.train_iters=100 eval.interval=20 checkpoint.save="$PWD/$ckpt" --time-limit 1.25 \
  --run-dir "$run_dir" \
  | tee build/quickstart/log.txt
mv build/quickstart/log.txt "$run_dir/log.txt"
echo
echo "==> validation loss over the run (an untrained model's perplexity is about the vocabulary, 50,000)"
grep "validation loss" "$run_dir/log.txt"
echo
echo "==> $megatron eval: the trained checkpoint's perplexity on the corpus's last three chapters"
tail -n 3 data/corpora/austen.jsonl > build/quickstart/last-chapters.jsonl
"$megatron" eval "$ckpt" --task perplexity --data build/quickstart/last-chapters.jsonl \
  --windows rolling --batch-size 16 --json build/quickstart/eval.json
echo
echo "==> $megatron generate: the checkpoint continues a sentence (40 tokens; 100 iterations of a tiny model: do not expect Austen yet)"
"$megatron" generate "$ckpt" --prompt "It is a truth universally acknowledged" --max-tokens 40 --top-k 40 --temperature 0.8 --seed 1
echo
trained=$(date +%s)
echo "Took $((trained - installed)) s from the build to the end of training and evaluation" \
  "($((built - installed)) s building), and $((installed - started)) s checking or installing packages."
echo "Metrics: $run_dir/metrics.jsonl; checkpoint: $ckpt; eval results: build/quickstart/eval.json. Next: $megatron serve $ckpt (docs/generate.md), $megatron plan recipes/gpt-175b.yaml, or see README.md"
