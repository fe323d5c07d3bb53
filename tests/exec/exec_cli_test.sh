#!/usr/bin/env bash
# ctest (label unit): `minivmm exec`'s command-line errors, each one line naming what to pass,
# exit 2, before any guest exists (no /dev/kvm needed).
#   exec_cli_test.sh MINIVMM WORKDIR
set -uo pipefail
minivmm=$1 work=$2
mkdir -p "$work"
fail=0
expect() {  # expect STATUS PATTERN ARGS...: the status and one stderr line matching PATTERN
  local status=$1 pattern=$2
  shift 2
  local err
  err=$(timeout 20 "$minivmm" exec "$@" 2>&1 >/dev/null)
  local got=$?
  if [[ $got -eq $status && $(printf '%s\n' "$err" | wc -l) -eq 1 && $err =~ $pattern ]]; then
    echo "ok:   exec $* -> $got: $err"
  else
    echo "FAIL: exec $* -> $got (expected $status /$pattern/): $err"
    fail=1
  fi
}
bz=$work/fake-bzImage
python3 - "$bz" <<'PY'
import struct, sys
img = bytearray(0x4000)
img[0x202:0x206] = b"HdrS"
struct.pack_into("<H", img, 0x206, 0x020f)
struct.pack_into("<H", img, 0x20e, 0x3000)
img[0x3200:0x3200 + 22] = b"9.9.9-nothere (x) #1\0\0"
open(sys.argv[1], "wb").write(img)
PY
expect 2 'no command' --kernel "$bz"
expect 2 'no kernel at /nonexistent.*pass --kernel' --kernel /nonexistent -- true
expect 2 'pass --kernel a bzImage' --kernel /etc/hostname -- true
expect 2 'no modules folder /lib/modules/9.9.9-nothere.*pass --modules' --kernel "$bz" -- true
expect 2 'no modules folder /nonexistent' --kernel "$bz" --modules /nonexistent -- true
expect 2 '--share:.*not DIR\[,ro\]' --kernel "$bz" --share /nonexistent -- true
expect 2 '--share:.*guest.s root' --kernel "$bz" --share / -- true
expect 2 '--cpus' --cpus 0 --kernel "$bz" -- true
expect 2 '--memory' --memory lots --kernel "$bz" -- true
expect 2 '--timeout' --timeout forever --kernel "$bz" -- true
# Six shares need nine virtio devices of the board's eight (with the root and two consoles).
shares=()
for i in 1 2 3 4 5 6; do mkdir -p "$work/share$i"; shares+=(--share "$work/share$i"); done
expect 2 '--share: at most 5 .*not 6$' "${shares[@]}" --kernel "$bz" -- true
mkdir -p "$work/mods"
echo 'not a dep line' >"$work/mods/modules.dep"
# --stats is judged before anything is read: never a folder, never the kernel it would replace.
expect 2 "--stats: '$work' is a directory" --stats "$work" --kernel "$bz" --modules "$work/mods" -- true
cp "$bz" "$work/kernel-copy"
expect 2 'an output never overwrites an input' --stats "$work/kernel-copy" --kernel "$work/kernel-copy" \
  --modules "$work/mods" -- true
cmp -s "$bz" "$work/kernel-copy" || { echo "FAIL: --stats touched the kernel"; fail=1; }
expect 2 "--stats: .*$work/no/such" --stats "$work/no/such/r.json" --kernel "$bz" --modules "$work/mods" -- true
expect 2 '--stats' --stats '' --kernel "$bz" --modules "$work/mods" -- true
# The modules folder is an input too: a report never lands in it, by its name or by a link.
expect 2 'is in the folder given to --modules' --stats "$work/mods/modules.dep" --kernel "$bz" --modules "$work/mods" -- true
ln -sf "$work/mods/modules.dep" "$work/link.json"
expect 2 'is in the folder given to --modules' --stats "$work/link.json" --kernel "$bz" --modules "$work/mods" -- true
grep -qx 'not a dep line' "$work/mods/modules.dep" || { echo "FAIL: --stats touched modules.dep"; fail=1; }
err=$(timeout 20 "$minivmm" exec --kernel "$bz" --modules "$work/mods" -- true 2>&1)
got=$?
if [[ $got -eq 249 && $err == *"modules.dep: line 1"* ]]; then echo "ok:   bad modules.dep -> 249"; else echo "FAIL: bad modules.dep -> $got: $err"; fail=1; fi
exit $fail
