#!/usr/bin/env bash
# How close `megatron plan`'s step time is to `megatron run`'s on this machine's CPU: each shape
# is planned with a hardware profile (default: calibrated now with `plan --calibrate`), then
# trained for a few iterations; prints predicted and measured seconds per iteration and their
# ratio. Shapes (f32, no dropout, mock data, one process):
#   tiny      recipes/gpt-tiny.yaml as shipped: L4 h128 a4, s128, micro-batch 8, global 32
#   tiny-b8   gpt-tiny at one micro-batch of 8 per iteration (scripts/bench/train.sh's shape)
#   124m      GPT-2 124M: L12 h768 a12, s256, micro-batch 4 (scripts/bench/train.sh's shape)
#   124m-s1k  GPT-2 124M at s1024, two micro-batches of 2
#
# usage: scripts/bench/plan_accuracy.sh [--profile FILE.json|NAME] [--threads N] [--iters N]
#                                       [--shapes tiny,tiny-b8,124m,124m-s1k]
# The measured time is the median of the logged iterations after the first 2.
set -euo pipefail
cd "$(dirname "$0")/../.."

threads=$(nproc)
iters=6
shapes=tiny,tiny-b8,124m,124m-s1k
profile=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$threads" =~ ^[1-9][0-9]*$ && "$iters" =~ ^[1-9][0-9]*$ ]] ||
  { echo "--threads and --iters must be positive integers" >&2; exit 2; }
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
warmup=2

"$megatron" --version | sed 's/^/# /'
echo "# host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $threads threads"
if [[ -z "$profile" ]]; then
  profile="$out/calibrated.json"
  echo "# calibrating: $megatron plan --calibrate --threads $threads" >&2
  "$megatron" plan --calibrate --threads "$threads" --output "$profile" 2>"$out/calibrate.log" ||
    { cat "$out/calibrate.log" >&2; exit 1; }
fi
echo "# profile: $profile"

common=(training.train_iters=$((iters + warmup)) training.train_samples=null
        training.train_tokens=null training.lr_warmup_iters=0 training.lr_warmup_fraction=null
        data.mock=true model.hidden_dropout=0 model.attention_dropout=0 precision.dtype=f32
        logging.interval=1 eval.interval=null cluster.nodes=1 cluster.gpus_per_node=1
        cluster.device=cpu parallel.tensor=1 parallel.pipeline=1)

printf "%-40s %12s %12s %8s\n" shape "plan s/it" "run s/it" ratio
IFS=, read -ra wanted <<<"$shapes"
for shape in "${wanted[@]}"; do
  case "$shape" in
    tiny) label="gpt-tiny (s128, 4 x micro-batch 8)"
          args=(recipes/gpt-tiny.yaml) ;;
    tiny-b8) label="gpt-tiny (s128, micro-batch 8)"
          args=(recipes/gpt-tiny.yaml training.micro_batch_size=8 training.global_batch_size=8) ;;
    124m) label="gpt2-124m (s256, micro-batch 4)"
          args=(recipes/gpt-125m.yaml training.micro_batch_size=4 training.global_batch_size=4
                data.seq_length=256) ;;
    124m-s1k) label="gpt2-124m (s1024, 2 x micro-batch 2)"
          args=(recipes/gpt-125m.yaml training.micro_batch_size=2 training.global_batch_size=4
                data.seq_length=1024) ;;
    *) echo "unknown shape '$shape' (tiny, tiny-b8, 124m, 124m-s1k)" >&2; exit 2 ;;
  esac
  predicted=$("$megatron" plan "${args[@]}" "${common[@]}" --hardware "$profile" --json |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["estimate"]["step_time_s"])')
  dir="$out/run-$shape"
  if ! "$megatron" run "${args[@]}" "${common[@]}" cluster.hardware=cpu --threads "$threads" \
      --run-dir "$dir" >"$out/run-$shape.log" 2>&1; then
    echo "megatron run failed on $shape; its last lines:" >&2
    tail -n 20 "$out/run-$shape.log" >&2
    exit 1
  fi
  measured=$(python3 - "$dir/metrics.jsonl" "$warmup" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
timed = [r["ms_per_iteration"] / 1000 for r in rows if r.get("iteration", 0) > int(sys.argv[2])]
print(statistics.median(timed))
PY
)
  python3 -c 'import sys; l, p, m = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]);
print("%-40s %12.3f %12.3f %7.2fx" % (l, p, m, p / m))' "$label" "$predicted" "$measured"
done
