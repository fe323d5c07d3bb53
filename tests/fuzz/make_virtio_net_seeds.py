#!/usr/bin/env python3
"""Writes the seed corpus of virtio_net_fuzz (format: the top of virtio_net_fuzz.cc).

    tests/fuzz/make_virtio_net_seeds.py tests/fuzz/corpus

Deterministic; regenerate and commit when the input format changes.
"""
import os
import struct
import sys

# Receive queue rings, transmit queue rings, then buffers; all inside the 8 KiB guest RAM.
RX_DESC, RX_AVAIL, RX_USED = 0x000, 0x080, 0x0A0
TX_DESC, TX_AVAIL, TX_USED = 0x100, 0x180, 0x1A0
TABLE = 0x300   # an indirect table
TX_BUF = 0x400  # transmitted frames
RX_BUF = 0xA00  # receive buffers, 0x600 (1536) bytes each
NEXT, WRITE, INDIRECT = 1, 2, 4
HDR = 12


class Guest:
    def __init__(self, flags=0, rx_size=8, tx_size=8, frames=0, mix=0):
        self.flags, self.rx_size, self.tx_size = flags, rx_size, tx_size
        self.frames, self.mix = frames, mix
        self.ram = bytearray(0x1C00)
        self.idx = {RX_AVAIL: 0, TX_AVAIL: 0}

    def desc(self, base, i, addr, length, flags, nxt=0):
        struct.pack_into("<QIHH", self.ram, base + 16 * i, addr, length, flags, nxt)

    def publish(self, avail, size, head):
        struct.pack_into("<H", self.ram, avail + 4 + 2 * (self.idx[avail] % size), head)
        self.idx[avail] += 1
        struct.pack_into("<H", self.ram, avail + 2, self.idx[avail])

    def tx(self, head, at, frame_len, cuts=(), header=b"\0" * HDR):
        """A header and a frame at `at`, as one chain split at `cuts`."""
        self.ram[at:at + HDR] = header
        for k in range(frame_len):
            self.ram[at + HDR + k] = (k * 13) & 0xFF
        self.ram[at + HDR:at + HDR + 6] = b"\xff" * 6
        total, start, bufs = HDR + frame_len, 0, []
        for cut in list(cuts) + [total]:
            bufs.append((at + start, cut - start, 0))
            start = cut
        self.chain(TX_DESC, TX_AVAIL, self.tx_size, head, bufs)

    def rx(self, head, at, length):
        self.chain(RX_DESC, RX_AVAIL, self.rx_size, head, [(at, length, WRITE)])

    def chain(self, table, avail, size, head, bufs):
        for k, (a, l, f) in enumerate(bufs):
            last = k + 1 == len(bufs)
            self.desc(table, head + k, a, l, f | (0 if last else NEXT), head + k + 1)
        self.publish(avail, size, head)

    def bytes(self):
        # RAM past the input is zero: what only the device writes (receive buffers, used rings)
        # need not be in the seed, which must stay under the target's -max_len (4096).
        ram = bytes(self.ram).rstrip(b"\0")
        assert 16 + len(ram) <= 4096
        return (bytes([self.flags, self.rx_size, self.tx_size])
                + struct.pack("<HHHHHH", RX_DESC, RX_AVAIL, RX_USED, TX_DESC, TX_AVAIL, TX_USED)
                + bytes([self.frames | (self.mix << 4)]) + ram)


def seeds():
    out = {}
    g = Guest(); g.tx(0, TX_BUF, 60, cuts=[HDR]); out["tx_linux"] = g
    g = Guest(); g.tx(0, TX_BUF, 100); g.tx(1, TX_BUF + 0x100, 200, cuts=[5, 20]); out["tx_split"] = g
    g = Guest(frames=3, mix=4); g.rx(0, RX_BUF, 1536); g.rx(1, RX_BUF + 0x600, 1536)
    out["rx_two_buffers"] = g
    g = Guest(frames=5, mix=6); out["rx_no_buffers"] = g
    g = Guest(frames=2, mix=6); g.rx(0, RX_BUF, 100); out["rx_too_small"] = g
    g = Guest(frames=2, mix=5); g.chain(RX_DESC, RX_AVAIL, 8, 0, [(RX_BUF, 64, 0)]); g.rx(1, RX_BUF, 1536)
    out["rx_readable_chain"] = g
    g = Guest(flags=4); g.tx(0, TX_BUF, 60); g.tx(1, TX_BUF + 0x100, 61); out["tx_blocked"] = g
    g = Guest(flags=8); g.tx(0, TX_BUF, 60); out["tx_dropped"] = g
    g = Guest(flags=16); g.tx(0, TX_BUF, 60); out["tx_held_at_reset"] = g
    g = Guest(); g.tx(0, TX_BUF, 60, header=b"\x01" + b"\0" * 11); out["tx_needs_csum"] = g
    g = Guest(); g.tx(0, TX_BUF, 60, header=b"\0\x01" + b"\0" * 10); out["tx_gso"] = g
    g = Guest(); g.tx(0, TX_BUF, 5); out["tx_runt"] = g
    g = Guest(); g.chain(TX_DESC, TX_AVAIL, 8, 0, [(TX_BUF, 8, 0)]); out["tx_short_header"] = g
    g = Guest(); g.chain(TX_DESC, TX_AVAIL, 8, 0, [(TX_BUF, 12, 0), (RX_BUF, 60, WRITE)])
    out["tx_writable"] = g
    g = Guest(flags=1, frames=1, mix=4)
    g.desc(TABLE, 0, TX_BUF, HDR, NEXT, 1)
    g.desc(TABLE, 1, TX_BUF + HDR, 60, 0)
    g.desc(TX_DESC, 0, TABLE, 32, INDIRECT)
    g.publish(TX_AVAIL, 8, 0)
    g.rx(0, RX_BUF, 1536)
    out["indirect"] = g
    g = Guest(flags=3, frames=2, mix=4); g.tx(0, TX_BUF, 60); g.rx(0, RX_BUF, 1536)
    out["event_idx_indirect"] = g
    g = Guest(); g.desc(TX_DESC, 0, TX_BUF, 72, NEXT, 1); g.desc(TX_DESC, 1, TX_BUF, 72, NEXT, 0)
    g.publish(TX_AVAIL, 8, 0); out["tx_loop"] = g
    return out


def main():
    d = os.path.join(sys.argv[1], "virtio_net_fuzz")
    os.makedirs(d, exist_ok=True)
    for name, g in seeds().items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(g.bytes())


if __name__ == "__main__":
    main()
