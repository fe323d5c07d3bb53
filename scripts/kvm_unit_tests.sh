#!/usr/bin/env bash
# A drop-in for QEMU in kvm-unit-tests' x86 runner: point the suite at it with
#
#   QEMU=/path/to/minivmm/scripts/kvm_unit_tests.sh ./run_tests.sh      (in the suite's tree)
#
# and every test runs under minivmm instead. It answers the probes the suite makes of its QEMU
# (`--help` naming QEMU, `-h` for the version line, `-device '?'` listing pc-testdev, `-smp` above
# the maximum), accepts the command line x86/run builds, maps it to `minivmm run`, and maps
# minivmm's exit status back to what QEMU would have returned, so that the suite's
# qemu_fixup_return_code and run_tests.sh report the same PASS / FAIL / SKIP. docs/kvm-unit-tests.md
# has the details and the table of what is ignored.
#
# Environment:
#   MINIVMM_BIN            the minivmm binary (default: build/vmm/minivmm next to this script)
#   MINIVMM_QEMU_DRY_RUN=1 print the minivmm command line (one argument per line) and exit 0
#   MINIVMM_QEMU_ARGS      extra arguments for `minivmm run` (split on spaces)
#
# Nothing here writes to stderr in a passing run except lines containing "warning": the suite
# turns a QEMU exit of 1 (the guest's success) into FAIL when stderr has any other line.
set -u

self=kvm_unit_tests.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
minivmm=${MINIVMM_BIN:-$here/../build/vmm/minivmm}
max_cpus=16
# The largest guest minivmm builds (below the 32-bit MMIO hole).
max_memory_mib=3072

warn() { echo "$self: warning: $*" >&2; }
die() {
  # QEMU's way to fail: a message and exit status 1.
  echo "$self: $*" >&2
  exit 1
}

# Features minivmm's --cpuid-mask knows (vmm/vcpu/cpuid_policy.cc), in QEMU's spelling where it differs.
cpuid_mask_name() {
  case "$1" in
    tsc-deadline) echo tsc_deadline_timer ;;
    sse4.1 | sse4-1) echo sse4_1 ;;
    sse4.2 | sse4-2) echo sse4_2 ;;
    sse3 | pclmulqdq | ssse3 | fma | cx16 | x2apic | movbe | popcnt | aes | xsave | avx | f16c | \
      rdrand | pge | mtrr | pat | fsgsbase | bmi1 | avx2 | smep | bmi2 | erms | invpcid | \
      avx512f | rdseed | smap | umip | pku | la57 | rdpid | nx | pdpe1gb | rdtscp)
      echo "$1" ;;
    *) return 1 ;;
  esac
}

# QEMU's -m: a number of MiB, or a number with a K/M/G/T suffix (optionally followed by B).
memory_mib() {
  local v=${1%%,*} n unit
  v=${v#size=}
  if [[ $v =~ ^([0-9]+)([kKmMgGtT]?)[bB]?$ ]]; then
    n=${BASH_REMATCH[1]}
    unit=${BASH_REMATCH[2]}
  else
    return 1
  fi
  case "$unit" in
    k | K) echo $(((n + 1023) / 1024)) ;;
    '' | m | M) echo "$n" ;;
    g | G) echo $((n * 1024)) ;;
    t | T) echo $((n * 1024 * 1024)) ;;
  esac
}

