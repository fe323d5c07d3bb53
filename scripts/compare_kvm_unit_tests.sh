#!/usr/bin/env bash
# Runs kvm-unit-tests' x86 suite under QEMU (-accel kvm) and under minivmm, test by test, and
# prints one tab-separated line per test: name, QEMU verdict, QEMU seconds, minivmm verdict,
# minivmm seconds. Each test runs under QEMU and then at once under minivmm, so that load from
# anything else on the host falls on both alike; the totals at the end are the two whole-suite
# wall times and their ratio. This is how docs/kvm-unit-tests.md's table is made.
#
#   scripts/compare_kvm_unit_tests.sh [-o OUTDIR] [TEST...]     (default: every test, `run_tests.sh -l`)
#
# Needs /dev/kvm, qemu-system-x86_64 and the suite built by scripts/build_kvm_unit_tests.sh
# (MINIVMM_KVM_UNIT_TESTS_DIR, default ~/.cache/kvm-unit-tests). Each run's log (the suite's
# logs/<test>.log) is kept in OUTDIR/{qemu,minivmm}/. Nothing is written into this repository.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
suite=${MINIVMM_KVM_UNIT_TESTS_DIR:-$HOME/.cache/kvm-unit-tests}
minivmm=${MINIVMM_BIN:-$here/../build/vmm/minivmm}
out=$(mktemp -d /tmp/kut-compare.XXXXXX)
if [[ ${1:-} == -o ]]; then
  out=$2
  shift 2
fi
mkdir -p "$out/qemu" "$out/minivmm"

[[ -r /dev/kvm && -w /dev/kvm ]] || { echo "compare_kvm_unit_tests: needs /dev/kvm" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null ||
  { echo "compare_kvm_unit_tests: qemu-system-x86_64 is missing (apt-get install qemu-system-x86)" >&2; exit 1; }
[[ -x $suite/run_tests.sh && -e $suite/x86/msr.flat ]] ||
  { echo "compare_kvm_unit_tests: no built suite in $suite (scripts/build_kvm_unit_tests.sh)" >&2; exit 1; }
[[ -x $minivmm ]] || { echo "compare_kvm_unit_tests: no minivmm binary at $minivmm" >&2; exit 1; }

cd "$suite"
if (($# == 0)); then
  mapfile -t tests < <(./run_tests.sh -l)
else
  tests=("$@")
fi

# One test under one VMM: its verdict word (PASS/FAIL/SKIP, from run_tests.sh's summary line)
# and its wall time. The suite's own timeouts (unittests.cfg) apply to both VMMs alike.
run_one() {
  local vmm=$1 name=$2 t0 t1 line verdict
  t0=$(date +%s.%N)
  if [[ $vmm == qemu ]]; then
    line=$(ACCEL=kvm ./run_tests.sh -v "$name" 2>&1 || true)
  else
    line=$(QEMU="$here/kvm_unit_tests.sh" MINIVMM_BIN="$minivmm" ACCEL=kvm \
      ./run_tests.sh -v "$name" 2>&1 || true)
  fi
  t1=$(date +%s.%N)
  cp -f "logs/$name.log" "$out/$vmm/$name.log" 2>/dev/null || true
  printf '%s\n' "$line" >"$out/$vmm/$name.summary"
  verdict=$(grep -oE '(PASS|FAIL|SKIP)' <<<"$(grep -E "^.*(PASS|FAIL|SKIP).* $name( |$)" <<<"$line" | tail -1)" |
    head -1 || true)
  printf '%s\t%.2f' "${verdict:-UNKNOWN}" "$(echo "$t1 - $t0" | bc)"
}

total_q=0 total_m=0 same=0
printf 'test\tqemu\tqemu_s\tminivmm\tminivmm_s\n' | tee "$out/table.tsv"
for name in "${tests[@]}"; do
  q=$(run_one qemu "$name")
  m=$(run_one minivmm "$name")
  printf '%s\t%s\t%s\n' "$name" "$q" "$m" | tee -a "$out/table.tsv"
  total_q=$(echo "$total_q + ${q#*$'\t'}" | bc)
  total_m=$(echo "$total_m + ${m#*$'\t'}" | bc)
  [[ ${q%%$'\t'*} == "${m%%$'\t'*}" ]] && same=$((same + 1))
done
echo "total: ${#tests[@]} tests, $same verdicts equal; QEMU ${total_q} s, minivmm ${total_m} s," \
  "ratio $(echo "scale=3; $total_m / $total_q" | bc)" | tee -a "$out/table.tsv"
echo "logs: $out"
