#!/usr/bin/env python3
"""Writes the seed corpus of virtqueue_fuzz and virtio_blk_fuzz (format: virtio_fuzz_input.h).

    tests/fuzz/make_virtio_seeds.py tests/fuzz/corpus

Deterministic; regenerate and commit when the input format changes.
"""
import os
import struct
import sys

RAM = 0x2000 - 8  # the part of guest RAM an input can set (max_len is 4096, so less in practice)
DESC, AVAIL, USED = 0x100, 0x180, 0x1A0
NEXT, WRITE, INDIRECT = 1, 2, 4
HDR, DATA, STATUS, TABLE = 0x400, 0x800, 0xC00, 0x600


class Guest:
    def __init__(self, size=8, flags=0):
        self.flags, self.size = flags, size
        self.ram = bytearray(0xE00)  # enough for every address used above
        self.avail_idx = 0

    def desc(self, i, addr, length, flags, nxt=0, base=DESC):
        struct.pack_into("<QIHH", self.ram, base + 16 * i, addr, length, flags, nxt)

    def publish(self, head):
        struct.pack_into("<H", self.ram, AVAIL + 4 + 2 * (self.avail_idx % self.size), head)
        self.avail_idx += 1
        struct.pack_into("<H", self.ram, AVAIL + 2, self.avail_idx)

    def header(self, typ, sector):
        struct.pack_into("<IIQ", self.ram, HDR, typ, 0, sector)

    def request(self, typ, sector, data_len, data_writable):
        self.header(typ, sector)
        chain = [(HDR, 16, 0)]
        if data_len:
            chain.append((DATA, data_len, WRITE if data_writable else 0))
        chain.append((STATUS, 1, WRITE))
        for k, (a, l, f) in enumerate(chain):
            last = k + 1 == len(chain)
            self.desc(k, a, l, f | (0 if last else NEXT), k + 1)
        self.publish(0)

    def bytes(self):
        return bytes([self.flags, self.size]) + struct.pack("<HHH", DESC, AVAIL, USED) + bytes(self.ram)


def seeds():
    out = {}
    g = Guest(); g.request(0, 2, 1024, True); out["read"] = g
    g = Guest(); g.request(1, 60, 512, False); out["write"] = g
    g = Guest(flags=4); g.request(1, 0, 512, False); out["write_read_only"] = g
    g = Guest(); g.request(4, 0, 0, False); out["flush"] = g
    g = Guest(); g.request(8, 0, 20, True); out["get_id"] = g
    g = Guest(); g.request(11, 0, 16, False); struct.pack_into("<QII", g.ram, DATA, 4, 8, 0)
    out["discard"] = g
    g = Guest(); g.request(0, 63, 1024, True); out["read_past_end"] = g
    g = Guest(); g.request(0x77, 0, 0, False); out["unsupported"] = g
    g = Guest(flags=1)
    g.header(0, 1)
    g.desc(0, HDR, 16, NEXT, 1, base=TABLE)
    g.desc(1, DATA, 512, WRITE | NEXT, 2, base=TABLE)
    g.desc(2, STATUS, 1, WRITE, 0, base=TABLE)
    g.desc(0, TABLE, 48, INDIRECT)
    g.publish(0)
    out["indirect"] = g
    g = Guest(); g.desc(0, HDR, 16, NEXT, 1); g.desc(1, DATA, 512, NEXT, 0); g.publish(0)
    out["loop"] = g
    g = Guest(flags=3); g.request(0, 0, 512, True); out["event_idx_indirect"] = g
    g = Guest(); g.request(0, 0, 512, True); g.request(1, 3, 512, False); out["two_requests"] = g
    return out


def main():
    root = sys.argv[1]
    for target in ("virtqueue_fuzz", "virtio_blk_fuzz"):
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name, g in seeds().items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(g.bytes())


if __name__ == "__main__":
    main()
