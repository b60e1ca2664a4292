#!/usr/bin/env bash
# Text generation against transformers (PyPI's current torch and transformers, same machine,
# same threads, same run):
#  1. correctness: for a GPT-2 124M-shaped and a Llama-shaped (GQA, RMSNorm, SwiGLU, rotary,
#     untied) seeded random model, made by transformers and imported with `megatron convert
#     --from hf`, greedy generation gives the same tokens, and each generated token's
#     log-probability agrees within 1e-4;
#  2. the exported tokenizer: `convert --to hf` of the imported model loads in AutoTokenizer and
#     tokenizes as megatron does;
#  3. speed on the GPT-2 124M shape at batch 1: prefill tokens/s (a 512-token prompt) and
#     decode tokens/s (128 tokens after a 32-token prompt), megatron and transformers' generate.
#
#   scripts/bench/generate_hf.sh [--threads T] [--tokens N]
#
# Builds nothing: expects build/default/bin/megatron (or build/cpu/bin/megatron). Makes (or
# reuses) build/lm-eval-venv with PyPI torch and transformers.
set -euo pipefail
cd "$(dirname "$0")/../.."

threads=2
tokens=32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    *) echo "usage: $0 [--threads T] [--tokens N]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import transformers, torch' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers
fi
python="$venv/bin/python"
peer=scripts/bench/peers/hf_generate.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# $("$megatron" --version 2>/dev/null | head -1); $("$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'); $threads threads"

cat > "$work/prompts.jsonl" <<'PROMPTS'
{"prompt": "It is a truth universally acknowledged, that a single man in possession of a good fortune"}
{"prompt": "Mr. Bennet was so odd a mixture of quick parts"}
{"prompt": "The"}
PROMPTS

status=0
echo
echo "## greedy generation, $tokens tokens per prompt: megatron against transformers"
echo "| model | prompts | tokens equal | max abs logprob difference |"
echo "|---|---|---|---|"
for arch in gpt2 llama; do
  if [[ $arch == gpt2 ]]; then shape=(--layers 12 --hidden 768 --heads 12); else shape=(--layers 6 --hidden 512 --heads 8); fi
  "$python" "$peer" make --arch "$arch" --out "$work/$arch/hf" "${shape[@]}" >/dev/null 2>&1
  "$megatron" convert --from hf --load "$work/$arch/hf" --save "$work/$arch/ckpt" >/dev/null
  "$megatron" generate "$work/$arch/ckpt" --threads "$threads" --prompts "$work/prompts.jsonl" \
    --max-tokens "$tokens" --greedy --ignore-eod --logprobs --batch-size 1 --output "$work/$arch/ours.jsonl" 2>/dev/null
  "$python" "$peer" generate --dir "$work/$arch/hf" --prompts "$work/prompts.jsonl" --max-tokens "$tokens" \
    --threads "$threads" --out "$work/$arch/theirs.jsonl" 2>/dev/null
  "$python" - "$work/$arch/ours.jsonl" "$work/$arch/theirs.jsonl" "$arch" <<'PY' || status=1
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
equal = sum(o["tokens"] == t["tokens"] for o, t in zip(ours, theirs))
worst = 0.0
for o, t in zip(ours, theirs):
    n = len(t["prompt_tokens"])
    generated = o["logprobs"][n - 1:]  # ours: every token after the first, prompt included
    for a, b in zip(generated, t["logprobs"]):
        worst = max(worst, abs(a - b))
print(f"| {sys.argv[3]} | {len(ours)} | {equal}/{len(ours)} | {worst:.2e} |")
sys.exit(0 if equal == len(ours) and worst <= 1e-4 else 1)
PY
done

echo
echo "## the exported tokenizer"
"$megatron" convert --to hf --load "$work/gpt2/ckpt" --save "$work/gpt2/export" >/dev/null
"$python" - "$work/gpt2/export" "$megatron" <<'PY' || status=1
import json, subprocess, sys, transformers
tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
text = "It is a truth universally acknowledged, that a single man"
theirs = tok(text)["input_ids"]
with open(f"{sys.argv[1]}/text.jsonl", "w") as f:
    f.write(json.dumps({"text": text}) + "\n")
out = subprocess.run([sys.argv[2], "tokenize", "--tokenizer", "gpt2-bpe", "--vocab-file", f"{sys.argv[1]}/vocab.json",
                      "--merge-file", f"{sys.argv[1]}/merges.txt", "--input", f"{sys.argv[1]}/text.jsonl"],
                     capture_output=True, text=True)
ok = out.returncode == 0 and json.loads(out.stdout.strip().splitlines()[-1])["ids"] == theirs
print(f"AutoTokenizer loads the export ({type(tok).__name__}); ids equal megatron's: {ok}")
sys.exit(0 if ok else 1)
PY

echo
echo "## speed, GPT-2 124M shape, f32, batch 1, $threads threads (best of 3)"
prompt512=$("$python" -c 'print(" ".join(["word"] * 512))')
prompt32=$("$python" -c 'print(" ".join(["word"] * 32))')
best() { sort -g | tail -1; }
prefill=$(for i in 1 2 3; do "$megatron" generate "$work/gpt2/ckpt" --threads "$threads" --prompt "$prompt512" --max-tokens 1 --greedy 2>&1 >/dev/null \
  | sed -n 's/.*prefill [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p'; done | best)
decode=$(for i in 1 2 3; do "$megatron" generate "$work/gpt2/ckpt" --threads "$threads" --prompt "$prompt32" --max-tokens 128 --greedy --ignore-eod 2>&1 >/dev/null \
  | sed -n 's/.*decode [0-9]* tokens in [0-9]* steps, [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p'; done | best)
hf_prefill=$("$python" "$peer" speed --dir "$work/gpt2/hf" --prompt-tokens 512 --max-tokens 2 --threads "$threads" 2>/dev/null | "$python" -c 'import json,sys; print(json.load(sys.stdin)["prefill_tokens_per_s"])')
hf_decode=$("$python" "$peer" speed --dir "$work/gpt2/hf" --prompt-tokens 32 --max-tokens 128 --threads "$threads" 2>/dev/null | "$python" -c 'import json,sys; print(json.load(sys.stdin)["decode_tokens_per_s"])')
echo "| | megatron | transformers | ratio |"
echo "|---|---|---|---|"
"$python" -c "
p, hp, d, hd = $prefill, $hf_prefill, $decode, $hf_decode
print(f'| prefill tokens/s (512-token prompt) | {p:.0f} | {hp:.0f} | {p / hp:.2f}x |')
print(f'| decode tokens/s (128 tokens) | {d:.1f} | {hd:.1f} | {d / hd:.2f}x |')"
exit $status
