#include "devices/pc/post_port.h"

#include <algorithm>

namespace minivmm::devices {

void PostPort::read(std::uint16_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  std::fill(data.begin(), data.end(), std::uint8_t{0xff});
}

void PostPort::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  if (offset != 0 || data.empty()) return;  // only port 0x80 itself holds a code
  last_code_.store(data[0], std::memory_order_relaxed);
  writes_.fetch_add(1, std::memory_order_relaxed);
}

void PostPort::report(ReportWriter& out) const { out.count("writes", writes()); }

}  // namespace minivmm::devices
