#!/usr/bin/env bash
# What `minivmm test` costs beside the suite's own runner: kvm-unit-tests' x86 suite run, at
# -j2 each, by `minivmm test`, by the suite's run_tests.sh with minivmm (scripts/kvm_unit_tests.sh
# standing in for QEMU) and by run_tests.sh with QEMU (qemu-system-x86_64 from PATH, -accel
# kvm), one after the other on the same host. Prints:
#   - per test, what the runner adds beyond the minivmm process's own life (exec to exit),
#     median and spread over the tests that ran a guest (the goal: at most 20 ms);
#   - the wall time and the CPU time (user + system, the guests' included) of each run, for the
#     whole suite and for the entries that end on their own (every entry but those `minivmm
#     test` reports as timeouts: those take their timeout under any runner). The guests' own
#     CPU is the same under either runner, so the CPU time is what tells the runners apart on
#     a host whose load moves the wall times (--repeat runs the subset several times, the two
#     minivmm runners alternating);
#   - each entry's verdict under the three, and where `minivmm test` and run_tests.sh with
#     minivmm differ;
#   - a plot of the per-test overhead (gnuplot) when gnuplot is installed.
#
# usage: scripts/bench_test_runner.sh [-o DIR] [--no-qemu] [--no-whole] [--repeat N]
#                                     [--timeouts A,B,...] SUITE_DIR
#   SUITE_DIR  a built kvm-unit-tests tree (scripts/build_kvm_unit_tests.sh)
#   -o DIR     keep every log and table there (default: a new folder in /tmp)
#   --no-qemu  skip the QEMU runs (they take the longest: about 25 minutes here)
#   --no-whole run only the entries that end on their own (after one whole `minivmm test` run,
#              which says which those are; an earlier one in DIR is reused)
#   --repeat N run the entries that end on their own N times under each minivmm runner (1)
#   --timeouts A,B,...  the entries that end by their timeouts, instead of the whole run's (a
#              loaded host can push a short one, vmx_sipi_signal_test's 10 s, over its limit)
# Needs build/vmm/minivmm (or MINIVMM_BIN). The suite's logs go to DIR, never to its own tree.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
minivmm=$(realpath "${MINIVMM_BIN:-$here/../build/vmm/minivmm}")
out='' qemu=1 whole=1 repeat=1 timeouts=''
while (($#)); do
  case "$1" in
    -o) out=$2; shift 2 ;;
    --no-qemu) qemu=0; shift ;;
    --no-whole) whole=0; shift ;;
    --repeat) repeat=$2; shift 2 ;;
    --timeouts) timeouts=$2; shift 2 ;;
    -*) echo "bench_test_runner.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
(($# == 1)) || { echo "usage: $0 [-o DIR] [--no-qemu] [--no-whole] [--repeat N] [--timeouts A,B] SUITE_DIR" >&2; exit 2; }
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "bench_test_runner.sh: --repeat needs a count" >&2; exit 2; }
suite=$(realpath "$1")
[[ -f $suite/config.mak && -f $suite/x86/unittests.cfg ]] ||
  { echo "bench_test_runner.sh: $suite is not a built kvm-unit-tests tree" >&2; exit 2; }
[[ -x $minivmm ]] || { echo "bench_test_runner.sh: no minivmm at $minivmm" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/bench-test-runner-XXXXXX)}
mkdir -p "$out"
# A copy: a rebuild during the runs must not change the VMM half-way.
if [[ $minivmm != "$out/minivmm" ]]; then
  cp "$minivmm" "$out/minivmm"
  minivmm=$out/minivmm
fi
echo "== results in $out; host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# timed NAME COMMAND...: runs it, appends "NAME wall_s cpu_s load" to wall.txt (CPU: user +
# system of it and every process it waited for, the guests included).
timed() {
  local name=$1
  shift
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S" -o "$out/$name.time" "$@" || true
  # The last line: a command that failed gets a line saying so before it.
  read -r wall user sys < <(tail -n 1 "$out/$name.time")
  awk -v n="$name" -v w="$wall" -v u="$user" -v s="$sys" -v l="$load" \
    'BEGIN { printf "%s %.1f %.1f %s\n", n, w, u + s, l }' >>"$out/wall.txt"
  echo "== $name: $wall s wall, $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') s CPU (load $load at the start)"
}

# A run_tests.sh output (colored words) as name<TAB>verdict<TAB>rest lines.
verdicts_of_run_tests() {
  sed 's/\x1b\[[0-9;]*m//g' "$1" | awk '$1 ~ /^(PASS|FAIL|SKIP)$/ {
      rest = $0; sub(/^[A-Z]+ [^ ]+ ?/, "", rest); print $2 "\t" $1 "\t" rest }' | sort
}
verdicts_of_minivmm_test() {
  awk -F'\t' 'NR > 1 { print $1 "\t" $2 "\t" $3 }' "$1/results.tsv" | sort
}

# minivmm test: NAME [TESTS...]
run_minivmm_test() {
  local name=$1
  shift
  timed "$name" sh -c 'out=$1; name=$2; shift 2; exec "$@" >"$out/$name.out" 2>&1' sh "$out" "$name" \
    "$minivmm" test --kvm-unit-tests "$suite" -j 2 --logs "$out/$name" --junit "$out/$name.xml" "$@"
  echo "   $(tail -1 "$out/$name.out")"
}

