#!/usr/bin/env bash
# Builds the libFuzzer targets (preset fuzz: clang, ASan + UBSan) and runs them.
#   scripts/fuzz.sh --ci                 each target for MEGATRON_FUZZ_SECONDS (20) under ctest
#   scripts/fuzz.sh [--seconds N] [--parallel P] [TARGET...]
#                                        each TARGET (default: all) for N seconds (default 3600),
#                                        P at a time (default: the cores), a summary at the end
# New inputs accumulate in build/fuzz/fuzz-corpus/TARGET; a crash, leak, timeout or
# out-of-memory leaves its input in build/fuzz/fuzz-findings/ and fails the script. Turn each
# into a test: copy it to tests/fuzz/crashes/TARGET/ (every build then replays it), fix, rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0
seconds=3600
parallel=$(nproc)
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ci) ci=1; shift ;;
    --seconds) seconds="$2"; shift 2 ;;
    --parallel) parallel="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: error: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

./scripts/install-deps.sh --fuzz
if [[ ! -f build/fuzz/build.ninja ]]; then
  cmake --preset fuzz >/dev/null
fi
cmake --build --preset fuzz -j "${MEGATRON_BUILD_JOBS:-$(nproc)}"

if [[ $ci -eq 1 ]]; then
  exec ctest --preset fuzz -j "$(nproc)"
fi

all=$(cd tests/fuzz && ls ./*_fuzz.cpp | sed 's|^\./||; s|_fuzz\.cpp$||')
[[ ${#targets[@]} -gt 0 ]] || read -r -a targets <<<"$(echo $all)"
mkdir -p build/fuzz/fuzz-findings build/fuzz/fuzz-logs
run_one() {
  local t="$1" inputs=("tests/fuzz/corpus/$1")
  [[ -d "tests/fuzz/crashes/$t" ]] && inputs+=("tests/fuzz/crashes/$t")
  mkdir -p "build/fuzz/fuzz-corpus/$t"
  "build/fuzz/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="build/fuzz/fuzz-findings/$t-" \
    "build/fuzz/fuzz-corpus/$t" "${inputs[@]}" >"build/fuzz/fuzz-logs/$t.log" 2>&1
}
echo "fuzz.sh: ${targets[*]}, ${seconds} s each, ${parallel} at a time; logs in build/fuzz/fuzz-logs/"
for t in "${targets[@]}"; do
  [[ -x "build/fuzz/tests/fuzz/fuzz_$t" ]] || { echo "fuzz.sh: error: no target $t (have: $all)" >&2; exit 2; }
done
for t in "${targets[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $parallel ]]; do wait -n || true; done
  run_one "$t" &
done
wait || true
failed=0
for t in "${targets[@]}"; do
  log="build/fuzz/fuzz-logs/$t.log"
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if grep -qE '^(==[0-9]+==ERROR|SUMMARY: |.*deadly signal|.*Test unit written to)' "$log"; then
    echo "fuzz.sh: $t: FINDING after ${runs:-?} runs ($cov): $(grep -m1 -oE 'Test unit written to .*' "$log")"
    failed=1
  else
    echo "fuzz.sh: $t: ${runs:-?} runs, no finding ($cov, corpus $(ls "build/fuzz/fuzz-corpus/$t" | wc -l) inputs)"
  fi
done
exit $failed
