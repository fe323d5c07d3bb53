#include "devices/testdev/pc_testdev_port.h"

#include <algorithm>

namespace minivmm::devices {
namespace {

bool valid_port_width(std::size_t w) { return w == 1 || w == 2 || w == 4; }

}  // namespace

void PcTestdevPort::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  if (!valid_port_width(data.size())) {
    ++bad_accesses_;
    std::fill(data.begin(), data.end(), std::uint8_t{0xff});
    return;
  }
  const std::uint32_t v = data_.load();
  // Bytes past the register's end read 0 (QEMU: the mask has no bits there).
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::size_t byte = (offset & 3u) + i;
    data[i] = byte < 4 ? static_cast<std::uint8_t>(v >> (8 * byte)) : std::uint8_t{0};
  }
}

void PcTestdevPort::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  if (!valid_port_width(data.size())) {
    ++bad_accesses_;
    return;
  }
  std::uint32_t old = data_.load();
  std::uint32_t next;
  do {
    next = old;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::size_t byte = (offset & 3u) + i;
      if (byte >= 4) break;
      next &= ~(0xffu << (8 * byte));
      next |= std::uint32_t{data[i]} << (8 * byte);
    }
  } while (!data_.compare_exchange_weak(old, next));
}

}  // namespace minivmm::devices
