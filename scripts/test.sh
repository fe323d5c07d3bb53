#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite in three builds: the release build users
# run (the KVM boot tests and the command-line tests against the shipped binary), one under
# AddressSanitizer + UndefinedBehaviorSanitizer (clang: every test but the density test, and the
# libFuzzer targets), one under ThreadSanitizer (the unit tests and the KVM tests that cover
# every thread). KVM boot tests (label kvm) run wherever /dev/kvm opens and skip with a message
# elsewhere. Build dirs: build-release/, build-asan/, build-tsan/ (build/ stays the developer's,
# scripts/run.sh's).
#
# The budget is 10 minutes on 2 cores, and compiling is most of it, so each test is compiled
# where it runs: the unit tests only in the two sanitizer builds (which run all of them), the
# benchmarks in none (scripts/bench_*.sh build them), and the ASan build at -O0, whose compile
# is 2.3x cheaper than -O1 under clang with ASan (the guests, not the VMM, bound the KVM tests).
# The two sanitizer builds are unity builds (CMAKE_UNITY_BUILD, 8 sources per unit): every test
# file parses GoogleTest, nlohmann/json and spdlog again, and the TSan build took 116 s instead
# of 197 s (202 CPU-seconds instead of 394). The release build compiles each file alone, as
# users and developers do, so a file that only compiles beside others (a missing include, a
# name it borrows from a neighbour) still fails CI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
# Tests wait more than they compute (most KVM tests are an idle guest ticking for a second), so
# one more test than cores: the suite at -j3 took 46 s on 2 cores against 59 s at -j2, with
# the CPU-hungry ones kept apart by RESOURCE_LOCK/RUN_SERIAL (tests/integration/CMakeLists.txt).
test_jobs=$((jobs + 1))

started=$SECONDS
stage() {  # NAME COMMAND...: runs it and says how long it took
  local name=$1 t=$SECONDS
  shift
  "$@"
  echo "== $name: $((SECONDS - t)) s"
}

# build_suite DIR CMAKE_ARGS...: configures and builds DIR (never the benchmarks).
build_suite() {
  local dir=$1
  shift
  echo "== configure and build ($dir): $*"
  cmake -S . -B "$dir" -G Ninja -DMINIVMM_WERROR=ON -DMINIVMM_BUILD_BENCH=OFF "$@" >/dev/null
  stage "build ($dir)" cmake --build "$dir" -j "$jobs"
}

# run_suite DIR EXCLUDE CMAKE_ARGS...: builds DIR and runs its tests, but for the slow labels
# and those matching the ctest -E regex EXCLUDE (a never-matching one for none).
run_suite() {
  local dir=$1 exclude=$2
  shift 2
  build_suite "$dir" "$@"
  echo "== test ($dir)"
  stage "test ($dir)" bash -c "cd '$dir' && ctest -j '$test_jobs' --output-on-failure \
    --resource-spec-file '$PWD/tests/ctest_resources.json' \
    -LE 'linux|fuzz|kvm-unit-tests' -E '$exclude'"
}

# The release build as scripts/run.sh makes it (-O2 without debug info: GCC 12 at -O3 warns
# falsely inside std::vector; the lean runtime), with what runs the binary: the KVM tests, the
# command-line tests, QEMU's where it exists.
run_suite build-release '^$' -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DMINIVMM_BUILD_UNIT_TESTS=OFF

# ASan+UBSan: one clang build serves the tests and the libFuzzer targets (libFuzzer ships with
# clang), instead of a gcc sanitizer build and a second, fuzz-only one: a whole build less.
# Then the fuzzers: every seed, then a short fixed run of each target (docs/fuzzing.md says how
# to run them longer). Without clang (scripts/setup.sh installs it) gcc builds the tests alone.
# Every test but the 16-guest density test and load cell: they measure what two CPUs give
# sixteen guests (time, not memory; 5-15 s here) and each of their guests is one more ordinary
# boot.
# And the control-socket storm: its subject is a deadlock between threads, which the TSan build
# runs it for; under ASan its 8 runs took 93 CPU-seconds of the budget.
asan_exclude='BootDensityTest|BootLoadCellTest|BootControlStormTest'
# libslirp's own leak at cleanup (tests/lsan.supp says which); children inherit it.
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp ${LSAN_OPTIONS:-}"
if command -v clang++ >/dev/null; then
  run_suite build-asan "$asan_exclude" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
    -DMINIVMM_SANITIZE=address,undefined -DMINIVMM_FUZZ=ON -DMINIVMM_FUZZ_SECONDS=3 \
    -DCMAKE_UNITY_BUILD=ON
  echo "== fuzz (build-asan)"
  stage "fuzz (build-asan)" bash -c "cd build-asan && ctest -j '$jobs' --output-on-failure -L fuzz"
else
  echo "== fuzzers skipped: clang++ not found (scripts/setup.sh installs it)"
  run_suite build-asan "$asan_exclude" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" \
    -DMINIVMM_SANITIZE=address,undefined -DCMAKE_UNITY_BUILD=ON
fi

# ThreadSanitizer (it cannot be combined with ASan, hence a build of its own): the threads of a
# run (loop, vCPU, signal, control socket) share devices, timer lists and the pause state.
# -O1 with line tables only, no benchmarks (at -O0 the build took as long, 172 s, and the
# tests twice as long, 49 s against 24). To keep the whole script under 10 minutes on 2 cores
# it runs the unit tests except the bad-input CLI matrix (single-threaded process runs, which
# only cost time under TSan: ~0.3 s per exec) and the kernel pulse train's real-time tests (their
# 64 ms refill margin is for an uninstrumented build: under TSan on a busy host a refill came
# too late and 13 edges were missed; the ASan build runs them), and, where /dev/kvm opens, the
# KVM tests that cover every tick delivery thread, pause/resume and a signal: not the whole boot
# matrix (nor the 16-guest density test, which is about time, not threads); the seccomp
# selftests (each run ends at once), which prove that a forbidden syscall is reported from every
# kind of thread under TSan's signal handling too; a disk on each blk engine (the loop
# submitting to io_uring and reaping it, a driver reset draining it from the vCPU; the worker);
# and every signal that ends an interactive run (about a second: TSan defers signals and has
# handlers of its own for the crash signals, which crash_signals.h chains to).
# halt_on_error: a race fails the test that found it.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
build_suite build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DMINIVMM_SANITIZE=thread -DMINIVMM_BUILD_UNIT_TESTS=ON -DCMAKE_UNITY_BUILD=ON
echo "== test (build-tsan)"
tsan_kvm='^PitTick/BootPauseTest|^BootDurationTest|^Signals/BootSignalTest.*\(15,'
tsan_kvm+='|^ThreadKinds/BootSeccompSelftest\.Forbidden|^Modes/BootSeccompTest.*Drive'
# The storm with the console kept in a file, in every tick mode: the set-up of issue 20's
# deadlock (the release build runs the /dev/null variants too).
tsan_kvm+='|^Modes/BootControlStormTest.*_console_file'
tsan_kvm+='|^BootInteractiveTest'
stage "test (build-tsan)" bash -c "cd build-tsan &&
  ctest -j '$test_jobs' --output-on-failure -L '^unit$' -E '^BadInput|^HostKernelPulseTrainTest' &&
  ctest -j '$test_jobs' --output-on-failure -L kvm -R '$tsan_kvm'"
echo "== all: $((SECONDS - started)) s"
