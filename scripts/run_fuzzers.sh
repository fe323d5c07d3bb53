#!/usr/bin/env bash
# Builds the libFuzzer targets in their own clang ASan+UBSan build and runs each one for a while,
# starting from the committed seed corpus. Prints one summary line per target; exits non-zero if
# any target found a crash, a hang (-timeout) or runaway memory (-rss_limit_mb).
#
#   scripts/run_fuzzers.sh [seconds-per-target] [build-dir] [target...]
#       seconds-per-target   default 30
#       build-dir            default build-fuzz (relative to the repository root)
#       target...            default: every target tests/fuzz/CMakeLists.txt registers
#   FUZZ_JOBS=N              run N targets at once (default 1; each uses one core)
#   FUZZ_FLAGS="..."         extra libFuzzer flags, e.g. "-max_len=16384 -use_value_profile=1"
#
# New inputs go to <build-dir>/fuzz-corpus/<target> (kept between runs, so repeated runs keep
# building on what earlier ones found); crash reproducers to <build-dir>/fuzz-artifacts/; full
# logs to <build-dir>/fuzz-logs/. See docs/fuzzing.md for reproducing and minimising a crash.
set -euo pipefail

seconds=${1:-30}
build=${2:-build-fuzz}
shift $(($# < 2 ? $# : 2))

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

targets=("$@")

generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
echo "run_fuzzers: configuring and building $build" >&2
cmake -S . -B "$build" "${generator[@]}" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_FUZZ=ON \
  -DMINIVMM_BUILD_GUEST=OFF -DMINIVMM_BUILD_BENCH=OFF >/dev/null

# "<target> <max_len>" per line, written by tests/fuzz/CMakeLists.txt at configure time: every
# registered target (a hand-kept list here once missed the virtio and input-parser targets).
list="$build/tests/fuzz/fuzz_targets.txt"
[[ -f "$list" ]] || { echo "run_fuzzers: $list missing (not a clang fuzz build?)" >&2; exit 1; }
declare -A max_lens=()
all_targets=()
while read -r name len; do
  all_targets+=("$name")
  max_lens[$name]=$len
done <"$list"
if ((${#targets[@]} == 0)); then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  [[ -n "${max_lens[$t]:-}" ]] || { echo "run_fuzzers: unknown target $t" >&2; exit 1; }
done
cmake --build "$build" --target "${targets[@]}" >/dev/null

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"

run_one() {
  local t=$1
  local work="$build/fuzz-corpus/$t" log="$build/fuzz-logs/$t.log"
  mkdir -p "$work"
  local rc=0
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of flags
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 \
    -max_len="${max_lens[$t]}" -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" \
    ${FUZZ_FLAGS:-} "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  summarize "$t" "$log" "$rc"
}

summarize() {
  local t=$1 log=$2 rc=$3
  local execs rate cov ft corp result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  corp=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if ((rc == 0)); then
    result="ok, 0 crashes"
  else
    local unit
    unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    result="FAILED (exit $rc): ${unit:-see $log}"
  fi
  printf '%-26s %5ss  execs %10s  exec/s %6s  cov %5s  ft %6s  corpus %5s  %s\n' "$t" \
    "$seconds" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
  return "$rc"
}

jobs_max=${FUZZ_JOBS:-1}
failed=0
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs_max)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
