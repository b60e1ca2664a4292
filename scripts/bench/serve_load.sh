#!/usr/bin/env bash
# `megatron serve` under load on the CPU: 1, 8 and 32 concurrent clients (threads of the official
# `openai` client) sending greedy completions, against continuous batching and the static path
# (one request at a time), with transformers' generate in static batches of the same size as the
# peer; all on the same seeded random GPT-2-shaped model (made by transformers, imported with
# `megatron convert --from hf`), same machine, same threads, same run. Reports completion tokens
# per second, request latency p50/p99, the server's peak memory, and whether continuous batching
# answered exactly what the static path answered. Then the `openai` client's streamed completion
# and streamed chat must join into the non-streamed answers.
#
#   scripts/bench/serve_load.sh [--threads T] [--tokens N] [--layers L --hidden H --heads A]
#
# Builds nothing: expects build/default/bin/megatron (or build/cpu/bin/megatron). Makes (or
# reuses) build/lm-eval-venv with PyPI torch, transformers and openai.
set -euo pipefail
cd "$(dirname "$0")/../.."

threads=2
tokens=32
layers=6
hidden=512
heads=8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --tokens) tokens="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    --heads) heads="$2"; shift 2 ;;
    *) echo "usage: $0 [--threads T] [--tokens N] [--layers L --hidden H --heads A]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || megatron=build/cpu/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
venv=build/lm-eval-venv
if ! "$venv/bin/python" -c 'import transformers, torch, openai' >/dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch transformers openai
fi
python="$venv/bin/python"
client=scripts/bench/peers/serve_load.py
work=$(mktemp -d)
server_pid=""
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
echo "# $("$megatron" --version 2>/dev/null | head -1); $("$python" -c 'import torch, transformers, openai; print("torch", torch.__version__, "transformers", transformers.__version__, "openai", openai.__version__)'); $threads threads"

"$python" scripts/bench/peers/hf_generate.py make --arch gpt2 --out "$work/hf" --layers "$layers" \
  --hidden "$hidden" --heads "$heads" >/dev/null 2>&1
"$megatron" convert --from hf --load "$work/hf" --save "$work/ckpt" >/dev/null
# Prompts of 4 to 60 words from the bundled corpus.
"$python" - "$work/prompts.jsonl" <<'PY'
import json, random, sys
words = " ".join(json.loads(l)["text"] for l in open("data/corpora/austen.jsonl")).split()
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for _ in range(64):
        n, start = rng.randint(4, 60), rng.randrange(len(words) - 100)
        f.write(json.dumps({"prompt": " ".join(words[start:start + n])}) + "\n")
PY

serve() {  # serve MODE: starts the server, sets server_pid and port
  "$megatron" serve "$work/ckpt" --threads "$threads" --host 127.0.0.1 --port 0 \
    --port-file "$work/port" --batching "$1" --chat-template chatml --max-queue 256 \
    >"$work/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do [[ -s "$work/port" ]] && break; sleep 0.1; done
  port=$(cat "$work/port")
}
stop() {
  kill -TERM "$server_pid"
  wait "$server_pid" || true
  server_pid=""
  rm -f "$work/port"
}
peak_mib() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$server_pid/status"; }

status=0
echo
echo "## $tokens greedy tokens per request; tokens/s of wall time, latency in seconds"
echo "| clients | requests | continuous tokens/s | p50 | p99 | peak MiB | static tokens/s | p50 | p99 | peak MiB | transformers tokens/s (batches of C) | continuous / static | continuous / transformers | same answers |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for clients in 1 8 32; do
  requests=$((clients < 8 ? 8 : 2 * clients))
  for mode in continuous static; do
    serve "$mode"
    "$python" "$client" load --url "http://127.0.0.1:$port/v1" --prompts "$work/prompts.jsonl" \
      --clients "$clients" --requests "$requests" --max-tokens "$tokens" --out "$work/$mode.json"
    peak_mib >"$work/$mode.mib"
    stop
  done
  "$python" "$client" peer --dir "$work/hf" --prompts "$work/prompts.jsonl" --batch "$clients" \
    --requests "$requests" --max-tokens "$tokens" --threads "$threads" >"$work/peer.json" 2>/dev/null
  "$python" - "$work" "$clients" "$requests" <<'PY' || status=1
import json, sys
w = sys.argv[1]
c, s, p = (json.load(open(f"{w}/{n}.json")) for n in ("continuous", "static", "peer"))
cm, sm = (open(f"{w}/{n}.mib").read() for n in ("continuous", "static"))
same = c["texts"] == s["texts"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {c['tokens_per_s']:.1f} | {c['p50']:.2f} | {c['p99']:.2f} | {cm} "
      f"| {s['tokens_per_s']:.1f} | {s['p50']:.2f} | {s['p99']:.2f} | {sm} | {p['tokens_per_s']:.1f} "
      f"| {c['tokens_per_s'] / s['tokens_per_s']:.2f}x | {c['tokens_per_s'] / p['tokens_per_s']:.2f}x | {same} |")
sys.exit(0 if same else 1)
PY
done

echo
serve continuous
"$python" "$client" stream --url "http://127.0.0.1:$port/v1" || status=1
stop
exit $status
