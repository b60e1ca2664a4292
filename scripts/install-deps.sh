#!/usr/bin/env bash
# Installs the Debian packages that building and testing megatron need.
# Idempotent: when every package is present it only checks, in well under a second.
# `--test` adds what only the test suite needs: Debian's PyTorch and NumPy, the independent
# reference the whole-model tests compare against, and h5py, which reads checkpoints as any
# HDF5 user would, and Slurm with munge for the `megatron submit` tests. `--fuzz` adds clang with libFuzzer and its OpenMP (scripts/fuzz.sh).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  libutf8proc-dev libsimdjson-dev libzstd-dev zlib1g-dev libsentencepiece-dev
  libhdf5-dev libopenblas-openmp-dev libopenmpi-dev openmpi-bin libcpp-httplib-dev
)
if [[ "${1:-}" == "--test" ]]; then
  # slurm-wlm and munge: the Slurm tests start a real Slurm on this machine (slurm-local.sh).
  packages+=(python3-torch python3-numpy python3-h5py slurm-wlm munge)
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  packages+=(clang libclang-rt-dev libomp-dev)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
