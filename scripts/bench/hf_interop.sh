#!/usr/bin/env bash
# Hugging Face round trip through the real transformers: for a GPT-2- and a Llama-shaped (GQA)
# small random model, `megatron convert --from hf` then `--to hf`, and check (a) every
# re-exported tensor equals the original bitwise and (b) transformers loads the re-exported
# model and its logits on random tokens are identical to the original's.
#
#   scripts/bench/hf_interop.sh [--tp T] [--pp P]
#
# Builds nothing: expects build/default/bin/megatron. Makes (or reuses) a venv with the system
# torch under build/hf-venv and installs transformers 4.38.2 (the newest line that supports
# torch 1.13) and safetensors 0.4 into it.
set -euo pipefail
cd "$(dirname "$0")/../.."

tp=1
pp=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tp) tp="$2"; shift 2 ;;
    --pp) pp="$2"; shift 2 ;;
    *) echo "usage: $0 [--tp T] [--pp P]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
"$megatron" convert --help >/dev/null 2>&1 || { echo "$megatron has no convert command" >&2; exit 1; }

venv=build/hf-venv
if ! "$venv/bin/python" -c 'import transformers, safetensors' >/dev/null 2>&1; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q "transformers==4.38.2" "safetensors>=0.4.1,<0.5"
fi
python="$venv/bin/python"
peer=scripts/bench/peers/hf_interop.py

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# megatron $("$megatron" --version 2>/dev/null | head -1); $("$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'); tp $tp pp $pp"
status=0
for arch in gpt2 llama; do
  "$python" "$peer" make --arch "$arch" --out "$work/$arch-hf"
  "$megatron" convert --from hf --load "$work/$arch-hf" --save "$work/$arch-ckpt" --tp "$tp" --pp "$pp"
  "$megatron" convert --to hf --load "$work/$arch-ckpt" --save "$work/$arch-back"
  "$python" "$peer" compare "$work/$arch-hf" "$work/$arch-back" || status=1
  # The import is ready to fine-tune: its recipe trains from it (fresh optimizer, iteration 0).
  "$megatron" run "$work/$arch-ckpt/recipe.yaml" checkpoint.load="$work/$arch-ckpt" \
    training.train_iters=2 training.lr_warmup_iters=1 logging.interval=1 --run-dir "$work/$arch-run" 2>&1 \
    | grep -E "loaded checkpoint|iteration +2/" || { echo "$arch: fine-tuning the import failed" >&2; status=1; }
done
exit $status
