#!/usr/bin/env bash
# Runs a command where /dev/kvm opens, on a host where it does not: inside a Debian kernel with
# kvm-amd, booted by QEMU under TCG (software emulation), whose emulated AMD CPU has SVM with
# nested paging. The guest's root file system is this host's own / over 9p, so the command sees
# the same tree, builds and binaries; its exit status is this script's.
#
#   scripts/nested_kvm.sh [--smp N] [--mem SIZE] [--timeout SECONDS] -- COMMAND [ARGS...]
#   scripts/nested_kvm.sh -- ctest --test-dir build -L '^kvm$' --output-on-failure
#
# Why: some machines this project runs on are themselves guests whose kernel does not bind
# KVM (a PVM guest: "kvm-pvm: this kernel is itself a kvm-pvm guest; not binding"). The KVM
# paths (boot, vCPU threads, irqfd/ioeventfd, in-kernel PIT) would otherwise never run there.
# What it proves: behaviour and counts. What it does not: speed. Every guest instruction and
# every KVM exit is emulated by TCG, the L1 kernel included, so times and CPU per tick measured
# here say nothing about a real KVM host (docs/nested-kvm.md).
#
# Everything comes from Debian's archive: qemu-system-x86 (installed if missing), and the
# kernel and busybox-static packages, unpacked (not installed) into the cache folder
# ${MINIVMM_NESTED_CACHE:-$HOME/.cache/minivmm-nested}.
#
# --timeout (default 900 s, or $MINIVMM_NESTED_TIMEOUT): the nested machine is killed when it
# runs longer, and the script exits 124 saying so. A nested guest that hangs (a kernel that
# never boots, a test that waits forever) must end its CI stage, never the whole job.
#
# A frozen nested machine exits 126, as does one whose own kernel panicked. QEMU 7.2's TCG here sometimes stops the nested machine for
# good: both of its vCPU threads wait on a futex, its main loop polls, no other thread of QEMU
# exists (no 9p worker waits on a host file), and QEMU uses no CPU (seen twice on 2026-12-04, each time in a loop of exec guests
# over the 9p root); a live Linux would at least take its timer interrupts. The nested init writes a
# heartbeat to its second serial port (a file here) every 20 s (guest time), from busybox in its
# initramfs, outside the 9p root, so never mixed into the console. When none came for
# $MINIVMM_NESTED_FROZEN_AFTER s (default 180, host time), QEMU is killed and the script says the
# machine froze, with how long the job had run: a fault of the emulator, not of the job, which
# scripts/test.sh carries on in a new machine (a job that only hangs keeps its heartbeat and
# ends by --timeout instead).
set -euo pipefail

smp=2
mem=8G
limit=${MINIVMM_NESTED_TIMEOUT:-900}
frozen_after=${MINIVMM_NESTED_FROZEN_AFTER:-180}
usage="usage: nested_kvm.sh [--smp N] [--mem SIZE] [--timeout SECONDS] -- COMMAND..."
while [[ $# -gt 0 ]]; do
  case $1 in
    --smp) smp=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "nested_kvm.sh: unknown option '$1' ($usage)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 ]]; then
  echo "nested_kvm.sh: no command given ($usage)" >&2
  exit 2
fi
if [[ ! $limit =~ ^[1-9][0-9]{0,5}$ ]]; then
  echo "nested_kvm.sh: --timeout '$limit' is not a whole number of seconds below 1000000 ($usage)" >&2
  exit 2
fi
if [[ ! $frozen_after =~ ^[1-9][0-9]{1,4}$ ]]; then
  echo "nested_kvm.sh: MINIVMM_NESTED_FROZEN_AFTER '$frozen_after' is not 10 to 99999 seconds" >&2
  exit 2
fi

cache=${MINIVMM_NESTED_CACHE:-$HOME/.cache/minivmm-nested}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

if ! command -v qemu-system-x86_64 >/dev/null; then
  echo "nested_kvm.sh: installing qemu-system-x86 from Debian" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-system-x86 >/dev/null
fi

# The kernel and busybox, unpacked once. linux-image-amd64 is a metapackage: its one dependency
# names the current kernel package.
if [[ ! -f $cache/ready ]]; then
  echo "nested_kvm.sh: fetching a Debian kernel and busybox-static into $cache" >&2
  rm -rf "$cache/debs" "$cache/root"
  mkdir -p "$cache/debs" "$cache/root"
  kpkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1)
  [[ -n $kpkg ]] || { echo "nested_kvm.sh: cannot find the kernel package behind linux-image-amd64" >&2; exit 1; }
  (cd "$cache/debs" && apt-get download "$kpkg" busybox-static >/dev/null 2>&1) ||
    { echo "nested_kvm.sh: apt-get download $kpkg busybox-static failed" >&2; exit 1; }
  for deb in "$cache"/debs/*.deb; do dpkg-deb -x "$deb" "$cache/root"; done
  touch "$cache/ready"
fi
vmlinuz=$(ls "$cache"/root/boot/vmlinuz-* | head -n1)
kver=${vmlinuz##*/vmlinuz-}
moddir=$cache/root/lib/modules/$kver/kernel
busybox=$cache/root/bin/busybox

