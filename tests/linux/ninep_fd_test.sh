#!/usr/bin/env bash
# minivmm's 9p server (devices/virtio/9p/p9_server.h) against Linux's own v9fs client: a folder
# on a tmpfs served by tests/support/ninep_fd_server over a socket pair (trans=fd), mounted, and
# a POSIX table run through the mount and checked on the server's side. Linux's 9p client exists
# here only inside scripts/nested_kvm.sh's guest (this project's hosts have no 9p module), so
# scripts/test.sh runs it there: `ctest -L nested-linux`. Skips (77) without root or 9p.
#
#   ninep_fd_test.sh NINEP_FD_SERVER
set -uo pipefail
server=$1
if [[ $(id -u) -ne 0 ]] || ! grep -qw 9p /proc/filesystems; then
  echo "SKIP: needs root and a kernel with 9p (run it under scripts/nested_kvm.sh)"
  exit 77
fi
work=$(mktemp -d /tmp/ninep-fd-test.XXXXXX)
mount -t tmpfs ninep-test "$work"  # the share's files on a tmpfs: not the nesting's 9p root
# The served folders are one level deeper than the mount points, so that a relative symlink
# resolves to a file on the server's side (srv/outside/secret) and to nothing on the client's:
# the guest sees the link, and only a server that followed it would show the secret.
mkdir -p "$work"/srv/share "$work"/srv/ro "$work"/srv/outside "$work"/mnt "$work"/mnt-ro
echo secret >"$work/srv/outside/secret"
echo keep >"$work/srv/ro/keep"
failures=0
check() {  # NAME COMMAND...: one row of the table
  if "${@:2}"; then
    echo "ok   $1"
  else
    echo "FAIL $1"
    failures=$((failures + 1))
  fi
}
cleanup() {
  umount "$work/mnt" "$work/mnt-ro" 2>/dev/null
  sleep 0.2
  cat "$work"/srv/ninep_fd_server.*.stats 2>/dev/null | tr '\n' ' '
  echo
  umount "$work" 2>/dev/null
  rmdir "$work" 2>/dev/null
}
trap cleanup EXIT

"$server" mount "$work/srv/share" "$work/mnt" >/dev/null || { echo "FAIL mount"; exit 1; }
"$server" mount "$work/srv/ro" "$work/mnt-ro" ro >/dev/null || { echo "FAIL mount ro"; exit 1; }
m=$work/mnt s=$work/srv/share r=$work/srv/ro

check "create and write, read back on the host" \
  bash -c "echo hello >'$m/a' && [[ \$(cat '$s/a') == hello ]]"
check "host write, read in the guest" \
  bash -c "echo from-host >'$s/h' && [[ \$(cat '$m/h') == from-host ]]"
check "rename over an existing file" \
  bash -c "echo new >'$m/b' && echo old >'$m/c' && mv '$m/b' '$m/c' && [[ \$(cat '$s/c') == new && ! -e '$s/b' ]]"
echo 12345 >"$m/u"
check "unlink while open, then fstat" \
  python3 -c "import os,sys; fd=os.open('$m/u', os.O_RDONLY); os.unlink('$m/u'); assert not os.path.exists('$s/u'); assert os.fstat(fd).st_size == 6, os.fstat(fd); assert os.read(fd, 16) == b'12345\\n'"
check "readdir of 1,000 entries" \
  bash -c "mkdir '$m/many' && for i in \$(seq 1000); do : >'$m/many/f'\$i; done && [[ \$(ls '$m/many' | wc -l) == 1000 && \$(ls '$s/many' | wc -l) == 1000 ]]"
check "64 MiB file checksummed on both sides" \
  bash -c "head -c 67108864 /dev/urandom >'$work/big' && cp '$work/big' '$m/big' && [[ \$(sha256sum <'$m/big') == \$(sha256sum <'$s/big') && \$(sha256sum <'$work/big') == \$(sha256sum <'$s/big') ]]"
check "a symlink out of the share is not followed out" \
  bash -c "ln -s ../outside/secret '$s/rel' && ln -s ../outside '$s/dirlink' && [[ -L '$m/rel' && \$(readlink '$m/rel') == ../outside/secret ]] && ! cat '$m/rel' 2>/dev/null && ! ls '$m/dirlink/' 2>/dev/null && ! cat '$m/dirlink/secret' 2>/dev/null"
check "mkdir and rmdir" \
  bash -c "mkdir '$m/d' && [[ -d '$s/d' ]] && rmdir '$m/d' && [[ ! -e '$s/d' ]]"
check "hard link" \
  bash -c "echo l >'$m/l1' && ln '$m/l1' '$m/l2' && [[ \$(stat -c %h '$s/l1') == 2 && \$(stat -c %h '$m/l1') == 2 ]]"
check "symlink and readlink" \
  bash -c "ln -s a '$m/sl' && [[ \$(readlink '$s/sl') == a && \$(readlink '$m/sl') == a && \$(cat '$m/sl') == hello ]]"
check "chmod and truncate (setattr)" \
  bash -c "chmod 600 '$m/a' && [[ \$(stat -c %a '$s/a') == 600 ]] && truncate -s 3 '$m/a' && [[ \$(stat -c %s '$s/a') == 3 ]]"
check "a read-only share refuses writes (host side)" \
  bash -c "[[ \$(cat '$work/mnt-ro/keep') == keep ]] && ! echo x >'$work/mnt-ro/new' 2>/dev/null && ! echo x >>'$work/mnt-ro/keep' 2>/dev/null && ! mkdir '$work/mnt-ro/d' 2>/dev/null && ! rm '$work/mnt-ro/keep' 2>/dev/null && [[ ! -e '$r/new' && \$(cat '$r/keep') == keep ]]"
check "statfs" bash -c "df '$m' >/dev/null"
echo "ninep_fd_test: $failures failed"
((failures == 0))
