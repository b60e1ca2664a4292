#!/usr/bin/env bash
# From a fresh clone to a first result: installs what is missing, builds, and runs the
# bundled tiny GPT recipe. Until `megatron run` lands, it plans that recipe on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> installing dependencies (Debian packages)"
./scripts/install-deps.sh
echo "==> building (preset: default)"
./scripts/build.sh default
megatron=build/default/bin/megatron

echo "==> $megatron --version"
"$megatron" --version
echo
echo "==> $megatron recipe show recipes/gpt-tiny.yaml"
"$megatron" recipe show recipes/gpt-tiny.yaml
echo
echo "==> $megatron plan recipes/gpt-tiny.yaml"
"$megatron" plan recipes/gpt-tiny.yaml
echo
echo "Next: $megatron plan recipes/gpt-175b.yaml  (or any recipe in recipes/; see README.md)"