# minivmm's exit status -> what QEMU would have exited with, for the same guest event.
#   odd          the guest wrote to isa-debug-exit: (v << 1) | 1, identical in both
#   0            --duration, reset through the i8042: QEMU -no-reboot also exits 0
#   8            triple fault: QEMU -no-reboot treats it as a reset and exits 0
#   130, 143     SIGINT/SIGTERM, when this script forwarded that signal: QEMU prints
#                "terminating on signal N" and exits 0; the suite reads the line and reports
#                128 + N. (143 is also what a guest's debug-exit of 71 gives: without a forwarded
#                signal it is taken as that.)
#   other even   minivmm could not start or run the guest (a KVM internal error, a guest panic
#                through pvpanic, ...): 2, "most likely a run script failed" in the suite's
#                scripts/vmm.bash table. Not QEMU's error exit 1: qemu_fixup_return_code passes
#                a 1 whenever every stderr word it sees joins a line that says "warning", and
#                it sees stderr as one line, so this script's own mapping warnings would turn
#                a VMM failure into a PASS.
signalled=0
map_status() {
  local s=$1
  if ((signalled != 0 && s == 128 + signalled)); then
    echo "$self: terminating on signal $signalled" >&2
    echo 0
  elif ((s % 2 == 1)); then
    echo "$s"
  elif ((s == 0)); then
    echo 0
  elif ((s == 8)); then
    echo "$self: guest triple fault (minivmm status 8)" >&2
    echo 0
  elif ((s == 130)); then
    echo "$self: terminating on signal 2" >&2
    echo 0
  else
    echo "$self: minivmm failed with status $s" >&2
    echo 2
  fi
}

# --- the probes run_tests.sh and x86/run make --------------------------------------------------
if (($# == 1)); then
  case "$1" in
    -h | -help | --help)
      echo "QEMU emulator version 7.2.0 (minivmm drop-in: scripts/$self)"
      echo "usage: $self [QEMU options understood by kvm-unit-tests' x86/run]"
      exit 0 ;;
    -version | --version)
      echo "QEMU emulator version 7.2.0 (minivmm drop-in: scripts/$self)"
      exit 0 ;;
  esac
fi
if (($# == 2)) && [[ $1 == -device ]] && [[ $2 == '?' || $2 == help ]]; then
  # The quoted names are what x86/run greps for. pci-testdev is not listed: minivmm has no PCI.
  echo 'Misc devices:'
  echo 'name "isa-debug-exit", bus ISA'
  echo 'name "pc-testdev", bus ISA'
  exit 0
fi

# --- the command line x86/run builds --------------------------------------------------------------
kernel='' cmdline='' initrd='' cpus=1 memory_mib_v=128 cpu=baseline lost_ticks=''
masks=()
while (($#)); do
  opt=$1
  shift
  # QEMU accepts --opt as -opt.
  [[ $opt == --* ]] && opt=${opt#-}
  need_arg() { (($#)) || die "option $opt needs an argument"; }
  case "$opt" in
    -kernel) need_arg "$@"; kernel=$1; shift ;;
    -append) need_arg "$@"; cmdline=$1; shift ;;
    -initrd) need_arg "$@"; initrd=$1; shift ;;
    -smp)
      need_arg "$@"
      n=${1%%,*}
      n=${n#cpus=}
      shift
      [[ $n =~ ^[0-9]+$ ]] || die "Invalid SMP CPUs '$n'"
      # QEMU's wording, which the suite's qemu_probe_maxsmp parses (the last word).
      ((n >= 1 && n <= max_cpus)) ||
        die "Invalid SMP CPUs $n. The max CPUs supported by machine 'minivmm' is $max_cpus"
      cpus=$n ;;
    -m)
      need_arg "$@"
      mib=$(memory_mib "$1") || die "invalid -m value '$1'"
      shift
      if ((mib > max_memory_mib)); then
        warn "-m ${mib}M is more than minivmm's ${max_memory_mib}M; using ${max_memory_mib}M"
        mib=$max_memory_mib
      fi
      memory_mib_v=$mib ;;
    -cpu)
      need_arg "$@"
      IFS=, read -r -a parts <<<"$1"
      shift
      case "${parts[0]}" in
        host | max) cpu=host ;;
        *) cpu=baseline ;;
      esac
      for p in "${parts[@]:1}"; do
        case "$p" in
          -*)
            if m=$(cpuid_mask_name "${p#-}"); then
              masks+=("$m")
            else
              warn "-cpu: cannot hide '${p#-}'; ignored"
            fi ;;
          +* | *=on) warn "-cpu: minivmm adds no features beyond --cpu $cpu; '$p' ignored" ;;
          *) warn "-cpu: property '$p' ignored" ;;
        esac
      done ;;
    -machine | -M)
      need_arg "$@"
      IFS=, read -r -a parts <<<"$1"
      shift
      for p in "${parts[@]}"; do
        case "$p" in
          accel=kvm | pc | q35 | type=pc) ;;
          accel=*) die "minivmm runs guests under KVM only (-machine $p)" ;;
          *) warn "-machine: '$p' ignored" ;;
        esac
      done ;;
    -accel)
      need_arg "$@"
      [[ ${1%%,*} == kvm ]] || die "minivmm runs guests under KVM only (-accel $1)"
      shift ;;
    -enable-kvm | -no-reboot | -nodefaults | -nographic | -no-user-config) ;;
    -display | -vga | -serial | -monitor | -chardev | -overcommit | -name | -rtc)
      need_arg "$@"
      case "$opt $1" in
        "-serial stdio" | "-display none" | "-vga none" | "-monitor none") ;;
        *) warn "$opt $1 ignored" ;;
      esac
      shift ;;
    -global)
      need_arg "$@"
      case "$1" in
        kvm-pit.lost_tick_policy=discard) lost_ticks=discard ;;
        kvm-pit.lost_tick_policy=delay) lost_ticks=delay ;;
        *) warn "-global $1 ignored" ;;
      esac
      shift ;;
    -device)
      need_arg "$@"
      case "${1%%,*}" in
        # At QEMU's ports: 0xe0/0xe4/0x2000 (--testdev, always passed) and 0xf4 (minivmm's
        # isa-debug-exit is always at iobase=0xf4, iosize=4).
        pc-testdev | isa-debug-exit) ;;
        *) warn "-device $1: not provided by minivmm; ignored" ;;
      esac
      shift ;;
    *) die "unsupported option '$opt'" ;;
  esac
