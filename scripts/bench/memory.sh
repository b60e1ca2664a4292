#!/usr/bin/env bash
# Peak memory of `megatron run` against what `megatron plan` predicts for the same recipe on one
# process, in MiB: the plan's tensors (weights + gradients + optimizer state + activations in
# flight) against the engine's measured peak of live tensors, and the plan's total (tensors +
# the hardware profile's runtime overhead) against the whole process's peak resident memory.
#
#   scripts/bench/memory.sh [--iters N] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/../.."

iters=3
threads=$(nproc)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iters) iters="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "usage: $0 [--iters N] [--threads N]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common="training.lr_warmup_iters=0 training.train_iters=$iters logging.interval=1 eval.interval=null data.mock=true"
configs=(
  "gpt-tiny f32|recipes/gpt-tiny.yaml"
  "gpt-tiny bf16|recipes/gpt-tiny.yaml precision.dtype=bf16"
  "gpt-tiny full recompute|recipes/gpt-tiny.yaml training.recompute=full"
  "gpt-tiny selective|recipes/gpt-tiny.yaml training.recompute=selective"
  "t5-tiny f32|recipes/t5-tiny.yaml"
  "t5-tiny relative|recipes/t5-tiny.yaml model.position_embedding=relative"
  "t5-tiny bf16 selective|recipes/t5-tiny.yaml precision.dtype=bf16 training.recompute=selective"
  "t5-base b4 s512/128|recipes/t5-base.yaml training.micro_batch_size=4 training.global_batch_size=4 cluster.hardware=cpu cluster.gpus_per_node=1 precision.dtype=f32 model.hidden_dropout=0 model.attention_dropout=0"
  "gpt-125m b4 s256|recipes/gpt-125m.yaml training.train_tokens=null training.micro_batch_size=4 training.global_batch_size=4 data.seq_length=256 cluster.hardware=cpu cluster.nodes=1 cluster.gpus_per_node=1 parallel.tensor=1 parallel.pipeline=1 parallel.data=null precision.dtype=f32 model.hidden_dropout=0 model.attention_dropout=0"
)

printf "%-26s %12s %14s %10s %13s %10s %10s\n" "configuration" "plan tensors" "engine peak" "plan err" "plan total" "RSS" "plan err"
for entry in "${configs[@]}"; do
  name="${entry%%|*}"
  args="${entry#*|} $common"
  # shellcheck disable=SC2086
  plan=$("$megatron" plan $args --json | python3 -c 'import json,sys; m=json.load(sys.stdin)["memory"]["peak_rank"]; print(m["total"] - m["runtime"], m["total"])')
  # shellcheck disable=SC2086
  "$megatron" run $args --threads "$threads" --run-dir "$work/$RANDOM" > "$work/log" 2>&1 ||
    { cat "$work/log" >&2; exit 1; }
  run_dir=$(ls -td "$work"/*/ | head -1)
  python3 - "$name" $plan "$run_dir/metrics.jsonl" <<'PY'
import json, sys
name, plan, plan_total, path = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = [json.loads(l) for l in open(path)]
tensors = max(r["tensor_bytes_peak"] for r in rows)
rss = max(r["rss_peak_bytes"] for r in rows)
mib = 1 << 20
print(f"{name:<26} {plan/mib:12.1f} {tensors/mib:14.1f} {100*(plan-tensors)/tensors:+9.1f}% "
      f"{plan_total/mib:13.1f} {rss/mib:10.1f} {100*(plan_total-rss)/rss:+9.1f}%")
PY
done
