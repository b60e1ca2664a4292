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
  libutf8proc-dev libsimdjson-dev libzstd-dev zlib1g-dev libsentencepiece-dev libpcre2-dev
  libhdf5-dev libopenblas-openmp-dev libopenmpi-dev openmpi-bin libcpp-httplib-dev libboost-dev
)
if [[ "${1:-}" == "--test" ]]; then
  # slurm-wlm and munge: the Slurm tests start a real Slurm on this machine (slurm-local.sh).
  packages+=(python3-torch python3-numpy python3-h5py slurm-wlm munge)
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  packages+=(clang libclang-rt-dev libomp-dev)
fi

# Where the CUDA toolkit is, cuDNN attention needs cudnn-frontend's C++ headers (header-only,
# MIT): NVIDIA publishes them in the PyPI wheel nvidia-cudnn-frontend. pip fetches that wheel at
# a pinned version and checks its SHA-256; its include/ goes to .cache/ (never committed), where
# CMake looks (cmake/cuda.cmake). Without them the CUDA build keeps its flash kernels.
cudnn_frontend_version=1.32.0
cudnn_frontend_sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
cudnn_frontend_dir="$(cd "$(dirname "$0")/.." && pwd)/.cache/cudnn-frontend-$cudnn_frontend_version"
has_cuda=0
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  has_cuda=1
  [[ -f "$cudnn_frontend_dir/include/cudnn_frontend.h" ]] || packages+=(python3-pip)
fi

fetch_cudnn_frontend() {
  [[ $has_cuda == 1 && ! -f "$cudnn_frontend_dir/include/cudnn_frontend.h" ]] || return 0
  if [[ $(uname -m) != x86_64 ]]; then
    echo "install-deps: cudnn-frontend's pinned wheel is x86_64's; cuDNN attention stays off" >&2
    return 0
  fi
  local tmp
  tmp=$(mktemp -d)
  echo "install-deps: fetching cudnn-frontend $cudnn_frontend_version's headers (PyPI wheel)"
  if ! /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
      -d "$tmp" "nvidia-cudnn-frontend==$cudnn_frontend_version" >"$tmp/pip.log" 2>&1; then
    echo "install-deps: warning: could not fetch nvidia-cudnn-frontend ($(tail -n 1 "$tmp/pip.log"));" \
         "the CUDA build keeps its flash attention" >&2
    rm -rf "$tmp"
    return 0
  fi
  local wheel
  wheel=$(ls "$tmp"/nvidia_cudnn_frontend-*.whl)
  if [[ $(sha256sum "$wheel" | cut -d' ' -f1) != "$cudnn_frontend_sha256" ]]; then
    echo "install-deps: error: $(basename "$wheel") does not have the pinned SHA-256" >&2
    rm -rf "$tmp"
    return 1
  fi
  mkdir -p "$cudnn_frontend_dir.partial"
  /usr/bin/python3 - "$wheel" "$cudnn_frontend_dir.partial" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    for name in wheel.namelist():
        if name.startswith("include/") and ".." not in name.split("/"):
            wheel.extract(name, sys.argv[2])
PY
  rm -rf "$cudnn_frontend_dir"
  mv "$cudnn_frontend_dir.partial" "$cudnn_frontend_dir"
  rm -rf "$tmp"
}

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  fetch_cudnn_frontend
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
fetch_cudnn_frontend
