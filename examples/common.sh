# Sourced by each example's run.sh: finds (or builds) the megatron command, reads --short, and
# gives `step` (a command shown, then run with its output kept in the example's log) and
# `metric` (a number from a results JSON).
set -euo pipefail
example_dir=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$example_dir/../.." && pwd)
short=false
threads=$(nproc)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --short) short=true; shift ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "usage: $0 [--short] [--threads N]" >&2; exit 2 ;;
  esac
done
if [[ -n "${MEGATRON:-}" ]]; then
  megatron=$MEGATRON
elif [[ -x "$root/build/default/bin/megatron" ]]; then
  megatron=$root/build/default/bin/megatron
else
  echo "==> building the megatron command (./scripts/build.sh cpu megatron)"
  (cd "$root" && ./scripts/build.sh cpu megatron)
  megatron=$root/build/cpu/bin/megatron
fi
cd "$example_dir"
rm -rf runs
mkdir -p data runs
log=runs/log.txt

step() {  # description, command...
  echo "==> $1"
  shift
  local started=$SECONDS
  if ! "$@" >>"$log" 2>&1; then
    tail -30 "$log" >&2
    echo "failed: $*" >&2
    exit 1
  fi
  echo "    done in $((SECONDS - started)) s"
}

metric() {  # results.json, task, metric: the value to 4 decimals
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%.4f" % r["results"][sys.argv[2]][sys.argv[3] + ",none"])' "$@"
}
