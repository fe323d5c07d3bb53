#!/usr/bin/env bash
# Unit test of scripts/kvm_unit_tests.sh without KVM: the probes kvm-unit-tests makes of its
# QEMU, the mapping of x86/run's command line to minivmm (dry run), and the mapping of
# minivmm's exit statuses back to QEMU's, through a fake minivmm.
#
# The suite's rule that the statuses must satisfy (scripts/vmm.bash qemu_fixup_return_code and
# scripts/runtime.bash): QEMU exit 1 with no stderr line lacking "warning" is PASS (the guest
# wrote 0 to isa-debug-exit), 77 is SKIP, 0 is FAIL (no debug-exit), 0 after a "terminating on
# signal N" line is 128 + N, anything else is FAIL.
#
# usage: kvm_unit_tests_sh_test.sh path/to/kvm_unit_tests.sh
set -u
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
expect_eq() { [[ $1 == "$2" ]] || fail "$3: got '$1', expected '$2'"; }
expect_has() { grep -qF -- "$2" <<<"$1" || fail "$3: '$2' not in: $1"; }

kernel=$tmp/test.flat
echo x >"$kernel"

# --- probes ------------------------------------------------------------------------------------
out=$("$script" --help)
expect_has "$(head -1 <<<"$out")" "QEMU" "--help names QEMU (search_qemu_binary)"
out=$("$script" -device '?')
expect_has "$out" '"pc-testdev"' "-device ? lists pc-testdev (x86/run)"
grep -qF '"pci-testdev"' <<<"$out" && fail "pci-testdev listed, but minivmm has no PCI"

out=$("$script" -kernel _NO_FILE_4Uhere_ -smp 64 2>&1)
expect_eq "$?" 1 "-smp above the maximum exits 1"
expect_has "$out" "SMP CPUs" "qemu_probe_maxsmp's marker"
expect_eq "${out##* }" 16 "the last word is the maximum"
out=$("$script" -kernel _NO_FILE_4Uhere_ -smp 1 2>&1)
expect_eq "$?" 1 "a missing kernel exits 1"
expect_has "$out" "ould not load kernel" "qemu_parse_premature_failure's marker"
out=$("$script" -kernel "$kernel" -machine accel=tcg 2>&1)
expect_eq "$?" 1 "TCG is refused"
out=$("$script" -kernel "$kernel" -bogus 2>&1)
expect_eq "$?" 1 "an unknown option is refused"

# --- command-line mapping (dry run) --------------------------------------------------------------
dry() { MINIVMM_QEMU_DRY_RUN=1 MINIVMM_BIN=/x/minivmm "$script" "$@" 2>"$tmp/err" | tr '\n' ' '; }
# What x86/run builds for ioapic (unittests.cfg: smp = 4, qemu_params = -cpu qemu64,+x2apic).
out=$(dry --no-reboot -nodefaults -global kvm-pit.lost_tick_policy=discard -device pc-testdev \
  -device isa-debug-exit,iobase=0xf4,iosize=0x4 -display none -serial stdio \
  -machine accel=kvm -kernel "$kernel" -smp 4 -cpu qemu64,+x2apic -initrd /env/file)
expect_has "$out" "/x/minivmm run --kernel $kernel --cpus 4 --memory 128M --cpu baseline" "base mapping"
expect_has "$out" "--initrd /env/file" "-initrd"
expect_has "$out" "--lost-ticks discard" "-global kvm-pit.lost_tick_policy"
expect_has "$out" "--quiet --log-level error --testdev" "no stderr chatter; fw_cfg and pc-testdev"
grep -qv warning "$tmp/err" && fail "a non-warning stderr line in a mapped run: $(cat "$tmp/err")"
out=$(dry -kernel "$kernel" -append "cpuid vmcall" -m 2048 -cpu max,-pku,-tsc-deadline,-pcid)
expect_has "$out" "--memory 2048M --cpu host" "-m 2048 and -cpu max"
expect_has "$out" "--cmdline cpuid vmcall" "-append"
expect_has "$out" "--cpuid-mask pku,tsc_deadline_timer" "known features hidden, QEMU spelling mapped"
expect_has "$(cat "$tmp/err")" "warning" "an unknown feature is a warning"
out=$(dry -kernel "$kernel" -m 4g)
expect_has "$out" "--memory 3072M" "-m above 3 GiB is capped"
out=$(dry -kernel "$kernel" -m 256M -smp 2,sockets=2)
expect_has "$out" "--cpus 2 --memory 256M" "-m with a suffix, -smp with properties"

