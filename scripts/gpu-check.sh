#!/usr/bin/env bash
# shellcheck disable=SC2317  # the phase functions run through run_phase, by name
# The GPU check, in one call, for a machine with an NVIDIA GPU and the CUDA toolkit:
#   info   records nvidia-smi, nvcc --version and the host
#   deps   installs missing Debian packages (scripts/install-deps.sh; instant when all present)
#   build  configures and builds the `cuda` preset for this GPU's architecture (only the
#          targets the later phases use, unless --full-build)
#   unpack instead of deps and build, when a bundle from scripts/gpu-bundle.sh is here (a
#          machine without the project's libraries and without network): puts its binaries in
#          place, finds the machine's CUDA and NCCL libraries, checks that everything loads
#   tests  every GPU test: kernel_tests (label kernels), then the Cuda*/Nccl* suites of the
#          other binaries (CudaRun, CudaParallelRun, ...) and the dist MPI jobs (NCCL tests)
#   bench  build/cuda/bin/megatron-gpu-bench: GEMM TFLOP/s against cuBLAS, kernel GB/s against a
#          device-to-device copy, attention TFLOP/s (cuDNN, then the flash kernels alone); then
#          `megatron plan --calibrate` writes this GPU's hardware profile
#   train  gpt-125m and gpt-1.3b in bf16 on one GPU, mock data: ms per iteration (median after
#          the warm-up iterations; the two after the warm-up also write a per-op profile, whose
#          table is in the log), tokens/s, and MFU = model FLOPs per iteration (from
#          `megatron plan --json` on the same recipe and overrides) / (seconds per iteration x
#          the GPU's dense bf16 peak, from its name)
#   peer   the same two shapes, batches and iterations in PyTorch (scripts/bench/peers/torch_gpt.py:
#          bf16 autocast, SDPA attention) with the machine's python3, when it has torch with CUDA:
#          ms per iteration, tokens/s and MFU from the same model FLOPs, and the ratio to megatron
#   generate  gpt-125m's shape in bf16 (a one-iteration checkpoint on mock data): `megatron
#          generate --device cuda` prefill tokens/s (a 512-token prompt) and decode tokens/s (128
#          tokens, batch 1), and the CPU's greedy tokens against the GPU's
# then one summary. Each phase runs under its own time limit and within a total budget; a
# failing phase does not stop the next. The exit status is 1 when any phase failed (the summary
# names them), 2 for bad arguments.
#
# usage: scripts/gpu-check.sh [--only PHASES] [--skip PHASES] [--iters N] [--full-build]
#                             [--test-deps] [--bundle FILE | --no-bundle]
#   --only, --skip  comma-separated phases (default: all, in the order above)
#   --bundle FILE   unpack this bundle instead of deps and build (default: use
#                   .gpu-bundle/megatron-gpu-bundle.tar.xz when it exists)
#   --no-bundle     install and build even when a bundle is here
#   --iters N       training iterations per recipe (default 30; the first 5 are warm-up)
#   --full-build    build every target of the preset, not only the ones used here
#   --test-deps     install-deps.sh --test (PyTorch and friends: slow; no GPU test needs them)
# env: GPU_CHECK_BUDGET_S  total seconds for all phases (default 470)
#      CUDA_ARCHS          CMAKE_CUDA_ARCHITECTURES (default: this GPU's, e.g. 90; "preset":
#                          the preset's 80;90)
#      GPU_PEAK_FLOPS      dense bf16 FLOP/s for MFU when the GPU's name is not known
#      OUT                 when set: gpu-check.log, bench.json and results.tar.gz (every log,
#                          plan and metrics file of the phases) are written there too
# Results: build/gpu-check/ (gpu-check.log, bench.json, bench.txt, build.log, runs, plans).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

phases="info deps build tests bench train peer generate"
skip=""
bundle=""
default_bundle=.gpu-bundle/megatron-gpu-bundle.tar.xz
[[ -f "$default_bundle" ]] && bundle=$default_bundle
iters=30
warmup=5
full_build=0
test_deps=0
while [[ $# -gt 0 ]]; do
  if [[ "$1" =~ ^--(only|skip|iters|bundle)$ && $# -lt 2 ]]; then
    echo "$1 needs a value (see --help)" >&2
    exit 2
  fi
  case "$1" in
    --only) phases=${2//,/ }; shift 2 ;;
    --skip) skip=${2//,/ }; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --full-build) full_build=1; shift ;;
    --test-deps) test_deps=1; shift ;;
    --bundle) bundle=$2; shift 2 ;;
    --no-bundle) bundle=""; shift ;;
    -h|--help) sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done
for p in $phases $skip; do
  case "$p" in
    info|deps|build|unpack|tests|bench|train|peer|generate) ;;
    *) echo "unknown phase '$p' (info, deps, build, unpack, tests, bench, train, peer, generate)" >&2; exit 2 ;;
  esac
