#!/usr/bin/env bash
# Sequential 4 KiB reads through virtio-blk beside the host's own dd of the same file (issue 14).
# Needs a usable /dev/kvm. The bundled guest reads the whole disk with `blk=check blkreq=8` (one
# 4 KiB request in flight at a time, polled) and the run's wall time, minus a run of the same
# guest without a disk, is the read time. dd reads the same file with 4 KiB blocks, O_DIRECT
# and through the page cache, for comparison. Also runs the KVM-free backend benchmark.
#
#   scripts/bench_virtio_blk.sh [SIZE_MIB]     (default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mib="${1:-64}"
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINIVMM_BUILD_BENCH=ON >/dev/null
cmake --build build-bench --target minivmm guest_kernel virtio_blk_backend_bench >/dev/null
B=build-bench/vmm/minivmm
K=build-bench/guest/minivmm-guest.bin
disk=$(mktemp /tmp/minivmm-bench-disk-XXXXXX)
stats=$(mktemp /tmp/minivmm-bench-stats-XXXXXX)
trap 'rm -f "$disk" "$stats"' EXIT
head -c "$((size_mib << 20))" /dev/urandom >"$disk"

now() { date +%s.%N; }
t0=$(now)
$B run --kernel "$K" --cmdline "ticks=1" --no-console-input --quiet >/dev/null || true
t1=$(now)
boot_s=$(python3 -c "print($t1 - $t0)")
# Both engines: io_uring from the loop (the default) and the worker thread.
for aio in io_uring threads; do
  t1=$(now)
  $B run --kernel "$K" --cmdline "blk=check blkreq=8 ticks=1" --drive "$disk,ro,aio=$aio" \
    --no-console-input --quiet --stats "$stats" | grep '^blk:' || true
  t2=$(now)
  python3 - "$boot_s" "$t1" "$t2" "$size_mib" "$stats" "$aio" <<'PY'
import json, sys
boot, t1, t2, mib = map(float, sys.argv[1:5])
s = json.load(open(sys.argv[5]))["devices"]["virtio_blk0"]
read_s = (t2 - t1) - boot
print(f"virtio-blk 4 KiB sequential, aio={sys.argv[6]} ({s['engine']}): {mib:.0f} MiB in "
      f"{read_s:.3f} s = {mib / read_s:.1f} MiB/s, {s['requests']['reads'] / read_s:.0f} req/s "
      f"(notifies: ioeventfd {s['notifies_ioeventfd']}, vcpu {s['notifies_vcpu']})")
PY
done
sync
echo "host dd, 4 KiB, O_DIRECT:"
dd if="$disk" of=/dev/null bs=4k iflag=direct 2>&1 | tail -1
echo "host dd, 4 KiB, page cache:"
dd if="$disk" of=/dev/null bs=4k 2>&1 | tail -1
echo "backend alone (no KVM): parse + I/O + completion per 4 KiB request, each engine"
build-bench/tests/bench/virtio_blk_backend_bench --benchmark_min_time=0.5