# The initramfs: busybox, the modules for virtio-pci, 9p and kvm-amd (in dependency order;
# Debian builds them all as modules), and an init that mounts the host's / and runs the job.
if [[ ! -f $cache/initrd.gz || $0 -nt $cache/initrd.gz ]]; then
  rm -rf "$cache/initrd"
  mkdir -p "$cache"/initrd/{bin,mod,proc,sys,dev,mnt}
  cp "$busybox" "$cache/initrd/bin/"
  for m in drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev \
           drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci net/9p/9pnet \
           net/9p/9pnet_virtio fs/netfs/netfs fs/fscache/fscache fs/9p/9p virt/lib/irqbypass \
           drivers/crypto/ccp/ccp arch/x86/kvm/kvm arch/x86/kvm/kvm-amd drivers/net/tun \
           drivers/net/veth; do
    cp "$moddir/$m.ko" "$cache/initrd/mod/"
  done
  cat >"$cache/initrd/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci 9pnet \
         9pnet_virtio netfs fscache 9p irqbypass ccp kvm kvm-amd tun veth; do
  insmod /mod/$m.ko || echo "nested: insmod $m failed"
done
[ -c /dev/kvm ] || echo "nested: no /dev/kvm after loading kvm-amd"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 hostroot /mnt || echo "nested: 9p mount failed"
mount -t proc proc /mnt/proc
mount -t sysfs sysfs /mnt/sys
mount -t devtmpfs dev /mnt/dev
mkdir -p /mnt/dev/pts /mnt/dev/shm
# devtmpfs has no /dev/fd and std* links (udev makes them); bash's <(...) needs /dev/fd.
ln -sf /proc/self/fd /mnt/dev/fd
ln -sf /proc/self/fd/0 /mnt/dev/stdin
ln -sf /proc/self/fd/1 /mnt/dev/stdout
ln -sf /proc/self/fd/2 /mnt/dev/stderr
mount -t devpts devpts /mnt/dev/pts
mount -t tmpfs shm /mnt/dev/shm
job=$(sed -n 's/.*nested_job=\([^ ]*\).*/\1/p' /proc/cmdline)
# The heartbeat (see the script's header): busybox from this initramfs, never the 9p root.
(while :; do echo beat >/dev/ttyS1; /bin/sleep 20; done) &
echo "nested: $(uname -r) up; the job starts"
chroot /mnt /bin/sh "$job/job.sh"
echo $? >/mnt"$job/status"
sync
poweroff -f
EOF
  chmod +x "$cache/initrd/init"
  (cd "$cache/initrd" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip >"$cache/initrd.gz")
fi