done

[[ -n $kernel ]] || die "no -kernel given"
# QEMU's message for a missing kernel: the suite's premature-failure probe looks for it.
[[ -f $kernel ]] || die "could not load kernel '$kernel'"

# --testdev: QEMU's PC always has fw_cfg (every test reads its CPU count there) and the suite
# adds pc-testdev; minivmm builds them only when asked.
cmd=("$minivmm" run --kernel "$kernel" --cpus "$cpus" --memory "${memory_mib_v}M"
  --cpu "$cpu" --no-console-input --quiet --log-level error --testdev)
[[ -n $cmdline ]] && cmd+=(--cmdline "$cmdline")
[[ -n $initrd ]] && cmd+=(--initrd "$initrd")
[[ -n $lost_ticks ]] && cmd+=(--lost-ticks "$lost_ticks")
if ((${#masks[@]})); then
  cmd+=(--cpuid-mask "$(IFS=,; echo "${masks[*]}")")
fi
if [[ -n ${MINIVMM_QEMU_ARGS:-} ]]; then
  read -r -a extra <<<"$MINIVMM_QEMU_ARGS"
  cmd+=("${extra[@]}")
fi

if [[ ${MINIVMM_QEMU_DRY_RUN:-0} == 1 ]]; then
  printf '%s\n' "${cmd[@]}"
  exit 0
fi

# Run minivmm as a child and forward SIGTERM/SIGINT/SIGHUP to it: the suite's
# `timeout --foreground` signals only this script, and minivmm must not outlive it.
"${cmd[@]}" </dev/null &
child=$!
forward() {
  signalled=$2
  kill "-$1" "$child" 2>/dev/null
}
trap 'forward TERM 15' TERM
trap 'forward INT 2' INT
trap 'forward HUP 1' HUP
# `wait` also returns (with 128 + the signal) when a trapped signal arrives: then wait again,
# until the child's own status is in. 127 means "already collected" only after such a signal;
# before one it is the child's own status: a guest's abort() is exit(63), status 127, which
# QEMU returns too and the suite reports FAIL.
status=1
while :; do
  wait "$child"
  s=$?
  ((s == 127 && signalled != 0)) && break
  status=$s
  ((s > 128)) || break
  if ! kill -0 "$child" 2>/dev/null; then
    wait "$child"
    s=$?
    ((s != 127)) && status=$s
    break
  fi
done
exit "$(map_status "$status")"
