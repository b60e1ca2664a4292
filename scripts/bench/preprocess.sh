#!/usr/bin/env bash
# Preprocessing throughput of `megatron preprocess` against its peers, measured in one run:
#  - Megatron-LM's path (Python pool + GPT-2 Python BPE + megatron-core's IndexedDatasetBuilder,
#    see peers/megatron_preprocess.py), whose output must be byte-identical to ours;
#  - Hugging Face `tokenizers` (Rust) raw tokenization, without JSON parsing or writing.
# usage: scripts/bench/preprocess.sh [CORPUS.jsonl ...]   (default: the bundled Austen corpus)
# Peers install into scripts/bench/.venv from PyPI (megatron-core, transformers, tokenizers) on
# top of Debian's python3-torch and numpy; pass SKIP_PEERS=1 to time megatron alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }
corpora=("$@")
[[ ${#corpora[@]} -gt 0 ]] || corpora=(data/corpora/austen.jsonl)
vocab=data/tokenizers/gpt2/vocab.json
merges=data/tokenizers/gpt2/merges.txt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

venv=scripts/bench/.venv
if [[ -z "${SKIP_PEERS:-}" && ! -x "$venv/bin/python" ]]; then
  echo "# setting up $venv (python3-torch from Debian, megatron-core/transformers/tokenizers from PyPI)"
  apt-get install -y -qq python3-torch python3-numpy python3-venv >/dev/null
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  # 0.8.0 is the newest megatron-core whose datasets module imports with torch 1.13.
  "$venv/bin/pip" install -q --no-deps "megatron-core==0.8.0"
  "$venv/bin/pip" install -q transformers tokenizers
fi

"$megatron" --version | sed 's/^/# /'
echo "# host: $(nproc) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
if [[ -z "${SKIP_PEERS:-}" ]]; then
  "$venv/bin/python" - <<'PY' | sed 's/^/# /'
import importlib.metadata as m
print("peers: megatron-core", m.version("megatron-core"), "| transformers", m.version("transformers"),
      "| tokenizers", m.version("tokenizers"))
PY
fi

for corpus in "${corpora[@]}"; do
  mb=$(du -b "$corpus" | awk '{printf "%.1f", $1/1e6}')
  echo "== $corpus ($mb MB)"
  for workers in 1 2; do
    start=$(date +%s.%N)
    "$megatron" preprocess --quiet --input "$corpus" --output-prefix "$out/ours$workers" \
      --tokenizer gpt2-bpe --vocab-file "$vocab" --merge-file "$merges" --append-eod \
      --workers "$workers" >/dev/null
    ours=$(echo "$(date +%s.%N) - $start" | bc -l)
    printf "megatron preprocess, %d worker(s): %6.2f s  %7.1f MB/s\n" "$workers" "$ours" \
      "$(echo "$mb / $ours" | bc -l)"
    if [[ -z "${SKIP_PEERS:-}" ]]; then
      peer=$("$venv/bin/python" scripts/bench/peers/megatron_preprocess.py "$corpus" "$out/peer$workers" \
        "$vocab" "$merges" "$workers" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
      same=no
      cmp -s "$out/ours${workers}_text_document.bin" "$out/peer${workers}_text_document.bin" &&
        cmp -s "$out/ours${workers}_text_document.idx" "$out/peer${workers}_text_document.idx" && same=yes
      printf "Megatron-LM path,    %d worker(s): %6.2f s  %7.1f MB/s   ratio %.1fx   byte-identical output: %s\n" \
        "$workers" "$peer" "$(echo "$mb / $peer" | bc -l)" "$(echo "$peer / $ours" | bc -l)" "$same"
    fi
  done
  if [[ -z "${SKIP_PEERS:-}" ]]; then
    for threads in 1 2; do
      hf=$(RAYON_NUM_THREADS=$threads "$venv/bin/python" scripts/bench/peers/hf_tokenizers.py "$corpus" "$vocab" "$merges" |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
      printf "HF tokenizers (tokenize only), %d thread(s): %6.2f s  %7.1f MB/s\n" "$threads" "$hf" \
        "$(echo "$mb / $hf" | bc -l)"
    done
  fi
done
