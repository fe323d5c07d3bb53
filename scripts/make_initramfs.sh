#!/usr/bin/env bash
# Builds a tiny initramfs (gzip'd cpio "newc") around a static busybox:
#
#   /bin/busybox            the static binary
#   /bin/sh, /bin/mount...  symlinks to it (the applets /init needs)
#   /dev/console            char 5:1, so the kernel can give /init a console before devtmpfs
#   /init                   mounts proc, sys and devtmpfs, prints MINIVMM-INITRAMFS-OK on
#                           /dev/console, then `reboot -f` (with reboot=k the kernel resets the
#                           machine through the i8042, and minivmm exits 0)
#
# Usage: make_initramfs.sh BUSYBOX OUTPUT.cpio.gz
#
# The archive is written by python3 (standard library only), so no cpio(1) is needed and no
# device node has to be created on the host: it works unprivileged and is byte-for-byte
# reproducible (every mtime is 0).
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUSYBOX OUTPUT.cpio.gz" >&2
  exit 2
fi
busybox=$1
out=$2
if [[ ! -f $busybox ]]; then
  echo "make_initramfs: '$busybox' is not a file" >&2
  exit 1
fi
command -v python3 >/dev/null || { echo "make_initramfs: python3 is required" >&2; exit 1; }

python3 - "$busybox" "$out" <<'PY'
import gzip
import sys

busybox_path, out_path = sys.argv[1], sys.argv[2]

INIT = b"""#!/bin/sh
# minivmm test init: prove userspace runs, then reset the machine.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
echo "MINIVMM-INITRAMFS-OK" > /dev/console
echo "uptime: $(/bin/busybox cat /proc/uptime)" > /dev/console
/bin/busybox reboot -f
# reboot -f returns only if the reset did not happen: do not let init exit (that panics).
while :; do /bin/busybox sleep 1; done
"""

# Applets /init and a person poking around would use; all are links to /bin/busybox.
APPLETS = ["sh", "mount", "echo", "cat", "ls", "reboot", "poweroff", "sleep", "dmesg", "uname"]

S_IFDIR, S_IFREG, S_IFLNK, S_IFCHR = 0o040000, 0o100000, 0o120000, 0o020000

with open(busybox_path, "rb") as f:
    busybox = f.read()

entries = []  # (name, mode, data, rdevmajor, rdevminor)
for d in ["bin", "dev", "proc", "sys", "etc", "tmp", "root"]:
    entries.append((d, S_IFDIR | 0o755, b"", 0, 0))
entries.append(("dev/console", S_IFCHR | 0o600, b"", 5, 1))
entries.append(("dev/null", S_IFCHR | 0o666, b"", 1, 3))
entries.append(("bin/busybox", S_IFREG | 0o755, busybox, 0, 0))
for a in APPLETS:
    entries.append((f"bin/{a}", S_IFLNK | 0o777, b"busybox", 0, 0))
entries.append(("sbin", S_IFLNK | 0o777, b"bin", 0, 0))
entries.append(("init", S_IFREG | 0o755, INIT, 0, 0))


def pad4(n):
    return (4 - n % 4) % 4


def record(ino, name, mode, data, rmaj, rmin):
    nameb = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 2 if mode & S_IFDIR == S_IFDIR else 1, 0, len(data),
              0, 0, rmaj, rmin, len(nameb), 0]
    hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
    out = hdr + nameb + b"\0" * pad4(len(hdr) + len(nameb))
    return out + data + b"\0" * pad4(len(data))


blob = bytearray()
for i, (name, mode, data, rmaj, rmin) in enumerate(entries, start=1):
    blob += record(i, name, mode, data, rmaj, rmin)
blob += record(0, "TRAILER!!!", 0, b"", 0, 0)
blob += b"\0" * pad4(len(blob))

with open(out_path, "wb") as f:
    f.write(gzip.compress(bytes(blob), compresslevel=9, mtime=0))
print(f"make_initramfs: wrote {out_path} ({len(entries)} entries)", file=sys.stderr)
PY
