#!/usr/bin/env bash
# Checkpoint speed: `megatron run` saving (synchronous, and asynchronous: how long the step loop
# is held) and loading a 30M-parameter GPT's full training state (weights + Adam moments), and
# `megatron convert` to another layout, against PyTorch's torch.save / torch.load of the same
# tensors (read from the checkpoint with h5py, so the bytes are identical) in the same run.
# Each save is synced to disk on both sides (megatron fsyncs; the peer calls os.fsync).
#
#   scripts/bench/checkpoint.sh [--layers N] [--hidden H]
set -euo pipefail
cd "$(dirname "$0")/../.."

layers=8
hidden=512
while [[ $# -gt 0 ]]; do
  case "$1" in
    --layers) layers="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    *) echo "usage: $0 [--layers N] [--hidden H]" >&2; exit 2 ;;
  esac
done
megatron=build/default/bin/megatron
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 1; }
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null \
  || { echo "needs /usr/bin/python3 with torch and h5py (scripts/install-deps.sh --test)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model="recipes/gpt-tiny.yaml model.num_layers=$layers model.hidden_size=$hidden
       model.num_attention_heads=8 model.vocab_size=8192 data.seq_length=64
       training.micro_batch_size=1 training.global_batch_size=1 training.lr_warmup_iters=1
       eval.interval=1000 logging.interval=1"
seconds() { grep -o "$1" "$2" | grep -o '[0-9.]* s)' | tr -d ' s)'; }

min() { printf '%s\n' "$@" | sort -g | head -1; }
# Best of 3 on both sides (the machine is shared): save, in three fresh save directories.
saves=()
for i in 1 2 3; do
  rm -rf "$work/sync"
  # shellcheck disable=SC2086
  "$megatron" run $model training.train_iters=2 checkpoint.save="$work/sync" --run-dir "$work/r1" \
    >"$work/sync.log" 2>&1 || { cat "$work/sync.log" >&2; exit 1; }
  saves+=("$(grep -o 'saved checkpoint.*' "$work/sync.log" | grep -o '[0-9.]* s)$' | tr -d ' s)')")
done
save_s=$(min "${saves[@]}")
mib=$(du -sm "$work/sync/iter_0000002" | cut -f1)

# Async: the step loop is held only while the state is copied; the log's step times show it.
# shellcheck disable=SC2086
"$megatron" run $model training.train_iters=2 checkpoint.save="$work/async" \
  checkpoint.async_save=true --run-dir "$work/r2" >"$work/async.log" 2>&1 \
  || { cat "$work/async.log" >&2; exit 1; }

# Load: a run that continues from the checkpoint logs how long loading took.
loads=()
for i in 1 2 3; do
  # shellcheck disable=SC2086
  "$megatron" run $model training.train_iters=3 checkpoint.load="$work/sync" --run-dir "$work/r3" \
    >"$work/load.log" 2>&1 || { cat "$work/load.log" >&2; exit 1; }
  loads+=("$(grep -o 'loaded checkpoint.*' "$work/load.log" | grep -o '[0-9.]* s$' | tr -d ' s')")
done
load_s=$(min "${loads[@]}")

start=$(date +%s.%N)
"$megatron" convert --quiet --load "$work/sync" --save "$work/tp2pp2" --tp 2 --pp 2 >/dev/null
convert_s=$(echo "$(date +%s.%N) - $start" | bc)

/usr/bin/python3 - "$work/sync/iter_0000002/checkpoint.h5" "$work" "$save_s" "$load_s" "$convert_s" "$mib" <<'PY'
import os, sys, time
import h5py, torch
index, work, save_s, load_s, convert_s, mib = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
state = {}
with h5py.File(index, "r") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            state[name] = torch.from_numpy(obj[...])
    f.visititems(visit)
n = sum(t.numel() for t in state.values())
path = os.path.join(work, "peer.pt")
# Resuming also means copying into the model's and optimizer's tensors (load_state_dict), as
# megatron's load does; the peer gets the same work.
dest = {k: torch.empty_like(v) for k, v in state.items()}
best_save = best_load = float("inf")
for _ in range(3):
    t = time.perf_counter()
    with open(path, "wb") as out:
        torch.save(state, out)
        out.flush()
        os.fsync(out.fileno())
    best_save = min(best_save, time.perf_counter() - t)
    t = time.perf_counter()
    loaded = torch.load(path)
    with torch.no_grad():
        for k, v in loaded.items():
            dest[k].copy_(v)
    best_load = min(best_load, time.perf_counter() - t)
    del loaded
peer_mib = os.path.getsize(path) / 2**20
print(f"state: {len(state)} tensors, {n / 1e6:.1f}M values; megatron {mib:.0f} MiB on disk, "
      f"torch.save {peer_mib:.0f} MiB")
print(f"{'':24s} {'megatron':>10s} {'torch':>10s} {'ratio':>8s}")
print(f"{'save (fsynced), s':24s} {save_s:10.3f} {best_save:10.3f} {best_save / save_s:7.2f}x")
print(f"{'load into the model, s':24s} {load_s:10.3f} {best_load:10.3f} {best_load / load_s:7.2f}x")
print(f"{'convert to tp2 x pp2, s':24s} {convert_s:10.3f} {'-':>10s}")
print("(ratio > 1: megatron is faster; best of 3 on each side. megatron's load also checks "
      "every piece's CRC-32 and could reshard; torch.load checks none)")
PY
echo "async save: step times around the save (the loop waits only for the copy):"
grep -E "iteration +[12]/|saving checkpoint|saved checkpoint" "$work/async.log" \
  | sed -E 's/.*(iteration +[0-9]+\/ +[0-9]+).*elapsed time per iteration \(ms\): ([0-9.]+).*/  \1: \2 ms/; s/^\[[^]]*\] \[info\] /  /'
