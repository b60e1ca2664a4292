#!/usr/bin/env bash
# Today's Hugging Face families end to end, as a user meets them: small random models saved by
# transformers 5 (config.json with rope_parameters, tokenizer.json only) with real or
# Llama-3-built tokenizer.json files (tests/data/hf_tokenizers): Llama 3.1 (llama3 rope scaling,
# its original context shrunk to 64 so that prompts reach the scaled frequencies; a 540-token
# prompt among them) with bpe_llama3, Qwen2 (Qwen2.5's shape: q/k/v biases, tied) with Qwen2.5's
# tokenizer (and with YaRN scaling, its original context shrunk to 64), Qwen3 (q/k norms, head_dim apart from hidden / heads) with Qwen3's, and Mistral (4096
# window, untied) with Mistral v0.1's and v0.3's (byte fallback, <s> before each prompt; Mistral's
# v1 and v3 chat templates as mistral-common generates them), and Qwen2 with
# DeepSeek-R1's tokenizer (DeepSeek-R1-Distill-Qwen's pairing; its chat template). Each is imported
# with `megatron convert --from hf` and used with no tokenizer flags:
#   - generate: greedily continued by `megatron generate` and by transformers; the ids and texts
#     must be the same, token for token;
#   - chat (all but Llama 3.1's carry chat templates): `megatron generate
#     --chat-template auto` against transformers' apply_chat_template(add_generation_prompt=True);
#   - eval: `megatron eval --task multiple-choice --log-samples` against each choice's
#     log-likelihood from transformers (lm-evaluation-harness's requests), within 1e-4 relative
#     (both f32; summation orders differ).
#
#   scripts/bench/hf_families.sh [TOKENS]        (default 24 tokens per prompt)
#   FAMILIES="qwen3:real_qwen3" scripts/bench/hf_families.sh    (some of them: FAMILY:FIXTURE ...)
#
# Uses a venv with PyPI's current torch and transformers (HF5_VENV, default build/hf5-venv,
# made on first use).
set -euo pipefail
cd "$(dirname "$0")/../.."
tokens="${1:-24}"
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }
venv="${HF5_VENV:-build/hf5-venv}"
if ! "$venv/bin/python" -c 'import torch, transformers, safetensors, jinja2; assert int(transformers.__version__.split(".")[0]) >= 5' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch "transformers>=5" safetensors jinja2
fi
peer=scripts/bench/peers/hf_family_generate.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $("$megatron" --version 2>/dev/null | head -1); $("$venv/bin/python" -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)')"