# run_tests.sh with minivmm or QEMU: NAME minivmm|qemu [TESTS...]
run_suite_runner() {
  local name=$1 vmm=$2
  shift 2
  local env=(env)
  if [[ $vmm == minivmm ]]; then
    env+=(QEMU="$here/kvm_unit_tests.sh" MINIVMM_BIN="$minivmm")
  else
    env=(env -u QEMU)
  fi
  env+=(unittest_log_dir="$out/$name.logs")
  timed "$name" sh -c 'cd "$1" && out=$2 && shift 2 && exec "$@" >"$out" 2>&1' sh "$suite" \
    "$out/$name.out" "${env[@]}" ./run_tests.sh -j 2 "$@"
}

echo "name wall_s cpu_s load" >"$out/wall.txt"
if ((whole)) || [[ ! -f $out/minivmm-test-whole/results.tsv ]]; then
  run_minivmm_test minivmm-test-whole
fi
# The entries that end on their own: all but the timeouts of the whole run.
if [[ -n $timeouts ]]; then
  tr ',' '\n' <<<"$timeouts" >"$out/timeouts.txt"
else
  awk -F'\t' 'NR > 1 && $3 ~ /^timeout;/ { print $1 }' "$out/minivmm-test-whole/results.tsv" \
    >"$out/timeouts.txt"
fi
awk -F'\t' 'NR == FNR { t[$1] = 1; next } FNR > 1 && !($1 in t) { print $1 }' \
  "$out/timeouts.txt" "$out/minivmm-test-whole/results.tsv" >"$out/own-end.txt"
mapfile -t own < "$out/own-end.txt"
echo "== $(wc -l <"$out/timeouts.txt") entries time out: $(tr '\n' ' ' <"$out/timeouts.txt")"

for ((i = 1; i <= repeat; i++)); do
  suffix=$((repeat > 1 ? i : 0))
  suffix=${suffix/#0/}
  run_minivmm_test "minivmm-test-own$suffix" "${own[@]}"
  run_suite_runner "run-tests-minivmm-own$suffix" minivmm "${own[@]}"
done
((whole)) && run_suite_runner run-tests-minivmm-whole minivmm
if ((qemu)) && command -v qemu-system-x86_64 >/dev/null; then
  run_suite_runner run-tests-qemu-own qemu "${own[@]}"
  ((whole)) && run_suite_runner run-tests-qemu-whole qemu
fi

echo
echo "== what minivmm test adds per test (ms beyond the minivmm process, tests that ran a guest)"
for dir in "$out"/minivmm-test-*/; do
  run=$(basename "$dir")
  [[ -f $out/$run/results.tsv ]] || continue
  awk -F'\t' 'NR > 1 && $5 > 0 { print $6 }' "$out/$run/results.tsv" | sort -g >"$out/$run.overhead"
  awk -v run="$run" '{ v[NR] = $1 } END {
      if (NR == 0) exit
      median = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      p90 = int(NR * 0.9)
      if (p90 < 1) p90 = 1
      printf "%-22s n=%d median %.2f ms, p10 %.2f, p90 %.2f, max %.2f\n", run, NR, median,
        v[int(NR * 0.1) + 1], v[p90], v[NR] }' "$out/$run.overhead"
done

echo
echo "== the minivmm processes' own CPU in each minivmm test run (their --stats reports), so that"
echo "   the run's CPU less this is the runner's, exec and process start-up included"
for dir in "$out"/minivmm-test-*/; do
  python3 - "$dir" <<'PY'
import glob, json, os, sys
total = 0.0
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    try:
        h = json.load(open(f))["host"]
        total += h["cpu_user_s"] + h["cpu_sys_s"]
    except (ValueError, KeyError):
        pass
print(f"{os.path.basename(os.path.normpath(sys.argv[1]))}: {total:.1f} s")
PY
done

echo
echo "== wall and CPU time at -j2 (s; load: the 1-minute load average when the run started)"
column -t "$out/wall.txt"

echo
echo "== verdicts: minivmm test vs run_tests.sh (minivmm), whole suite"
if [[ -f $out/run-tests-minivmm-whole.out ]]; then
  verdicts_of_minivmm_test "$out/minivmm-test-whole" >"$out/v-minivmm-test.tsv"
  verdicts_of_run_tests "$out/run-tests-minivmm-whole.out" >"$out/v-run-tests-minivmm.tsv"
  [[ -f $out/run-tests-qemu-whole.out ]] &&
    verdicts_of_run_tests "$out/run-tests-qemu-whole.out" >"$out/v-run-tests-qemu.tsv"
  join -t $'\t' -a 1 -a 2 -e '-' -o 0,1.2,1.3,2.2,2.3 "$out/v-minivmm-test.tsv" \
    "$out/v-run-tests-minivmm.tsv" >"$out/verdicts.tsv"
  same=$(awk -F'\t' '$2 == $4' "$out/verdicts.tsv" | wc -l)
  echo "$same of $(wc -l <"$out/verdicts.tsv") the same; differing:"
  awk -F'\t' '$2 != $4 { print "  " $1 ": minivmm test " $2 " (" $3 "), run_tests.sh " $4 " (" $5 ")" }' \
    "$out/verdicts.tsv"
fi

if command -v gnuplot >/dev/null && [[ -s $out/minivmm-test-whole.overhead ]]; then
  gnuplot <<GP
set terminal pngcairo size 800,400
set output "$out/overhead.png"
set title "minivmm test: time per test beyond the minivmm process (kvm-unit-tests, -j2)"
set xlabel "tests, sorted"
set ylabel "ms"
set grid
plot "$out/minivmm-test-whole.overhead" using 0:1 with linespoints title "runner overhead"
GP
  echo "== plot: $out/overhead.png"
fi
