#!/usr/bin/env bash
# Times `megatron plan` on the shipped recipes (whole process: start-up, YAML, plan, print).
# Uses hyperfine (Debian package) when present, else a plain loop. Prints the build it ran.
set -euo pipefail
cd "$(dirname "$0")/../.."
megatron="${MEGATRON:-build/default/bin/megatron}"
[[ -x "$megatron" ]] || { echo "build first: ./scripts/build.sh" >&2; exit 2; }
"$megatron" --version | sed 's/^/# /'
echo "# host: $(nproc) cores, $(uname -m)"
recipes=(recipes/gpt-tiny.yaml recipes/gpt-175b.yaml recipes/llama-70b.yaml)
if command -v hyperfine >/dev/null; then
  args=()
  for r in "${recipes[@]}"; do args+=("$megatron plan $r --json"); done
  hyperfine --warmup 3 --runs 30 -N "${args[@]}"
else
  for r in "${recipes[@]}"; do
    start=$(date +%s%N)
    for _ in $(seq 20); do "$megatron" plan "$r" --json >/dev/null; done
    end=$(date +%s%N)
    echo "$r: $(( (end - start) / 20000 )) us per plan (mean of 20, whole process)"
  done
fi