long=$(python3 -c 'print(" ".join(["The river ran past the old mill, and the miller counted the sacks of grain."] * 18))')
cat > "$work/prompts.jsonl" <<JSON
{"prompt": "The quick brown fox"}
{"prompt": "Once upon a time, in a land far away,"}
{"prompt": "数学是科学的语言。"}
{"prompt": "def fibonacci(n):\n    if n < 2:\n        return n"}
{"prompt": "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n"}
{"prompt": "$long"}
JSON
cat > "$work/choices.jsonl" <<'JSON'
{"context": "The capital of France is", "choices": ["Paris", "Berlin", "a city of lights"], "gold": 0}
{"context": "Water boils at", "choices": ["100 degrees Celsius", "the top of the hill"], "gold": 0}
{"context": "Quel temps fait-il ? ", "choices": ["Il pleut.", "Beau temps, merci !"], "gold": 1}
{"context": "函数的导数是", "choices": ["变化率", "一个常数"], "gold": 0}
JSON
status=0
families="${FAMILIES:-llama31:bpe_llama3 qwen2:real_qwen2_5 qwen2-yarn:real_qwen2_5 qwen3:real_qwen3 mistral:real_mistral_v0_1 mistral:real_mistral_v0_3 qwen2:real_deepseek_r1}"
for family in $families; do
  name=${family%%:*}
  fixture=tests/data/hf_tokenizers/${family#*:}
  rm -rf "$work/tok" "$work/hf" "$work/ckpt"
  mkdir -p "$work/tok"
  if [[ -f "$fixture/tokenizer.json.zst" ]]; then
    zstd -q -d "$fixture/tokenizer.json.zst" -o "$work/tok/tokenizer.json"
  else
    cp "$fixture/tokenizer.json" "$work/tok/"
  fi
  [[ -f "$fixture/tokenizer_config.json" ]] && cp "$fixture/tokenizer_config.json" "$work/tok/"
  # Mistral's fixtures are bare tokenizers: given the Hub's special tokens and Mistral's chat
  # template as mistral-common generates it (tests/data/chat_templates/).
  case "${family#*:}" in
    real_mistral_v0_1) template=mistral_v1 ;;
    real_mistral_v0_3) template=mistral_v3 ;;
    *) template= ;;
  esac
  if [[ -n "$template" ]]; then
    cp "tests/data/chat_templates/$template.jinja" "$work/tok/chat_template.jinja"
    echo '{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}' >"$work/tok/tokenizer_config.json"
  fi
  "$venv/bin/python" "$peer" make "$name" "$work/hf" "$work/tok" 2>/dev/null
  "$megatron" convert --from hf --load "$work/hf" --save "$work/ckpt" >/dev/null 2>"$work/log" || { cat "$work/log"; exit 1; }
  "$venv/bin/python" "$peer" generate "$work/hf" "$work/prompts.jsonl" "$tokens" 2>/dev/null >"$work/theirs.jsonl"
  "$megatron" generate "$work/ckpt" --prompts "$work/prompts.jsonl" --greedy --ignore-eod \
    --max-tokens "$tokens" 2>"$work/log" >"$work/ours.jsonl" || { cat "$work/log"; exit 1; }
  "$venv/bin/python" "$peer" score "$work/hf" "$work/choices.jsonl" 2>/dev/null >"$work/their_lls.jsonl"
  "$megatron" eval "$work/ckpt" --task multiple-choice --data "$work/choices.jsonl" \
    --log-samples "$work/our_lls.jsonl" >/dev/null 2>"$work/log" || { cat "$work/log"; exit 1; }
  : >"$work/our_chat.jsonl"
  : >"$work/their_chat.jsonl"
  if [[ -f "$work/tok/tokenizer_config.json" ]]; then
    "$venv/bin/python" "$peer" chat "$work/hf" "$work/prompts.jsonl" "$tokens" 2>/dev/null >"$work/their_chat.jsonl"
    "$megatron" generate "$work/ckpt" --prompts "$work/prompts.jsonl" --greedy --ignore-eod \
      --chat-template auto --max-tokens "$tokens" 2>"$work/log" >"$work/our_chat.jsonl" || { cat "$work/log"; exit 1; }
  fi
  python3 - "$work" "$name + ${family#*:}" <<'PY' || status=1
import json, sys
work, what = sys.argv[1], sys.argv[2]
rows = lambda f: [json.loads(l) for l in open(f"{work}/{f}", encoding="utf-8")]
ours, theirs = rows("ours.jsonl"), rows("theirs.jsonl")
same = 0
for o, t in zip(ours, theirs):
    ok = o["tokens"] == t["ids"] and o["text"] == t["text"]
    same += ok
    print(f"  {'same' if ok else 'DIFFERENT'}: {t['prompt'][:40]!r} ({len(t['prompt_ids'])} tokens) -> {t['text'][:40]!r}")
print(f"{what}: {same}/{len(theirs)} prompts generate the same ids and text as transformers")
ok = same == len(theirs) == len(ours)
our_chat, their_chat = rows("our_chat.jsonl"), rows("their_chat.jsonl")
if their_chat:
    chat_same = sum(o["tokens"] == t["ids"] and o["text"] == t["text"] for o, t in zip(our_chat, their_chat))
    print(f"{what}: chat template: {chat_same}/{len(their_chat)} prompts as user turns generate the same ids and text as transformers")
    ok = ok and chat_same == len(their_chat) == len(our_chat)
our_lls = [[r[0] for r in s["filtered_resps"]] for s in sorted(rows("our_lls.jsonl"), key=lambda s: s["doc_id"])]
their_lls = [s["lls"] for s in rows("their_lls.jsonl")]
worst = max(abs(a - b) / max(1.0, abs(b)) for o, t in zip(our_lls, their_lls) for a, b in zip(o, t))
n = sum(len(t) for t in their_lls)
close = len(our_lls) == len(their_lls) and all(len(o) == len(t) for o, t in zip(our_lls, their_lls)) and worst <= 1e-4
print(f"{what}: eval multiple-choice: {n} log-likelihoods, largest difference {worst:.2e} relative to transformers' {'(within 1e-4)' if close else '(OUTSIDE 1e-4)'}")
sys.exit(0 if ok and close else 1)
PY
done
exit $status
