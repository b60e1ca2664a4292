#!/usr/bin/env bash
# Packs a CUDA build for scripts/gpu-check.sh on a GPU machine that has the NVIDIA driver, CUDA 13
# and NCCL but none of the project's other libraries and no network to install them (such as a
# lent, offline GPU machine): build here, carry the bundle there, and gpu-check.sh unpacks it
# instead of installing packages and building.
#
# The bundle (.gpu-bundle/megatron-gpu-bundle.tar.xz, about 25 MiB) holds
#   tree/      the GPU binaries (megatron, megatron-gpu-bench, kernel_tests, cli_tests,
#              dist_tests, train_tests) and ctest's files for them, at their paths in the repo
#   lib/       every shared library they load except glibc's, the driver's, and CUDA's and
#              NCCL's own (libcudart, libcublas, libcublasLt, libnccl: the GPU machine's are used)
#   lib-compat/ libstdc++ and libgcc_s, used there only when the machine's are older
#   manifest.txt  commit, source and build directory, CUDA architectures, glibc needed
#
# usage: scripts/gpu-bundle.sh [--build-dir DIR] [--archs LIST] [--no-build] [--out FILE]
#   --build-dir DIR  the CUDA build to pack (default build/gpu-bundle: the `cuda` preset for a
#                    portable CPU, MEGATRON_NATIVE=OFF, configured there when missing). A build
#                    tuned with -march=native is refused: the GPU machine's processor may lack
#                    this one's instructions (AVX-512 here), and the tests' CPU reference would
#                    die of an illegal instruction.
#   --archs LIST     CMAKE_CUDA_ARCHITECTURES when configuring build/gpu-bundle (default 90: H100
#                    and H200; "80;90" adds the A100, at twice the kernels' compile time)
#   --no-build       pack DIR as it is (default: first build the targets above in it)
#   --out FILE       default .gpu-bundle/megatron-gpu-bundle.tar.xz (.gpu-bundle/ is git-ignored)
# Then, on the GPU machine: scripts/gpu-check.sh (it finds the bundle), with .gpu-bundle carried.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

build_dir=""
archs_wanted=90
do_build=1
out=.gpu-bundle/megatron-gpu-bundle.tar.xz
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --archs) archs_wanted=${2:?--archs needs a list such as 90 or "80;90"}; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$build_dir" ]]; then
  build_dir=build/gpu-bundle
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    echo "gpu-bundle: configuring $build_dir (cuda preset, portable CPU code, sm $archs_wanted)"
    cmake --preset cuda -B "$build_dir" -DMEGATRON_NATIVE=OFF \
      "-DCMAKE_CUDA_ARCHITECTURES=$archs_wanted"
  fi
fi
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" 2>/dev/null | head -n 1; }
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  echo "gpu-bundle: $build_dir is not a configured build" >&2
  exit 2
fi
if [[ "$(cache_value MEGATRON_CUDA)" == OFF ]] || ! grep -q 'kernels/CMakeFiles/megatron_kernels' \
     "$build_dir/build.ninja" 2>/dev/null; then
  echo "gpu-bundle: $build_dir is not a CUDA build (cmake --preset cuda)" >&2
  exit 2
fi
if [[ "$(cache_value MEGATRON_NATIVE)" != OFF ]]; then
  echo "gpu-bundle: $build_dir tunes the CPU code for this machine (-march=native); the GPU" \
       "machine's processor may lack its instructions. Reconfigure it with -DMEGATRON_NATIVE=OFF," \
       "or leave out --build-dir to use build/gpu-bundle" >&2
  exit 2
fi
build_dir=$(realpath --relative-to="$root" "$build_dir")
[[ "$build_dir" != ..* ]] || { echo "gpu-bundle: $build_dir is outside this checkout" >&2; exit 2; }

binaries=(bin/megatron bin/megatron-gpu-bench tests/kernel_tests tests/cli_tests tests/dist_tests
          tests/train_tests)
if ((do_build)); then
  targets=()
  for b in "${binaries[@]}"; do targets+=("${b##*/}"); done
  echo "gpu-bundle: building ${targets[*]} in $build_dir"
  cmake --build "$build_dir" --target "${targets[@]}"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tree/$build_dir" "$stage/lib" "$stage/lib-compat"

