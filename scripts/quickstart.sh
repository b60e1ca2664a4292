#!/usr/bin/env bash
# From a fresh clone to a first result: installs what is missing, builds, and runs the
# bundled tiny GPT recipe. Until `megatron run` lands, it plans that recipe on the CPU and
# preprocesses the bundled corpus into Megatron's indexed format.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> installing dependencies (Debian packages)"
./scripts/install-deps.sh
echo "==> building (preset: default)"
./scripts/build.sh default
megatron=build/default/bin/megatron

echo "==> $megatron --version"
"$megatron" --version
echo
echo "==> $megatron recipe show recipes/gpt-tiny.yaml"
"$megatron" recipe show recipes/gpt-tiny.yaml
echo
echo "==> $megatron plan recipes/gpt-tiny.yaml"
"$megatron" plan recipes/gpt-tiny.yaml
echo
mkdir -p build/quickstart
echo "==> $megatron preprocess (the bundled Austen corpus, GPT-2 BPE)"
"$megatron" preprocess --input data/corpora/austen.jsonl --output-prefix build/quickstart/austen \
  --tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json \
  --merge-file data/tokenizers/gpt2/merges.txt --append-eod --workers "$(nproc)"
echo
echo "==> $megatron data inspect build/quickstart/austen_text_document"
"$megatron" data inspect build/quickstart/austen_text_document
echo
echo "Next: $megatron plan recipes/gpt-175b.yaml  (or any recipe in recipes/; see README.md)"
