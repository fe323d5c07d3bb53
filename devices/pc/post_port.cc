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

namespace minivmm::devices {

void PostPort::save_state(StateWriter& out) const {
  write_version(out, 1);
  out.u8(last_code());
  out.u64(writes());
}

void PostPort::load_state(StateReader& in) {
  read_version(in, 1);
  const std::uint8_t code = in.u8();
  const std::uint64_t writes = in.u64();
  in.expect_end();
  if (writes == 0 && code != 0) in.fail("a POST code that was never written");
  last_code_.store(code, std::memory_order_relaxed);
  writes_.store(writes, std::memory_order_relaxed);
}

}  // namespace minivmm::devices
