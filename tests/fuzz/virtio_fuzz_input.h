// The input format shared by the virtio fuzzers: a guest that controls everything a virtio
// driver controls — the queue size, where the three rings are, and every byte of a small guest
// RAM (descriptors, indexes, indirect tables, request headers).
//
//   byte 0     flags: bit 0 INDIRECT_DESC negotiated, bit 1 EVENT_IDX, bit 2 read-only disk
//   byte 1     queue size as written to QueueNum (any value: bad sizes must be refused)
//   bytes 2-7  descriptor table, available ring, used ring addresses (u16 little-endian each;
//              RAM is kRamSize bytes, so larger values put a ring outside it)
//   bytes 8-   guest RAM from address 0 (the rest of RAM is zero)
//
// tests/fuzz/make_virtio_seeds.py writes seeds in this format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace minivmm::fuzz {

struct VirtioFuzzInput {
  static constexpr std::size_t kRamSize = 0x2000;
  static constexpr std::size_t kHeader = 8;

  bool indirect = false;
  bool event_idx = false;
  bool read_only = false;
  std::uint16_t queue_size = 0;
  std::uint64_t desc = 0, avail = 0, used = 0;
  std::vector<std::byte> ram = std::vector<std::byte>(kRamSize);

  // False when the input is too short to describe a queue.
  bool parse(const std::uint8_t* data, std::size_t size) {
    if (size < kHeader) return false;
    indirect = (data[0] & 1) != 0;
    event_idx = (data[0] & 2) != 0;
    read_only = (data[0] & 4) != 0;
    queue_size = data[1];
    desc = static_cast<std::uint64_t>(data[2] | (data[3] << 8));
    avail = static_cast<std::uint64_t>(data[4] | (data[5] << 8));
    used = static_cast<std::uint64_t>(data[6] | (data[7] << 8));
    const std::size_t n = size - kHeader < kRamSize ? size - kHeader : kRamSize;
    std::memcpy(ram.data(), data + kHeader, n);
    return true;
  }
};

}  // namespace minivmm::fuzz
