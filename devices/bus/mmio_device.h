// A device behind guest physical addresses (memory-mapped I/O). Like PortIoDevice, it sees
// offsets from its base and never knows KVM exists.
//
// Threads: read()/write() on vCPU threads, possibly several at once; each device guards its own
// state. They never throw and never fail: an MMIO access always completes, so bad guest input
// gets hardware behaviour plus a counter.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace minivmm::devices {

class MmioDevice {
 public:
  virtual ~MmioDevice() = default;

  virtual std::string_view name() const noexcept = 0;

  // `data.size()` is the access width: 1, 2, 4 or 8. Fill every byte of `data` on read.
  virtual void read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept = 0;
  virtual void write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept = 0;
};

}  // namespace minivmm::devices
