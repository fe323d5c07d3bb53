// A device behind x86 I/O ports. Devices see offsets from their base, never absolute ports, and
// never know KVM exists (Fuchsia IoHandler, crosvm/Firecracker BusDevice).
//
// Threads: read()/write() are called on vCPU threads, possibly several at once; each device
// guards its state with its own mutex (lock order: device mutex -> TimerList mutex). They never
// throw and never fail: the CPU always completes an I/O instruction, so bad guest input gets
// hardware behaviour (ignored writes, all-ones reads) and a counter, never an error.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace minivmm::devices {

class PortIoDevice {
 public:
  virtual ~PortIoDevice() = default;

  virtual std::string_view name() const noexcept = 0;

  // `data.size()` is the access width: 1, 2 or 4. Fill every byte of `data` on read.
  virtual void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept = 0;
  virtual void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept = 0;
};

}  // namespace minivmm::devices
