#!/usr/bin/env python3
"""Writes virtio_9p_fuzz's seeds (input format: tests/fuzz/virtio_9p_fuzz.cc) into
tests/fuzz/corpus/virtio_9p_fuzz: sessions of the requests Linux's v9fs sends."""
import os
import struct
import sys

def s(text):
    b = text.encode()
    return struct.pack('<H', len(b)) + b

def msg(mtype, tag, body):
    return struct.pack('<IBH', 7 + len(body), mtype, tag) + body

def rec(m, room=8192):
    return struct.pack('<HH', len(m), room) + m

def walk(fid, newfid, *names):
    return msg(110, 1, struct.pack('<IIH', fid, newfid, len(names)) + b''.join(s(n) for n in names))

lopen = lambda fid, flags: msg(12, 1, struct.pack('<II', fid, flags))
read = lambda fid, off, n: msg(116, 2, struct.pack('<IQI', fid, off, n))
write = lambda fid, off, data: msg(118, 3, struct.pack('<IQI', fid, off, len(data)) + data)
getattr_ = lambda fid: msg(24, 4, struct.pack('<IQ', fid, 0x7ff))
clunk = lambda fid: msg(120, 5, struct.pack('<I', fid))
readdir = lambda fid, off, n: msg(40, 6, struct.pack('<IQI', fid, off, n))
lcreate = lambda fid, name, flags: msg(14, 7, struct.pack('<I', fid) + s(name) + struct.pack('<III', flags, 0o644, 0))
mkdir = lambda fid, name: msg(72, 8, struct.pack('<I', fid) + s(name) + struct.pack('<II', 0o755, 0))
unlinkat = lambda fid, name, fl: msg(76, 9, struct.pack('<I', fid) + s(name) + struct.pack('<I', fl))
renameat = lambda a, an, b, bn: msg(74, 10, struct.pack('<I', a) + s(an) + struct.pack('<I', b) + s(bn))
symlink = lambda fid, name, tgt: msg(16, 11, struct.pack('<I', fid) + s(name) + s(tgt) + struct.pack('<I', 0))
readlink = lambda fid: msg(22, 12, struct.pack('<I', fid))
setattr_ = lambda fid, valid, mode, size: msg(26, 13, struct.pack('<IIIIIQQQQQ', fid, valid, mode, 0, 0, size, 0, 0, 0, 0))
link = lambda d, f, name: msg(70, 14, struct.pack('<II', d, f) + s(name))
lock = lambda fid, t: msg(52, 15, struct.pack('<IBIQQI', fid, t, 0, 0, 0, 1) + s('c'))
statfs = lambda fid: msg(8, 16, struct.pack('<I', fid))

seeds = {
    'read_file': [walk(0, 1, 'f'), lopen(1, 0), read(1, 0, 100), getattr_(1), clunk(1)],
    'create_write': [walk(0, 1), lcreate(1, 'new', 2 | 0o100), write(1, 0, b'data'), read(1, 0, 10)],
    'readdir': [walk(0, 1), lopen(1, 0o200000), readdir(1, 0, 200), readdir(1, 0, 60)],
    'dirs': [mkdir(0, 'm'), renameat(0, 'f', 0, 'm2'), unlinkat(0, 'm', 0x200), walk(0, 1, 'd', 'e', '..', '..', '..')],
    'symlinks': [walk(0, 1, 'rel'), readlink(1), lopen(1, 0), walk(0, 2, 'abs', 'secret'), symlink(0, 's', '/etc/passwd')],
    'setattr_link': [walk(0, 1, 'f'), setattr_(1, 0x9, 0o600, 1), link(0, 1, 'hard'), lock(1, 1), statfs(0)],
    'hostile': [struct.pack('<IBH', 3, 110, 1), struct.pack('<IBH', 100000, 24, 1),
                msg(110, 1, struct.pack('<IIH', 0, 1, 17)), msg(118, 1, struct.pack('<IQI', 0, 0, 0xffffffff))],
}
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'corpus', 'virtio_9p_fuzz')
os.makedirs(out, exist_ok=True)
for name, msgs in seeds.items():
    for flags, suffix in ((2, ''), (3, '_ro')):
        if suffix and name not in ('create_write', 'dirs', 'setattr_link'):
            continue
        with open(os.path.join(out, name + suffix), 'wb') as f:
            f.write(bytes([flags]) + b''.join(rec(m) for m in msgs))
# One without the session prefix: the fuzzer's own Tversion first.
with open(os.path.join(out, 'no_session'), 'wb') as f:
    f.write(bytes([0]) + rec(msg(100, 0xffff, struct.pack('<I', 8192) + s('9P2000.L'))) +
            rec(msg(104, 1, struct.pack('<II', 0, 0xffffffff) + s('u') + s('') + struct.pack('<I', 0))) +
            rec(getattr_(0), 10))
