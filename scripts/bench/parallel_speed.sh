#!/usr/bin/env bash
# Data-parallel training throughput of `megatron run --nproc N` against PyTorch's
# DistributedDataParallel (gloo) on the same GPT, both with one thread per process, and each
# against its own one-process run with N threads: tokens/s and the scaling of each. Use on a
# quiet machine; compare ratios, not absolute numbers.
#
#   scripts/bench/parallel_speed.sh [--nproc N] [--iters N]
#
# megatron's tokens/s is the median of its per-iteration metrics.jsonl entries after the first 2.
set -euo pipefail
cd "$(dirname "$0")/../.."

nproc=2
iters=8
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nproc) nproc="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    *) echo "usage: $0 [--nproc N] [--iters N]" >&2; exit 2 ;;
  esac
done
warmup=2
megatron=${MEGATRON:-build/default/bin/megatron}
peer_python=${PEER_PYTHON:-/usr/bin/python3}
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# GPT L4 h256 a4, seq 256, vocab 8192, global batch 8: one micro-batch per iteration, of 8 on
# one process and of 8 / N on each data-parallel rank.
layers=4 hidden=256 heads=4 seq=256 batch=8 vocab=8192
recipe=(recipes/gpt-tiny.yaml model.num_layers=$layers model.hidden_size=$hidden
        model.num_attention_heads=$heads model.vocab_size=$vocab data.seq_length=$seq
        training.global_batch_size=$batch training.train_iters=$((iters + warmup))
        training.lr_warmup_iters=0 model.hidden_dropout=0 model.attention_dropout=0
        logging.interval=1 eval.interval=1000 data.mock=true)

median_tps() {
  python3 - "$1" "$warmup" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"tokens_per_s"' in l]
print(statistics.median(r["tokens_per_s"] for r in rows if r["iteration"] > int(sys.argv[2])))
PY
}

"$megatron" run "${recipe[@]}" training.micro_batch_size=$batch --threads "$nproc" \
  --run-dir "$out/one" >"$out/one.log" 2>&1 || { tail "$out/one.log" >&2; exit 1; }
m_one=$(median_tps "$out/one/metrics.jsonl")
"$megatron" run --nproc "$nproc" "${recipe[@]}" training.micro_batch_size=$((batch / nproc)) \
  --threads 1 --run-dir "$out/dp" >"$out/dp.log" 2>&1 || { tail "$out/dp.log" >&2; exit 1; }
m_dp=$(median_tps "$out/dp/metrics.jsonl")
peer=(--layers $layers --hidden $hidden --heads $heads --seq $seq --batch $batch --vocab $vocab
      --iters "$iters" --warmup $warmup)
p_one=$("$peer_python" scripts/bench/peers/torch_gpt.py "${peer[@]}" --threads "$nproc" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
p_dp=$("$peer_python" scripts/bench/peers/torch_ddp_gpt.py --nproc "$nproc" "${peer[@]}" --threads 1 |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')

echo "# GPT L$layers h$hidden a$heads, seq $seq, vocab $vocab, global batch $batch; $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$nproc" "$m_one" "$m_dp" "$p_one" "$p_dp" <<'PY'
import sys
n = sys.argv[1]
m_one, m_dp, p_one, p_dp = map(float, sys.argv[2:])
print(f"{'':34s} {'megatron tok/s':>15s} {'pytorch tok/s':>14s} {'ratio':>7s}")
print(f"{'1 process, ' + n + ' threads':34s} {m_one:15.0f} {p_one:14.0f} {m_one / p_one:6.2f}x")
print(f"{'data parallel ' + n + ' x 1 thread':34s} {m_dp:15.0f} {p_dp:14.0f} {m_dp / p_dp:6.2f}x")
print(f"{'scaling (dp / 1 process)':34s} {m_dp / m_one:14.2f}x {p_dp / p_one:13.2f}x")
PY