done
if ! [[ "$iters" =~ ^[0-9]+$ ]] || (( iters < warmup + 3 )); then
  echo "--iters must be an integer >= $((warmup + 3))" >&2
  exit 2
fi
# With a bundle, unpacking replaces installing and building.
if [[ -n "$bundle" ]]; then
  [[ -f "$bundle" ]] || { echo "no bundle $bundle (scripts/gpu-bundle.sh makes one)" >&2; exit 2; }
  phases=$(sed -E 's/(^| )deps( |$)/ /; s/(^| )build( |$)/ unpack /' <<<" $phases ")
  phases=$(tr -s ' ' <<<"$phases" | sed 's/^ //; s/ $//')
fi
budget=${GPU_CHECK_BUDGET_S:-470}
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "GPU_CHECK_BUDGET_S must be a number of seconds" >&2; exit 2; }

work=build/gpu-check
mkdir -p "$work"
logs=("$work/gpu-check.log")
if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT"
  logs+=("$OUT/gpu-check.log")
fi
[[ -d /usr/local/cuda/bin ]] && PATH="$PATH:/usr/local/cuda/bin"
export PATH
jobs=$(nproc)
build_dir=build/cuda
bundle_source=""
bundle_commit=""
glibc_needed=""
glibcxx_needed=""
# untar DIR [MEMBER...]: the bundle's members (all by default) into DIR, with tar, or with
# python3's tarfile where tar cannot read xz.
untar() {
  local dest=$1
  shift
  mkdir -p "$dest"
  tar -xJf "$bundle" -C "$dest" "$@" 2>/dev/null && return 0
  python3 - "$bundle" "$dest" "$@" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as bundle:
    names = sys.argv[3:]
    bundle.extractall(sys.argv[2], [bundle.getmember(n) for n in names] if names else None)
PY
}
if [[ -n "$bundle" ]]; then
  # manifest_value KEY: from the bundle's manifest.txt (read without unpacking the rest).
  rm -rf "$work/manifest"
  untar "$work/manifest" manifest.txt 2>/dev/null
  manifest=$(cat "$work/manifest/manifest.txt" 2>/dev/null)
  manifest_value() { sed -n "s/^$1=//p" <<<"$manifest" | head -n 1; }
  build_dir=$(manifest_value build_dir)
  bundle_source=$(manifest_value source_dir)
  glibc_needed=$(manifest_value glibc_needed)
  glibcxx_needed=$(manifest_value glibcxx_needed)
  bundle_commit=$(manifest_value commit)
  [[ -n "$build_dir" ]] || { echo "$bundle has no readable manifest.txt" >&2; exit 2; }
fi
megatron=$build_dir/bin/megatron
bench=$build_dir/bin/megatron-gpu-bench

wanted() { [[ " $phases " == *" $1 "* && " $skip " != *" $1 "* ]]; }

# --- JSON fields with awk (no python on a bare machine): one value per line is enough here ------
# json_num KEY < FILE: the first number stored under "KEY".
json_num() {
  awk -v key="$1" 'match($0, "\"" key "\": ?[-0-9.eE+]+") {
    v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: ?/, "", v); print v; exit }'
}

# metrics_summary FILE WARMUP: "median_ms iterations last_loss peak_tensor_bytes" of the
# training lines after the warm-up iterations ("- 0 - -" when there are none).
metrics_summary() {
  awk -v warm="$2" '
    function num(key,   v) {
      if (!match($0, "\"" key "\": ?[-0-9.eE+]+")) return ""
      v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: ?/, "", v); return v
    }
    /"lm_loss"/ {
      it = num("iteration"); ms = num("ms_per_iteration")
      loss = num("lm_loss"); mem = num("tensor_bytes_peak")
      if (it + 0 > warm && ms != "") t[n++] = ms + 0
    }
    END {
      if (n == 0) { print "- 0 " (loss == "" ? "-" : loss) " " (mem == "" ? "-" : mem); exit }
      for (i = 1; i < n; i++) { x = t[i]; for (j = i - 1; j >= 0 && t[j] > x; j--) t[j + 1] = t[j]; t[j + 1] = x }
      median = n % 2 ? t[int(n / 2)] : (t[n / 2 - 1] + t[n / 2]) / 2
      print median, n, loss, mem
    }' "$1" 2>/dev/null || echo "- 0 - -"
}

# --- the GPU: name, architecture, dense bf16 peak, plan profile ---------------------------------
gpu_name=""
gpu_arch=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_name=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  cap=$(timeout 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1)
  [[ "$cap" =~ ^[0-9]+\.[0-9]+$ ]] && gpu_arch=${cap/./}
fi
case "$gpu_name" in
  *H200*NVL*|*H100*NVL*) peak=835e12 ;;
  *H100*PCIe*) peak=756e12 ;;
  *H200*|*H100*|*H800*) peak=989e12 ;;
  *A100*|*A800*) peak=312e12 ;;
  *) peak=${GPU_PEAK_FLOPS:-} ;;
