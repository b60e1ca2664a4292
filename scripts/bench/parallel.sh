#!/usr/bin/env bash
# Per-rank peak memory and communication share of `megatron run --nproc N` under several
# layouts, against `megatron plan` for the same recipe and world: the plan's tensors (weights +
# gradients + optimizer state + activations in flight) against the engine's peak of live
# tensors, the plan's total (plus the runtime overhead) against the process's peak RSS, and the
# share of each rank's wall time spent blocked in communication (MPI over shared memory here).
#
#   scripts/bench/parallel.sh [--iters N]
set -euo pipefail
cd "$(dirname "$0")/../.."

iters=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iters) iters="$2"; shift 2 ;;
    *) echo "usage: $0 [--iters N]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A 30M-parameter GPT: big enough that weights and optimizer state show over the runtime.
model="recipes/gpt-tiny.yaml model.num_layers=8 model.hidden_size=512 model.num_attention_heads=8
       model.vocab_size=8192 data.seq_length=256 training.micro_batch_size=4
       training.global_batch_size=16 training.lr_warmup_iters=1 training.train_iters=$iters
       eval.interval=1000 logging.interval=1"
layouts=(
  "one process|1|"
  "dp2|2|"
  "dp2 distributed optimizer|2|parallel.distributed_optimizer=true"
  "tp2|2|parallel.tensor=2"
  "tp2 sequence parallel|2|parallel.tensor=2 parallel.sequence_parallel=true"
  "pp2|2|parallel.pipeline=2"
)
for entry in "${layouts[@]}"; do
  IFS='|' read -r name n overrides <<<"$entry"
  # shellcheck disable=SC2086
  "$megatron" plan --json $model $overrides cluster.gpus_per_node="$n" >"$work/plan.json"
  # shellcheck disable=SC2086
  "$megatron" run --nproc "$n" $model $overrides --run-dir "$work/run" >"$work/run.log" 2>&1 \
    || { cat "$work/run.log" >&2; exit 1; }
  python3 - "$name" "$work/plan.json" "$work/run.log" <<'PY'
import json, re, sys
name, plan, log = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3]).read()
mib = 1 << 20
pat = re.compile(r"rank (\d+) \(tp (\d+), dp (\d+), pp (\d+)\): peak tensors ([\d.]+) MiB "
                 r"\(optimizer state ([\d.]+) MiB\), peak RSS ([\d.]+) MiB(?:, ([\d.]+)% of)?")
for m in pat.finditer(log):
    rank, tp, dp, pp = map(int, m.group(1, 2, 3, 4))
    tensors, optimizer, rss = map(float, m.group(5, 6, 7))
    comm = m.group(8) or "0"
    mem = plan["stages"][pp]["memory"]
    planned = (mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"]) / mib
    print(f"{name:28s} rank {rank}: tensors {tensors:7.1f} MiB vs plan {planned:7.1f} "
          f"({tensors / planned:5.2f}x), optimizer {optimizer:6.1f} vs {mem['optimizer'] / mib:6.1f}, "
          f"RSS {rss:7.1f} vs plan {mem['total'] / mib:7.1f} ({rss / (mem['total'] / mib):5.2f}x), "
          f"communication {comm}% of wall time")
PY
done
