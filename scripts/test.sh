#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite three times: a normal build, one under
# AddressSanitizer + UndefinedBehaviorSanitizer (clang, which also builds the libFuzzer targets
# and runs them), one under ThreadSanitizer. KVM boot tests (label kvm) run wherever /dev/kvm
# opens and skip with a message elsewhere. Build dirs: build/, build-asan/, build-tsan/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)

run_suite() {
  local dir=$1
  shift
  echo "== configure and build ($dir): $*"
  cmake -S . -B "$dir" -G Ninja -DMINIVMM_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
  echo "== test ($dir)"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure -LE 'linux|fuzz|kvm-unit-tests')
}

# -O2 without debug info (GCC 12 at -O3 warns falsely inside std::vector) and sanitizer builds at
# -O1 with line tables only: the builds dominate the suite's time on a 2-core machine, and full
# -g roughly doubles compile time.
run_suite build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"

# ASan+UBSan: one clang build serves the tests and the libFuzzer targets (libFuzzer ships with
# clang), instead of a gcc sanitizer build and a second, fuzz-only one: a whole build less.
# Then the fuzzers: every seed, then a short fixed run of each target (docs/fuzzing.md says how
# to run them longer). Without clang (scripts/setup.sh installs it) gcc builds the tests alone.
if command -v clang++ >/dev/null; then
  run_suite build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_BUILD_BENCH=OFF \
    -DMINIVMM_FUZZ=ON -DMINIVMM_FUZZ_SECONDS=5
  echo "== fuzz (build-asan)"
  (cd build-asan && ctest -j "$jobs" --output-on-failure -L fuzz)
else
  echo "== fuzzers skipped: clang++ not found (scripts/setup.sh installs it)"
  run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_BUILD_BENCH=OFF
fi

# ThreadSanitizer (it cannot be combined with ASan, hence a build of its own): the threads of a
# run (loop, vCPU, signal, control socket) share devices, timer lists and the pause state.
# -O1 with line tables only, no benchmarks. To keep the whole script under 10 minutes on 2 cores
# it runs the unit tests except the bad-input CLI matrix (single-threaded process runs, which
# only cost time under TSan: ~0.3 s per exec) and the kernel pulse train's real-time tests (their
# 64 ms refill margin is for an uninstrumented build: under TSan on a busy host a refill came
# too late and 13 edges were missed; the plain and ASan builds run them), and, where /dev/kvm
# opens, the KVM tests that cover every tick delivery thread, pause/resume and a signal: not the
# whole boot matrix (nor the 16-guest density test, which is about time, not threads); and the
# seccomp selftests (each run ends at once), which prove that a forbidden syscall is reported
# from every kind of thread under TSan's signal handling too.
# halt_on_error: a race fails the test that found it.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
echo "== configure and build (build-tsan): ThreadSanitizer"
cmake -S . -B build-tsan -G Ninja -DMINIVMM_WERROR=ON -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DMINIVMM_SANITIZE=thread -DMINIVMM_BUILD_BENCH=OFF >/dev/null
cmake --build build-tsan -j "$jobs"
echo "== test (build-tsan)"
(cd build-tsan && ctest -j "$jobs" --output-on-failure -L '^unit$' -E '^BadInput|^KernelPulseTrainTest')
(cd build-tsan && ctest -j "$jobs" --output-on-failure -L kvm \
  -R '^PitTick/BootPauseTest|^BootDurationTest|^Signals/BootSignalTest.*\(15,|^ThreadKinds/BootSeccompSelftest\.Forbidden')