esac
case "$gpu_name" in
  *H200*) hardware=h200 ;;
  *H100*|*H800*) hardware=h100-sxm ;;
  *A100*|*A800*) hardware=a100-80gb ;;
  *) hardware="" ;;
esac

# --- phases -------------------------------------------------------------------------------------
phase_rows=()
failures=()
deadline=0
started=$SECONDS

# limited CMD...: CMD within what is left of the current phase (exit 124 when it runs out).
limited() {
  local left=$((deadline - SECONDS))
  if ((left < 1)); then
    echo "out of time before: $*"
    return 124
  fi
  timeout --kill-after=10 "$left" "$@"
}

# run_phase NAME LIMIT_S FUNCTION: FUNCTION under LIMIT_S seconds (or what is left of the budget).
run_phase() {
  local name=$1 limit=$2 fn=$3
  wanted "$name" || return 0
  local left=$((budget - (SECONDS - started))) t0=$SECONDS rc=0 result
  if ((left < 20)); then
    result="SKIPPED (out of time)"
    rc=1
  else
    ((limit > left)) && limit=$left
    deadline=$((SECONDS + limit))
    echo
    echo "==> $name (at most ${limit}s; $((SECONDS - started))s since the start)"
    "$fn" || rc=$?
    if ((rc == 0)); then
      result=ok
    elif ((rc == 124 || rc == 137)); then
      result="TIMED OUT (${limit}s)"
    else
      result="FAILED (exit $rc)"
    fi
  fi
  phase_rows+=("$(printf '%-6s %-24s %5ss' "$name" "$result" "$((SECONDS - t0))")")
  ((rc == 0)) || failures+=("$name")
  echo "<== $name: $result ($((SECONDS - t0))s)"
  save_results
}