# The job: the command, run in this directory with this environment's PATH and HOME, under a
# private /tmp (sockets and scratch files stay in the guest). A directory of this host's /tmp
# (a CI clone made with mktemp -d) would be hidden by that tmpfs: it is bound back at its own
# path from the host's /tmp, kept reachable under /dev/shm first. Its stdout and stderr come
# back through the guest's serial console.
job=$(mktemp -d "$cache/job.XXXXXX")
trap 'rm -rf "$job"' EXIT
{
  # MINIVMM_NESTED_KVM: the tests skip their time bounds in here (tests/integration/run_minivmm.h).
  echo "export PATH='$PATH' HOME='$HOME' TERM=dumb MINIVMM_NESTED_KVM=1"
  echo "mkdir -p /dev/shm/.hosttmp && mount --bind /tmp /dev/shm/.hosttmp"
  echo "mount -t tmpfs tmp /tmp"
  if [[ $PWD == /tmp/* ]]; then
    printf 'mkdir -p %q && mount --bind %q %q || exit 125\n' "$PWD" "/dev/shm/.hosttmp${PWD#/tmp}" "$PWD"
  fi
  printf 'cd %q || exit 125\n' "$PWD"
  printf '%q ' "$@"
  echo
} >"$job/job.sh"

echo "nested_kvm.sh: booting $kver with kvm-amd under QEMU TCG ($smp CPUs, $mem, at most $limit s)" >&2
# The console is filtered line by line and unbuffered (sed -u), so a CI log shows each test as it
# ends, not a block at the end, and a killed run still shows how far it got.
# The watchdog: each heartbeat lands in $job/heartbeat (the second serial port); a machine
# without one for $frozen_after s is killed (only this run's QEMU: its command line names $job).
: >"$job/heartbeat"
# Two more ends it watches for. The job's status written and the machine still up a minute
# later: its power-off hung (seen in a fresh-clone run on 2026-12-04: "soft lockup - CPU#1
# stuck" in `poweroff`, after a nested guest had stalled on that CPU), so it is killed and the
# job's status stands. The nested kernel's own soft lockup before the job ended: a CPU stuck in
# the emulated machine, an emulator fault like a freeze.
(
  done_at=0
  while sleep 10; do
    now=$(date +%s)
    last=$(stat -c %Y "$job/heartbeat" 2>/dev/null || echo 0)
    if [[ -f $job/status ]]; then
      ((done_at > 0)) || done_at=$now
      if ((now - done_at > 60)); then
        echo "$((now - done_at))" >"$job/poweroff-hung"
        pkill -KILL -f "^qemu-system-x86_64 .*nested_job=$job" || true
        exit 0
      fi
    elif grep -qE '^\[ *[0-9.]+\] watchdog: BUG: soft lockup' "$job/console" 2>/dev/null; then
      grep -m1 -oE 'watchdog: BUG: soft lockup.*' "$job/console" >"$job/lockup"
      pkill -KILL -f "^qemu-system-x86_64 .*nested_job=$job" || true
      exit 0
    elif ((now - last > frozen_after)); then
      echo "$((now - last))" >"$job/frozen"
      pkill -KILL -f "^qemu-system-x86_64 .*nested_job=$job" || true
      exit 0
    fi
  done
) &
watchdog=$!
set +e
started=$SECONDS
timeout --kill-after=20 "$limit" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
  -display none -no-reboot -monitor none -serial stdio -serial "file:$job/heartbeat" \
  -kernel "$vmlinuz" -initrd "$cache/initrd.gz" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 nested_job=$job" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,id=hostroot,multidevs=remap \
  </dev/null | sed -u -e 's/\r//g' -e '/^SeaBIOS\|^iPXE\|^Press Ctrl-B\|^Booting from ROM/d' -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' |
  tee "$job/console"
qemu_status=${PIPESTATUS[0]}
kill "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
set -e
if [[ -f $job/poweroff-hung ]]; then
  echo "nested_kvm.sh: the job ended with status $(cat "$job/status"); the nested machine then" \
       "did not power off in $(cat "$job/poweroff-hung") s and was killed (docs/nested-kvm.md)" >&2
  exit "$(cat "$job/status")"
fi
if [[ -f $job/lockup ]]; then
  echo "nested_kvm.sh: the nested machine's kernel reported '$(cat "$job/lockup")' after" \
       "$((SECONDS - started)) s of the job (QEMU's TCG, not the job: docs/nested-kvm.md)" >&2
  exit 126
fi
if [[ -f $job/frozen ]]; then
  echo "nested_kvm.sh: the nested machine froze: no heartbeat for $(cat "$job/frozen") s, after" \
       "$((SECONDS - started)) s of the job (QEMU's TCG stopped it, not the job: docs/nested-kvm.md)" >&2
  exit 126
fi
# 124: timeout(1) ended QEMU; 137: it had to SIGKILL it 20 s later, or something else did (the
# OOM killer), which the elapsed time tells apart.
if ((qemu_status == 124 || (qemu_status == 137 && SECONDS - started >= limit))); then
  echo "nested_kvm.sh: the nested machine ran past --timeout $limit s and was killed" >&2
  exit 124
fi
if ((qemu_status > 128)); then
  echo "nested_kvm.sh: QEMU was killed by signal $((qemu_status - 128)) after $((SECONDS - started)) s" >&2
  exit 125
fi
# The L1 kernel's own panic (panic=-1 reboots it at once, and -no-reboot ends QEMU): the job never
# wrote its status. Seen on 2026-12-04 in KVM's exit path under TCG's SVM ("corrupted stack end
# detected inside scheduler", in kvm_vcpu_reset from shutdown_interception): the emulator's
# fault like a freeze, so the same status. A panic a test printed (a nested guest's own
# console) comes with the job's status and is the job's result.
if [[ ! -f $job/status ]] && grep -q 'Kernel panic - not syncing' "$job/console"; then
  echo "nested_kvm.sh: the nested machine's kernel panicked after $((SECONDS - started)) s of the" \
       "job (under QEMU's TCG, not in the job: docs/nested-kvm.md): $(grep -m1 -o 'Kernel panic - not syncing.*' "$job/console")" >&2
  exit 126
fi
if [[ ! -f $job/status ]]; then
  echo "nested_kvm.sh: the nested guest stopped without reporting the command's status" >&2
  exit 125
fi
exit "$(cat "$job/status")"