# --- exit statuses through a fake minivmm --------------------------------------------------------
fake=$tmp/fake-minivmm
cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
# Exits with $FAKE_STATUS, or with 143 on SIGTERM after noting it, as minivmm does.
sleeper=''
trap 'echo term >"$FAKE_MARK"; [[ -n $sleeper ]] && kill $sleeper; exit 143' TERM
# Ready once the trap is in place: a SIGTERM before it would kill us without the mark.
: >"$FAKE_MARK.ready"
if [[ $FAKE_STATUS == sleep ]]; then
  sleep 30 >/dev/null 2>&1 </dev/null &
  sleeper=$!
  wait
fi
exit "$FAKE_STATUS"
FAKE
chmod +x "$fake"
status_of() {
  FAKE_STATUS=$1 FAKE_MARK=$tmp/mark MINIVMM_BIN=$fake "$script" -kernel "$kernel" 2>"$tmp/err"
  echo $?
}
# Guest debug-exit values pass through: 0 -> 1 (PASS), 1 -> 3 (FAIL), 38 -> 77 (SKIP).
for s in 1 3 77 255; do expect_eq "$(status_of $s)" $s "debug-exit status $s"; done
expect_eq "$(status_of 1; cat "$tmp/err")" 1 "a passing run writes nothing to stderr"
expect_eq "$(status_of 0)" 0 "no debug-exit: 0 as QEMU (the suite says FAIL)"
expect_eq "$(status_of 8)" 0 "triple fault: 0 as QEMU -no-reboot"
# minivmm's own failures are 2, the suite's "a run script failed": FAIL even when stderr also
# holds the mapping's warnings (a QEMU-like 1 would then PASS).
for s in 2 4 6 10 12 16; do
  expect_eq "$(status_of $s)" 2 "minivmm failure $s: a run script's failure"
  grep -qv warning "$tmp/err" || fail "status $s: no error line on stderr"
done
# A guest's abort() is exit(63), status 127: passed on, as QEMU returns it (the suite: FAIL).
expect_eq "$(status_of 127)" 127 "a guest's abort(): 127, not 'already collected'"
expect_eq "$(status_of 143)" 143 "143 without a forwarded signal is a debug-exit of 71"
expect_eq "$(status_of 130)" 0 "SIGINT'd minivmm (130 is even: never a debug-exit)"
expect_has "$(cat "$tmp/err")" "terminating on signal 2" "the line the suite turns into 130"

# SIGTERM to the script (timeout --foreground) reaches minivmm.
rm -f "$tmp/mark" "$tmp/mark.ready"
FAKE_STATUS=sleep FAKE_MARK=$tmp/mark MINIVMM_BIN=$fake "$script" -kernel "$kernel" 2>"$tmp/err" &
pid=$!
for _ in $(seq 200); do [[ -f $tmp/mark.ready ]] && break; sleep 0.05; done
kill -TERM $pid
wait $pid
expect_eq "$?" 0 "SIGTERM: QEMU's 0"
[[ -f $tmp/mark ]] || fail "SIGTERM was not forwarded to minivmm"
expect_has "$(cat "$tmp/err")" "terminating on signal 15" "SIGTERM line"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all kvm_unit_tests.sh checks passed"
