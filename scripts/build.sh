#!/usr/bin/env bash
# Configures and builds one CMake preset (default: "default", CUDA when nvcc is found), all of
# it or the targets named after it (`./scripts/build.sh cpu megatron`). Used by quickstart.sh
# and test.sh; safe to run again (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."

preset="${1:-default}"
shift || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
jobs="${MEGATRON_BUILD_JOBS:-$(nproc)}"
if [[ ! -f "build/$preset/build.ninja" ]]; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
