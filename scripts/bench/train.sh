#!/usr/bin/env bash
# Training throughput of `megatron run` against a plain PyTorch GPT (peers/torch_gpt.py) on the
# same CPU threads, f32, no dropout, random/mock tokens, one micro-batch per iteration:
#   tiny  gpt-tiny's shape: 4 layers, hidden 128, 4 heads, seq 128, batch 8 (recipes/gpt-tiny.yaml)
#   124m  GPT-2 124M: 12 layers, hidden 768, 12 heads, seq 256, batch 4 (recipes/gpt-125m.yaml)
# Both sides use the padded vocabulary 50304 (megatron pads GPT-2's 50257 to a multiple of 128).
# megatron's tokens/s is the median of its per-iteration metrics.jsonl entries after the first 2;
# the peer times the same iterations after 2 warmup ones. Peak RSS is the whole process's.
#
# usage: scripts/bench/train.sh [--threads N] [--iters N] [--shapes tiny,124m] [--peer-only]
#   --threads  CPU threads for both (default: nproc)
#   --iters    timed iterations, after 2 warmup ones (default 10)
#   --shapes   which shapes to run (default tiny,124m)
#   --peer-only  run only the PyTorch peer (no megatron build needed)
# env: MEGATRON (default build/default/bin/megatron), PEER_PYTHON (default /usr/bin/python3,
# Debian's python3-torch). Needs bash and python3 (for JSON).
set -euo pipefail
cd "$(dirname "$0")/../.."

threads=$(nproc)
iters=10
shapes=tiny,124m
peer_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --peer-only) peer_only=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$threads" =~ ^[1-9][0-9]*$ && "$iters" =~ ^[1-9][0-9]*$ ]] ||
  { echo "--threads and --iters must be positive integers" >&2; exit 2; }

warmup=2
megatron="${MEGATRON:-build/default/bin/megatron}"
peer_python="${PEER_PYTHON:-/usr/bin/python3}"
if [[ $peer_only == 0 && ! -x "$megatron" ]]; then
  echo "build first: ./scripts/build.sh (or pass --peer-only)" >&2
  exit 2
fi
"$peer_python" -c 'import torch' 2>/dev/null ||
  { echo "$peer_python cannot import torch: apt-get install python3-torch" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

# Settings shared by both recipes: a fixed number of iterations, one micro-batch each, f32 on
# one CPU process, mock data, no dropout, no validation, a metrics line per iteration.
common=(training.train_iters=$((iters + warmup)) training.train_samples=null
        training.train_tokens=null training.lr_warmup_iters=0 training.lr_warmup_fraction=null
        data.mock=true model.hidden_dropout=0 model.attention_dropout=0 precision.dtype=f32
        logging.interval=1 eval.interval=null cluster.hardware=cpu cluster.nodes=1
        cluster.gpus_per_node=1 parallel.tensor=1 parallel.pipeline=1)

# megatron NAME RECIPE OVERRIDES...: trains, prints "tokens_per_s rss_peak_bytes".
run_megatron() {
  local name=$1 recipe=$2
  shift 2
  local dir="$out/megatron-$name"
  if ! "$megatron" run "$recipe" "${common[@]}" "$@" --threads "$threads" --run-dir "$dir" \
      >"$out/megatron-$name.log" 2>&1; then
    echo "megatron run failed on $name; its last lines:" >&2
    tail -n 20 "$out/megatron-$name.log" >&2
    exit 1
  fi
  python3 - "$dir/metrics.jsonl" "$warmup" <<'EOF'
import json, statistics, sys
path, warmup = sys.argv[1], int(sys.argv[2])
rows = [json.loads(line) for line in open(path) if line.strip()]
timed = [r["tokens_per_s"] for r in rows if r.get("iteration", 0) > warmup and "tokens_per_s" in r]
if not timed:
    sys.exit("no iterations after the warmup in " + path)
print(statistics.median(timed), max(r.get("rss_peak_bytes", 0) for r in rows))
EOF
}

# peer NAME ARGS...: prints "tokens_per_s rss_peak_bytes torch_version".
run_peer() {
  local name=$1
  shift
  "$peer_python" scripts/bench/peers/torch_gpt.py "$@" --vocab 50304 --iters "$iters" \
    --warmup "$warmup" --threads "$threads" >"$out/peer-$name.json"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]));
print(r["tokens_per_s"], r["rss_peak_bytes"], r["torch"])' "$out/peer-$name.json"
}

[[ $peer_only == 1 ]] || "$megatron" --version | sed 's/^/# /'
echo "# host: $(nproc) cores ($(uname -m)), load average $(cut -d' ' -f1-3 /proc/loadavg);" \
     "$threads threads, $iters timed iterations after $warmup warmup"

rows=()
IFS=, read -ra wanted <<<"$shapes"
for shape in "${wanted[@]}"; do
  case "$shape" in
    tiny)
      label="gpt-tiny (L4 h128 a4, s128 b8)"
      peer_args=(--layers 4 --hidden 128 --heads 4 --seq 128 --batch 8)
      megatron_args=(recipes/gpt-tiny.yaml training.micro_batch_size=8
                     training.global_batch_size=8 data.seq_length=128) ;;
    124m)
      label="gpt2-124m (L12 h768 a12, s256 b4)"
      peer_args=(--layers 12 --hidden 768 --heads 12 --seq 256 --batch 4)
      megatron_args=(recipes/gpt-125m.yaml cluster.device=cpu training.micro_batch_size=4
                     training.global_batch_size=4 data.seq_length=256) ;;
    *) echo "unknown shape '$shape' (tiny, 124m)" >&2; exit 2 ;;
  esac
  echo "# $label: pytorch..." >&2
  peer_result=$(run_peer "$shape" "${peer_args[@]}")
  read -r p_tps p_rss torch_version <<<"$peer_result"
  m_tps=nan m_rss=nan
  if [[ $peer_only == 0 ]]; then
    echo "# $label: megatron..." >&2
    megatron_result=$(run_megatron "$shape" "${megatron_args[@]}")
    read -r m_tps m_rss <<<"$megatron_result"
  fi
  rows+=("$label|$m_tps|$p_tps|$m_rss|$p_rss")
done

echo "# pytorch $torch_version ($peer_python)"
python3 - "${rows[@]}" <<'EOF'
import math, sys
head = ("shape", "megatron tok/s", "pytorch tok/s", "ratio", "megatron RSS", "pytorch RSS")
print("%-34s %15s %14s %7s %13s %12s" % head)
for row in sys.argv[1:]:
    label, m_tps, p_tps, m_rss, p_rss = row.split("|")
    m_tps, p_tps, m_rss, p_rss = map(float, (m_tps, p_tps, m_rss, p_rss))
    mib = lambda b: "-" if math.isnan(b) else "%.0f MiB" % (b / 2**20)
    num = lambda x: "-" if math.isnan(x) else "%.0f" % x
    ratio = "-" if math.isnan(m_tps) else "%.2fx" % (m_tps / p_tps)
    print("%-34s %15s %14s %7s %13s %12s" % (label, num(m_tps), num(p_tps), ratio, mib(m_rss),
                                             mib(p_rss)))
EOF
