// Where a device's output bytes go (stdout for the console, a vector in tests).
// Threads: called with the owning device's lock held; implementations must not call back.
#pragma once

#include <cstdint>
#include <span>

namespace minivmm::devices {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Writes all of `bytes` (retrying short writes); never throws.
  virtual void write(std::span<const std::uint8_t> bytes) noexcept = 0;
};

}  // namespace minivmm::devices
