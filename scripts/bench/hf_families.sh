#!/usr/bin/env bash
# Today's Hugging Face families end to end, as a user meets them: small random models saved by
# transformers with real tokenizer.json files (tests/data/hf_tokenizers): Qwen2 (Qwen2.5's shape:
# q/k/v biases, GQA, tied head) with Qwen2.5's tokenizer, and Mistral (4096 window, untied) with
# Mistral v0.1's (byte fallback, <s> before each prompt). Each is imported with `megatron convert
# --from hf`, then greedily continued by `megatron generate` with no tokenizer flags and by
# transformers; the generated ids and texts must be the same, token for token.
#
#   scripts/bench/hf_families.sh [TOKENS]        (default 24 tokens per prompt)
#
# Uses build/hf-venv (Debian's torch 1.13 + transformers 4.38.2, as hf_interop.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
tokens="${1:-24}"
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }
venv=build/hf-venv
if ! "$venv/bin/python" -c 'import transformers, safetensors' >/dev/null 2>&1; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "transformers==4.38.2" "safetensors>=0.4.1,<0.5"
fi
peer=scripts/bench/peers/hf_family_generate.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $("$megatron" --version 2>/dev/null | head -1); $("$venv/bin/python" -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)')"

cat > "$work/prompts.jsonl" <<'JSON'
{"prompt": "The quick brown fox"}
{"prompt": "Once upon a time, in a land far away,"}
{"prompt": "数学是科学的语言。"}
{"prompt": "def fibonacci(n):\n    if n < 2:\n        return n"}
{"prompt": "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"}
JSON
status=0
for family in qwen2:real_qwen2_5 mistral:real_mistral_v0_1; do
  name=${family%%:*}
  fixture=tests/data/hf_tokenizers/${family#*:}
  rm -rf "$work/tok" "$work/hf" "$work/ckpt"
  mkdir -p "$work/tok"
  zstd -q -d "$fixture/tokenizer.json.zst" -o "$work/tok/tokenizer.json"
  [[ -f "$fixture/tokenizer_config.json" ]] && cp "$fixture/tokenizer_config.json" "$work/tok/"
  "$venv/bin/python" "$peer" make "$name" "$work/hf" "$work/tok" 2>/dev/null
  "$megatron" convert --from hf --load "$work/hf" --save "$work/ckpt" >/dev/null 2>&1
  "$venv/bin/python" "$peer" generate "$work/hf" "$work/prompts.jsonl" "$tokens" 2>/dev/null >"$work/theirs.jsonl"
  "$megatron" generate "$work/ckpt" --prompts "$work/prompts.jsonl" --greedy --ignore-eod \
    --max-tokens "$tokens" 2>/dev/null >"$work/ours.jsonl"
  /usr/bin/python3 - "$work/ours.jsonl" "$work/theirs.jsonl" "$name + ${family#*:}" <<'PY' || status=1
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
theirs = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
same = 0
for o, t in zip(ours, theirs):
    ok = o["tokens"] == t["ids"] and o["text"] == t["text"]
    same += ok
    print(f"  {'same' if ok else 'DIFFERENT'}: {t['prompt'][:40]!r} -> {t['text'][:50]!r}")
print(f"{sys.argv[3]}: {same}/{len(theirs)} prompts generate the same ids and text as transformers")
sys.exit(0 if same == len(theirs) == len(ours) else 1)
PY
done
exit $status