# The binaries, without symbols (a third of their size; a crash still names the frames that
# matter through the CUDA runtime's own messages).
for b in "${binaries[@]}"; do
  [[ -x "$build_dir/$b" ]] || { echo "gpu-bundle: $build_dir/$b is missing" >&2; exit 1; }
  mkdir -p "$stage/tree/$build_dir/${b%/*}"
  strip --strip-unneeded -o "$stage/tree/$build_dir/$b" "$build_dir/$b"
done
# ctest's files: every directory's CTestTestfile.cmake, and the gtest lists of the bundled test
# binaries (the others' includes then add a <name>_NOT_BUILT test, which gpu-check never selects).
while IFS= read -r f; do
  mkdir -p "$stage/tree/${f%/*}"
  cp "$f" "$stage/tree/$f"
done < <(find "$build_dir" -name CTestTestfile.cmake -not -path '*/_deps/*')
for b in kernel_tests cli_tests train_tests; do
  cp "$build_dir/tests/${b}[1]_tests.cmake" "$build_dir/tests/${b}[1]_include.cmake" \
     "$stage/tree/$build_dir/tests/"
done
for f in "$build_dir"/tests/*"[1]_include.cmake"; do
  [[ -f "$stage/tree/$f" ]] || cp "$f" "$stage/tree/$f"
done

# Shared libraries: whatever ldd resolves, less what the GPU machine must supply itself.
is_machine_lib() {
  case "$1" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|\
    libutil.so*|libcuda.so*|libnvidia-*|libcudart.so*|libcublas.so*|libcublasLt.so*|libnccl.so*)
      return 0 ;;
  esac
  return 1
}
missing=()
while read -r name path; do
  is_machine_lib "$name" && continue
  if [[ "$path" == "not" || -z "$path" ]]; then
    missing+=("$name")
    continue
  fi
  case "$name" in
    libstdc++.so*|libgcc_s.so*) cp -L "$path" "$stage/lib-compat/$name" ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
  esac
done < <(for b in "${binaries[@]}"; do ldd "$build_dir/$b"; done |
         awk '{ n = $1; sub(/.*\//, "", n) } $2 == "=>" { print n, $3 } $2 != "=>" { print n, "" }' |
         sort -u)
if ((${#missing[@]})); then
  echo "gpu-bundle: ldd cannot resolve: ${missing[*]}" >&2
  exit 1
fi

# What the GPU machine's glibc and libstdc++ must provide (the newest symbol versions used).
newest_version() {  # newest_version PREFIX FILES...: e.g. GLIBC_2.34
  local prefix=$1
  shift
  objdump -T "$@" 2>/dev/null | grep -o "${prefix}_[0-9][0-9.]*" | sort -V -u | tail -n 1
}
elves=("$stage"/tree/"$build_dir"/bin/* "$stage"/tree/"$build_dir"/tests/*_tests "$stage"/lib/*)
glibc_needed=$(newest_version GLIBC "${elves[@]}" "$stage"/lib-compat/*)
glibcxx_needed=$(newest_version GLIBCXX "${elves[@]}")
# The architectures nvcc built machine code for (ninja's command lines say it).
archs=$(grep -o 'code=\[compute_[0-9]*,sm_[0-9]*\]' "$build_dir/build.ninja" 2>/dev/null |
        grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ' || true)
[[ " $archs " == *" sm_90 "* ]] ||
  echo "gpu-bundle: warning: no sm_90 code in $build_dir (${archs:-none found}): Hopper GPUs will JIT or fail" >&2
{
  echo "source_dir=$root"
  echo "build_dir=$build_dir"
  echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +changes)"
  echo "created=$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "cuda_archs=${archs% }"
  echo "glibc_needed=$glibc_needed"
  echo "glibcxx_needed=$glibcxx_needed"
  echo "machine_libs=libcudart.so.13 libcublasLt.so.13 libnccl.so.2"
} >"$stage/manifest.txt"

mkdir -p "$(dirname "$out")"
echo "gpu-bundle: packing $(find "$stage" -type f | wc -l) files ($(du -sh "$stage" | cut -f1))"
tar -C "$stage" -cf - manifest.txt tree lib lib-compat | xz -T1 -6 >"$out.tmp"
mv "$out.tmp" "$out"
cat "$stage/manifest.txt"
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1048576)) MiB"
# The device tool carries the working tree and the bundle together, 64 MiB in all.
if ((size > 52 * 1048576)); then
  echo "gpu-bundle: warning: over 52 MiB; with the working tree it may not fit a 64 MiB carry" >&2
fi
