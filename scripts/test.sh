#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. `--preset NAME` picks a CMake
# preset (default: "default", which builds the CUDA parts whenever nvcc is found; GPU tests
# skip with a message when no GPU is present). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

preset="default"
if [[ "${1:-}" == "--preset" ]]; then
  preset="$2"
  shift 2
fi

./scripts/install-deps.sh --test
./scripts/build.sh "$preset"
ctest --preset "$preset" -j "$(nproc)" "$@"