# Packs what the phases wrote into $OUT/results.tar.gz, after each phase (a run cut short still
# returns it): one file beside gpu-check.log and bench.json, since a machine that hands $OUT
# back may return only a few files.
save_results() {
  [[ -n "${OUT:-}" ]] || return 0
  local files=() f d
  for f in bench.json bench.txt configure.log build.log unpack.log ctest-kernels.log ctest-gpu.log \
           "$work"/train-*.log "$work"/plan-*.json "$work"/peer-*.json; do
    f=${f#"$work/"}
    [[ -f "$work/$f" ]] && files+=("$f")
  done
  for d in "$work"/run-*; do
    [[ -f "$d/metrics.jsonl" ]] && files+=("${d#"$work/"}/metrics.jsonl")
    for f in "$d"/profile/rank-*.json; do  # the per-op profile and its Chrome trace
      [[ -f "$f" ]] && files+=("${f#"$work/"}")
    done
  done
  [[ -f "$work/bench.json" ]] && cp -f "$work/bench.json" "$OUT/"
  ((${#files[@]})) && tar -C "$work" -czf "$OUT/results.tar.gz" "${files[@]}"
  return 0
}

phase_info() {
  local rc=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    limited nvidia-smi || rc=$?
    limited nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode --format=csv ||
      true
  else
    echo "nvidia-smi not found: no NVIDIA driver on this machine"
    rc=1
  fi
  echo "GPU: ${gpu_name:-unknown}; architecture ${gpu_arch:-unknown}; dense bf16 peak" \
       "${peak:-unknown (set GPU_PEAK_FLOPS)} FLOP/s; plan profile ${hardware:-as in the recipe}"
  local nvcc
  nvcc=$(command -v nvcc || true)
  if [[ -n "$nvcc" ]]; then
    limited "$nvcc" --version || rc=$?
  else
    echo "nvcc not found (PATH and /usr/local/cuda/bin)"
    [[ -n "$bundle" ]] || rc=1  # a bundle needs no compiler
  fi
  echo "host: $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}'), $(uname -srm)"
  grep -m1 PRETTY_NAME /etc/os-release 2>/dev/null || true
  command -v cmake >/dev/null && cmake --version | head -n 1
  command -v g++ >/dev/null && g++ --version | head -n 1
  git log -1 --format='commit %h %s' 2>/dev/null || true
  git status --short 2>/dev/null | head -n 30
  return "$rc"
}

phase_deps() {
  local args=()
  ((test_deps)) && args+=(--test)
  limited ./scripts/install-deps.sh "${args[@]}"
}

phase_build() {
  local rc=0 archs=${CUDA_ARCHS:-$gpu_arch}
  local configure=(cmake --preset cuda)
  [[ -n "$archs" && "$archs" != preset ]] && configure+=("-DCMAKE_CUDA_ARCHITECTURES=$archs")
  echo "+ ${configure[*]}"
  limited "${configure[@]}" >"$work/configure.log" 2>&1 || rc=$?
  grep -E "megatron:|CMake Error|CMake Warning" "$work/configure.log"
  if ((rc != 0)); then
    tail -n 30 "$work/configure.log"
    return "$rc"
  fi
  local targets=() available
  if ((!full_build)); then
    available=$(ninja -C build/cuda -t targets all 2>/dev/null | cut -d: -f1)
    for t in megatron megatron-gpu-bench kernel_tests cli_tests dist_tests; do
      if grep -qx "$t" <<<"$available"; then
        targets+=("$t")
      else
        echo "no target $t in this build"
      fi
    done
  fi
  local build=(cmake --build --preset cuda -j "$jobs")
  ((${#targets[@]})) && build+=(--target "${targets[@]}")
  build+=(-- -k 0)  # ninja: keep building what does not depend on a failure
  echo "+ ${build[*]}"
  limited "${build[@]}" >"$work/build.log" 2>&1 || rc=$?
  echo "build: $(grep -c 'warning:' "$work/build.log") warning lines; full output in $work/build.log"
  if ((rc != 0)); then
    grep -E -A 3 'error:|FAILED:|undefined reference' "$work/build.log" | head -n 80
    tail -n 5 "$work/build.log"
  fi
  return "$rc"
}


# find_machine_lib NAME: the directory of this machine's NAME (CUDA toolkit, system, then pip's
# nvidia-* packages, then anywhere).
find_machine_lib() {
  local name=$1 d p nvcc_dir=""
  command -v nvcc >/dev/null && nvcc_dir=$(dirname "$(dirname "$(command -v nvcc)")")
  for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} ${nvcc_dir:+"$nvcc_dir/lib64" "$nvcc_dir/lib"} \
           /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -e "$d/$name" ]] && { echo "$d"; return 0; }
  done
  p=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF; exit }')
  [[ -n "$p" ]] && { dirname "$p"; return 0; }
  p=$(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null |
      while read -r d; do ls -d "$d"/nvidia/*/lib/"$name" 2>/dev/null; done | head -n 1)
  [[ -n "$p" ]] && { dirname "$p"; return 0; }
  p=$(timeout 60 find / -xdev \( -path /proc -o -path /sys \) -prune -o -name "$name" -print \
        2>/dev/null | head -n 1)
  [[ -n "$p" ]] && { dirname "$p"; return 0; }
  return 1
}

phase_unpack() {
  local dest=.gpu-bundle/unpacked rc=0
  echo "bundle: $bundle ($(du -h "$bundle" | cut -f1))"
  rm -rf "$dest"
  untar "$dest" 2>"$work/unpack.log" || { cat "$work/unpack.log"; return 1; }
  sed 's/^/  /' "$dest/manifest.txt"
  local head
  head=$(git rev-parse --short HEAD 2>/dev/null || true)
  if [[ -n "$head" && "${bundle_commit%+changes}" != "$head" ]]; then
    echo "warning: the bundle was built at ${bundle_commit}, this checkout is at $head:" \
         "its binaries are not this code (scripts/gpu-bundle.sh makes a new one)"
  fi
  # The binaries and ctest's files, at their places in this checkout.
  cp -a "$dest/tree/." ./ || return 1
  if [[ "$bundle_source" != "$PWD" ]]; then
    # ctest's files name the checkout the bundle was built in; cli_tests has that path compiled
    # in (the megatron binary, recipes/), so it is made to lead here when nothing is there.
    find "$build_dir" -name '*.cmake' -exec sed -i "s#$bundle_source/#$PWD/#g" {} +
    if [[ ! -e "$bundle_source" ]]; then
      mkdir -p "$(dirname "$bundle_source")" && ln -s "$PWD" "$bundle_source" &&
        echo "linked $bundle_source -> $PWD (the paths compiled into cli_tests)"
    elif [[ "$(realpath "$bundle_source")" != "$(realpath "$PWD")" ]]; then
      echo "warning: $bundle_source is another directory: cli_tests will run the binary there"
    fi
  fi
  # Libraries: the bundle's, then this machine's CUDA and NCCL.
  local path="$PWD/$dest/lib" name d
  for name in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
    if d=$(find_machine_lib "$name"); then
      echo "$name: $d"
      [[ ":$path:" == *":$d:"* ]] || path+=":$d"
    else
      echo "$name: not found on this machine (the binaries need it)"
      rc=1
    fi
  done
  # cuDNN is loaded at run time, when present: without it attention runs the flash kernels.
  if d=$(find_machine_lib libcudnn.so.9); then
    echo "libcudnn.so.9: $d (cuDNN attention)"
    [[ ":$path:" == *":$d:"* ]] || path+=":$d"
  else
    echo "libcudnn.so.9: not found on this machine: attention runs the flash kernels"
  fi
  # libstdc++ and libgcc_s from the bundle only where this machine's are older.
  local cxx
  cxx=$(ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ { print $NF; exit }')
  if [[ -n "$cxx" && -n "$glibcxx_needed" ]] && grep -qa "$glibcxx_needed" "$cxx"; then
    echo "libstdc++: this machine's ($cxx has $glibcxx_needed)"
  else
    echo "libstdc++: the bundle's (this machine's ${cxx:-none} lacks ${glibcxx_needed:-its version})"
    path+=":$PWD/$dest/lib-compat"
  fi
  export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local glibc
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ print "GLIBC_" $2 }')
  echo "glibc: ${glibc:-unknown} here; the bundle needs ${glibc_needed:-?}"
  if [[ -n "$glibc" && -n "$glibc_needed" ]] &&
     [[ "$(printf '%s\n' "$glibc" "$glibc_needed" | sort -V | head -n 1)" != "$glibc_needed" ]]; then
    echo "warning: this glibc is older than the bundle needs; build here instead (--no-bundle)"
  fi
  local b unresolved
  for b in "$megatron" "$bench" "$build_dir"/tests/*_tests; do
    [[ -x "$b" ]] || continue
    unresolved=$(ldd "$b" 2>&1 | grep -E 'not found|version .* not found' || true)
    if [[ -n "$unresolved" ]]; then
      echo "$b cannot load:"
      printf '  %s\n' "$unresolved"
      rc=1
    fi
  done
  limited "$megatron" --version || rc=$?
  return "$rc"
}

# ctest_run LOG ARGS...: ctest over the build's tests with ARGS, its output without the "Start"
# lines.
ctest_run() {
  local out=$1 rc=0 ctest=(ctest --preset cuda)
  shift
  [[ -n "$bundle" ]] && ctest=(ctest --test-dir "$build_dir" --output-on-failure)
  echo "+ ${ctest[*]} $*"
  limited "${ctest[@]}" --timeout 300 --no-tests=error "$@" >"$out" 2>&1 || rc=$?
  grep -v -E '^ *Start +[0-9]+:' "$out"
  return "$rc"
}

# gtest_run LOG BINARY ARGS...: a test binary as one process; its failures and totals.
gtest_run() {
  local out=$1 rc=0
  shift
  echo "+ $*"
  limited "$@" --gtest_brief=1 >"$out" 2>&1 || rc=$?
  grep -E '^\[ +(FAILED|PASSED|SKIPPED) +\]|tests? ran|Failure|error' "$out" | head -n 60
  return "$rc"
}

phase_tests() {
  local rc=0 rc2=0 dist='|^dist_tests_[0-9]+_ranks$'
  if [[ -n "$bundle" ]]; then
    # A bundle carries Open MPI's library but not its launcher, and a launcher of another build
    # cannot start ranks of this one.
    echo "dist MPI jobs (the NCCL communicator tests) left out: the bundle has no mpiexec"
    dist=""
  fi
  if ! command -v ctest >/dev/null; then
    # Without ctest, each binary runs as one process: a test that breaks the CUDA context then
    # fails the tests after it too, so read the first failure first.
    echo "no ctest on this machine: the test binaries run directly"
    gtest_run "$work/ctest-kernels.log" "$build_dir/tests/kernel_tests" || rc=$?
    gtest_run "$work/ctest-gpu.log" "$build_dir/tests/cli_tests" --gtest_filter='Cuda*:*/Cuda*' ||
      rc2=$?
  else
    # kernel_tests: one CUDA context per test process, so several at once.
    ctest_run "$work/ctest-kernels.log" -L '^kernels$' -j 8 || rc=$?
    # The GPU suites of the other binaries (gtest names: Suite.Test, Prefix/Suite.Test/param)
    # and the dist MPI jobs, which hold the NCCL communicator tests in a CUDA build.
    ctest_run "$work/ctest-gpu.log" -LE '^kernels$' -j 4 \
      -R "^(Cuda|Nccl|[A-Za-z0-9_]+/(Cuda|Nccl))[A-Za-z0-9_]*\\.$dist" || rc2=$?
  fi
  ((rc == 124 || rc2 == 124)) && return 124
  ((rc != 0)) && return "$rc"
  return "$rc2"
}

phase_bench() {
  [[ -x "$bench" ]] || { echo "$bench was not built"; return 1; }
  rm -f "$work/bench.json"
  limited "$bench" --json "$work/bench.json" 2>&1 | tee "$work/bench.txt"
  local rc=${PIPESTATUS[0]}
  ((rc == 3)) && echo "megatron-gpu-bench found no CUDA device"
  # The same attention shapes on the flash kernels alone: cuDNN's speed-up is the ratio.
  echo "== the flash kernels, for comparison (MEGATRON_CUDNN_ATTENTION=0) =="
  MEGATRON_CUDNN_ATTENTION=0 limited "$bench" --only attention --json "$work/bench-flash.json" \
    2>&1 | tee "$work/bench-flash.txt"
  # What this machine's kernels reach, as a hardware profile (docs/plan.md, "Calibration").
  limited "$megatron" plan --calibrate --hardware "${hardware:-h100-sxm}" \
    --output "$work/hardware-calibrated.json" --force 2>&1 | tee "$work/calibrate.txt"
  return "$rc"
}

train_rows=()

# train_one NAME RECIPE MICRO_BATCH GLOBAL_BATCH LIMIT_S
train_one() {
  local name=$1 recipe=$2 mbs=$3 gbs=$4 limit=$5 rc=0
  local dir="$work/run-$name"
  # One GPU: a world of one (the recipes are laid out for 8), a fixed number of iterations with
  # gradient accumulation (global batch = 2 micro-batches), mock tokens, no validation and no
  # checkpoint, a metrics line per iteration.
  local overrides=(training.train_iters="$iters" training.train_samples=null
                   training.train_tokens=null training.lr_warmup_iters="$warmup"
                   training.lr_warmup_fraction=null training.micro_batch_size="$mbs"
                   training.global_batch_size="$gbs" data.mock=true precision.dtype=bf16
                   logging.interval=1 eval.interval=null cluster.nodes=1 cluster.gpus_per_node=1)
  [[ -n "$hardware" ]] && overrides+=("cluster.hardware=$hardware")
  echo "--- $name: $recipe ${overrides[*]}"
  local flops="" tokens=""
  if limited "$megatron" plan "$recipe" "${overrides[@]}" --json >"$work/plan-$name.json" \
       2>"$work/plan-$name.err"; then
    flops=$(json_num model_per_iteration <"$work/plan-$name.json")
    tokens=$(json_num tokens_per_iteration <"$work/plan-$name.json")
    echo "plan: $flops model FLOPs and $tokens tokens per iteration"
  else
    echo "megatron plan failed:"
    cat "$work/plan-$name.err"
    rc=1
  fi
  rm -rf "$dir"
  local left=$((deadline - SECONDS))
  ((limit > left)) && limit=$left
  local run_rc=0
  # Two iterations right after the warm-up are profiled op by op (docs/profiling.md): the table
  # lands in the log, the JSON and the Chrome trace in $dir/profile/. The events they record do
  # not synchronise, so the median iteration time is unaffected.
  local profile=(--profile-steps "$((warmup + 1)):$((warmup + 3))")
  echo "+ $megatron run $recipe ... --device cuda ${profile[*]} --run-dir $dir (at most ${limit}s)"
  timeout --kill-after=10 "$((limit > 0 ? limit : 1))" "$megatron" run "$recipe" \
    "${overrides[@]}" --device cuda "${profile[@]}" --run-dir "$dir" >"$work/train-$name.log" 2>&1 || run_rc=$?
  cat "$work/train-$name.log"
  ((run_rc != 0)) && echo "megatron run exited $run_rc" && rc=$run_rc
  local ms n loss mem
  read -r ms n loss mem < <(metrics_summary "$dir/metrics.jsonl" "$warmup")
  local row
  row=$(awk -v ms="$ms" -v n="$n" -v f="$flops" -v tok="$tokens" -v peak="$peak" -v loss="$loss" \
            -v mem="$mem" -v name="$name" -v mbs="$mbs" -v gbs="$gbs" 'BEGIN {
    if (ms == "-" || ms + 0 <= 0) { printf "%-9s %4d %4d %6s %9s %10s %8s %6s %8s %8s", name, mbs, gbs, n, "-", "-", "-", "-", loss, "-"; exit }
    s = ms / 1000
    tps = tok != "" ? sprintf("%.0f", tok / s) : "-"
    tf = f != "" ? sprintf("%.1f", f / s / 1e12) : "-"
    mfu = (f != "" && peak + 0 > 0) ? sprintf("%.1f%%", 100 * f / s / peak) : "-"
    gib = mem ~ /^[0-9]/ ? sprintf("%.1f", mem / 2^30) : "-"
    printf "%-9s %4d %4d %6d %9.1f %10s %8s %6s %8s %8s", name, mbs, gbs, n, ms, tps, tf, mfu, loss, gib }')
  train_rows+=("$row")
  echo "result: $row"
  ((n == 0 && rc == 0)) && rc=1
  return "$rc"
}

phase_train() {
  [[ -x "$megatron" ]] || { echo "$megatron was not built"; return 1; }
  local rc=0 rc2=0
  train_one gpt-125m recipes/gpt-125m.yaml 8 16 100 || rc=$?
  train_one gpt-1.3b recipes/gpt-1.3b.yaml 4 8 200 || rc2=$?
  ((rc == 124 || rc2 == 124 || rc == 137 || rc2 == 137)) && return 124
  ((rc != 0)) && return "$rc"
  return "$rc2"
}

generate_rows=()

# generate: a gpt-125m-shaped bf16 checkpoint (one iteration on mock data), then megatron generate
# on the GPU: prefill and decode rates, and greedy tokens against the CPU's.
phase_generate() {
  [[ -x "$megatron" ]] || { echo "$megatron was not built"; return 1; }
  local dir="$work/generate" rc=0
  local tok=(--vocab-file data/tokenizers/gpt2/vocab.json --merge-file data/tokenizers/gpt2/merges.txt)
  rm -rf "$dir"
  limited "$megatron" run recipes/gpt-125m.yaml training.train_iters=1 training.train_samples=null \
    training.train_tokens=null training.lr_warmup_iters=0 training.lr_warmup_fraction=null \
    training.micro_batch_size=1 training.global_batch_size=1 data.mock=true precision.dtype=bf16 \
    eval.interval=null cluster.nodes=1 cluster.gpus_per_node=1 checkpoint.save="$dir/ckpt" \
    --device cuda --run-dir "$dir/run" >"$dir.train.log" 2>&1 || { tail -20 "$dir.train.log"; return 1; }
  local p512 p32
  p512=$(python3 -c 'print(" ".join(["word"] * 512))')
  p32=$(python3 -c 'print(" ".join(["word"] * 32))')
  limited "$megatron" generate "$dir/ckpt" "${tok[@]}" --device cuda --prompt "$p512" --max-tokens 1 \
    --greedy >/dev/null 2>"$dir.prefill.log" || rc=1
  limited "$megatron" generate "$dir/ckpt" "${tok[@]}" --device cuda --prompt "$p32" --max-tokens 128 \
    --greedy --ignore-eod >"$dir.cuda.txt" 2>"$dir.decode.log" || rc=1
  limited "$megatron" generate "$dir/ckpt" "${tok[@]}" --device cpu --prompt "$p32" --max-tokens 16 \
    --greedy --ignore-eod >"$dir.cpu.txt" 2>/dev/null || rc=1
  cat "$dir.prefill.log" "$dir.decode.log"
  local prefill decode same
  prefill=$(sed -n 's/.*prefill [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' "$dir.prefill.log")
  decode=$(sed -n 's/.*decode [0-9]* tokens in [0-9]* steps, [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' "$dir.decode.log")
  # The CPU generated 16 tokens: does its text begin the GPU's 128-token text? In bf16 the two
  # backends round differently, so a near-tie may go the other way: recorded, not a failure.
  if [[ "$(cat "$dir.cuda.txt")" == "$(head -c -1 "$dir.cpu.txt")"* ]]; then same=yes; else same=no; fi
  generate_rows+=("$(printf '%-9s %14s %14s %s' gpt-125m "${prefill:--}" "${decode:--}" "$same")")
  return "$rc"
}

peer_rows=()

# peer_one NAME LAYERS HIDDEN HEADS MICRO_BATCH GLOBAL_BATCH: PyTorch on the shape train_one ran
# (vocabulary 50304, sequence 2048), its FLOPs from that run's plan.
peer_one() {
  local name=$1 layers=$2 hidden=$3 heads=$4 mbs=$5 gbs=$6 rc=0
  local out="$work/peer-$name.json"
  echo "--- $name in PyTorch: $layers layers, hidden $hidden, $heads heads, micro batch $mbs x $((gbs / mbs))"
  limited "$python" scripts/bench/peers/torch_gpt.py --layers "$layers" --hidden "$hidden" \
    --heads "$heads" --seq 2048 --batch "$mbs" --microbatches $((gbs / mbs)) --vocab 50304 \
    --iters $((iters - warmup)) --warmup "$warmup" --device cuda --dtype bf16 >"$out" || rc=$?
  cat "$out"
  local ms flops ours row
  ms=$(json_num ms_per_iter <"$out")
  flops=$(json_num model_per_iteration <"$work/plan-$name.json" 2>/dev/null)
  ours=$(metrics_summary "$work/run-$name/metrics.jsonl" "$warmup" | cut -d' ' -f1)
  row=$(awk -v ms="$ms" -v f="$flops" -v peak="$peak" -v ours="$ours" -v name="$name" \
            -v tok="$((gbs * 2048))" 'BEGIN {
    if (ms == "" || ms + 0 <= 0) { printf "%-9s %9s %10s %8s %6s %s", name, "-", "-", "-", "-", "-"; exit }
    s = ms / 1000
    tf = f != "" ? sprintf("%.1f", f / s / 1e12) : "-"
    mfu = (f != "" && peak + 0 > 0) ? sprintf("%.1f%%", 100 * f / s / peak) : "-"
    ratio = (ours ~ /^[0-9]/ && ours + 0 > 0) ? sprintf("%.2f", ms / ours) : "-"
    printf "%-9s %9.1f %10.0f %8s %6s %s", name, ms, tok / s, tf, mfu, ratio }')
  peer_rows+=("$row")
  echo "peer: $row"
  return "$rc"
}

phase_peer() {
  python=""
  local p
  for p in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$p" >/dev/null &&
       "$p" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
      python=$p
      break
    fi
  done
  [[ -n "$python" ]] || { echo "no python3 with a CUDA torch here: no peer"; return 1; }
  "$python" -c 'import torch; print("peer: torch", torch.__version__, "on", torch.cuda.get_device_name())'
  local rc=0 rc2=0
  peer_one gpt-125m 12 768 12 8 16 || rc=$?
  peer_one gpt-1.3b 24 2048 16 4 8 || rc2=$?
  ((rc == 124 || rc2 == 124)) && return 124
  ((rc != 0)) && return "$rc"
  return "$rc2"
}

# --- the summary --------------------------------------------------------------------------------
bench_summary() {
  local json="$work/bench.json"
  if [[ ! -s "$json" ]]; then
    echo "(no bench results: $json is missing)"
    return
  fi
  awk '
    function str(key,   v) {
      if (!match($0, "\"" key "\": \"[^\"]*\"")) return ""
      v = substr($0, RSTART, RLENGTH); sub(/^"[^"]*": "/, "", v); sub(/"$/, "", v); return v
    }
    function num(key,   v) {
      if (!match($0, "\"" key "\": ?[-0-9.eE+]+")) return ""
      v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: ?/, "", v); return v
    }
    function fixed(v, digits) { return v == "" ? "-" : sprintf("%." digits "f", v) }
    /"cublas_peak_bf16_tflops"/ { bf16 = num("cublas_peak_bf16_tflops") }
    /"cublas_peak_tf32_tflops"/ { tf32 = num("cublas_peak_tf32_tflops") }
    /"copy_peak_gbps"/ { copy = num("copy_peak_gbps") }
    /"section": / {
      section = str("section"); name = str("name"); err = ""
      if (match($0, /"error": ".*"}/)) err = substr($0, RSTART + 10, RLENGTH - 12)
      rate = num(section == "kernels" ? "gbps" : "tflops")
      if (section == "reference") next
      if (section != last) {
        if (section == "gemm")
          printf "\nGEMM                                   TFLOP/s  vs cuBLAS (bf16 peak %s, tf32 %s TFLOP/s)\n", fixed(bf16, 1), fixed(tf32, 1)
        else if (section == "kernels")
          printf "\nkernel                                    GB/s  vs copy (device-to-device %s GB/s)\n", fixed(copy, 0)
        else
          printf "\nflash attention                        TFLOP/s  vs cuBLAS bf16 peak\n"
        last = section
      }
      if (err != "") { printf "  %-36s FAILED: %s\n", name, substr(err, 1, 80); next }
      printf "  %-36s %8s  %5s\n", name, fixed(rate, section == "kernels" ? 0 : 1), fixed(num("ratio"), 2)
    }' "$json"
}

summary() {
  echo
  echo "==================================== summary ===================================="
  echo "GPU: ${gpu_name:-unknown} (sm_${gpu_arch:-?}); dense bf16 peak ${peak:-unknown} FLOP/s;" \
       "$(git log -1 --format='commit %h' 2>/dev/null || echo 'commit ?')${bundle:+ (bundle of ${bundle_commit:-?})}"
  echo
  echo "phase  result                    time"
  printf '%s\n' "${phase_rows[@]}"
  if wanted bench; then bench_summary; fi
  if ((${#train_rows[@]})); then
    echo
    echo "training: bf16, one GPU, mock data, seq 2048; median of iterations $((warmup + 1))-$iters;" \
         "MFU = model FLOPs (megatron plan) / time / peak"
    printf '  %-9s %4s %4s %6s %9s %10s %8s %6s %8s %8s\n' recipe mbs gbs iters ms/iter tokens/s \
      TFLOP/s MFU loss 'mem GiB'
    printf '  %s\n' "${train_rows[@]}"
  fi
  if ((${#peer_rows[@]})); then
    echo
    echo "PyTorch on the same shapes (bf16 autocast, SDPA), same iterations; ratio = PyTorch ms /" \
         "megatron ms (above 1: megatron is faster)"
    printf '  %-9s %9s %10s %8s %6s %s\n' recipe ms/iter tokens/s TFLOP/s MFU ratio
    printf '  %s\n' "${peer_rows[@]}"
  fi
  if ((${#generate_rows[@]})); then
    echo
    echo "generation: bf16, batch 1, greedy; prefill of a 512-token prompt, decode of 128 tokens"
    printf '  %-9s %14s %14s %s\n' recipe prefill_tok/s decode_tok/s cpu_tokens_equal
    printf '  %s\n' "${generate_rows[@]}"
  fi
  echo
  if ((${#failures[@]})); then
    echo "FAILED phases: ${failures[*]} (total $((SECONDS - started))s)"
  else
    echo "all phases passed (total $((SECONDS - started))s)"
  fi
}

main() {
  echo "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); phases: $phases${skip:+ (skipping $skip)};" \
       "budget ${budget}s"
  run_phase info 30 phase_info
  run_phase deps 240 phase_deps
  run_phase build 330 phase_build
  run_phase unpack 120 phase_unpack
  run_phase tests 200 phase_tests
  run_phase bench 150 phase_bench
  run_phase train 300 phase_train
  run_phase peer 120 phase_peer
  run_phase generate 120 phase_generate
  summary
  ((${#failures[@]} == 0))
}

main 2>&1 | tee "${logs[@]}"
exit "${PIPESTATUS[0]}"
