#!/usr/bin/env bash
# tokenizer.json speed: `megatron preprocess --tokenizer huggingface` against Hugging Face
# `tokenizers`' encode_batch (peers/hf_tokenizer_json.py) with the same threads, in one run, and a
# check that both give the same ids for every document.
# usage: scripts/bench/hf_tokenizer.sh [TOKENIZER.json|DIR] [CORPUS.jsonl ...]
#   default tokenizer: the Qwen2.5 fixture (tests/data/hf_tokenizers); default corpus: Austen.
# The peer installs into scripts/bench/.venv from PyPI (tokenizers).
set -euo pipefail
cd "$(dirname "$0")/../.."
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

tokenizer="${1:-}"
[[ $# -gt 0 ]] && shift
if [[ -z "$tokenizer" ]]; then
  fixture=$(ls -d tests/data/hf_tokenizers/real_qwen* 2>/dev/null | head -1)
  [[ -n "$fixture" ]] || fixture=tests/data/hf_tokenizers/bpe_llama3
  tokenizer="$fixture"
fi
if [[ -d "$tokenizer" && -f "$tokenizer/tokenizer.json.zst" ]]; then
  mkdir -p "$out/tok"
  zstd -q -d "$tokenizer/tokenizer.json.zst" -o "$out/tok/tokenizer.json"
  [[ -f "$tokenizer/tokenizer_config.json" ]] && cp "$tokenizer/tokenizer_config.json" "$out/tok/"
  tokenizer="$out/tok"
fi
file="$tokenizer"
[[ -d "$file" ]] && file="$file/tokenizer.json"
corpora=("$@")
[[ ${#corpora[@]} -gt 0 ]] || corpora=(data/corpora/austen.jsonl)

venv=scripts/bench/.venv
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import tokenizers' 2>/dev/null || "$venv/bin/pip" install -q tokenizers

"$megatron" --version | sed 's/^/# /'
echo "# host: $(nproc) cores; tokenizer: $file"
"$venv/bin/python" -c 'import tokenizers; print("# peer: tokenizers", tokenizers.__version__)'

for corpus in "${corpora[@]}"; do
  mb=$(du -b "$corpus" | awk '{printf "%.1f", $1/1e6}')
  echo "== $corpus ($mb MB)"
  for threads in 1 2; do
    start=$(date +%s.%N)
    "$megatron" preprocess --quiet --input "$corpus" --output-prefix "$out/ours$threads" \
      --tokenizer huggingface --tokenizer-model "$tokenizer" --workers "$threads" >/dev/null
    ours=$(echo "$(date +%s.%N) - $start" | bc -l)
    peer=$(RAYON_NUM_THREADS=$threads "$venv/bin/python" scripts/bench/peers/hf_tokenizer_json.py "$corpus" "$file" \
      "$out/peer$threads.ids" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
    same=$(/usr/bin/python3 - "$out/ours${threads}_text_document" "$out/peer$threads.ids" <<'PY'
import sys
from array import array
prefix, peer = sys.argv[1:3]
idx = open(prefix + ".idx", "rb").read()
code = idx[17]  # Megatron's dtype code after the 9-byte magic and the 8-byte version
width = {8: "H", 4: "i"}.get(code)
ours = array(width)
ours.frombytes(open(prefix + ".bin", "rb").read())
theirs = array("i")
theirs.frombytes(open(peer, "rb").read())
print("yes" if list(ours) == list(theirs) else "NO")
PY
)
    printf "megatron preprocess (whole job), %d worker(s): %6.2f s %7.1f MB/s | tokenizers encode_batch (tokenize only), %d thread(s): %6.2f s %7.1f MB/s | ratio %.2fx | same ids: %s\n" \
      "$threads" "$ours" "$(echo "$mb / $ours" | bc -l)" "$threads" "$peer" "$(echo "$mb / $peer" | bc -l)" \
      "$(echo "$peer / $ours" | bc -l)" "$same"
  done
done
