#include "devices/testdev/pc_testdev_flush_page.h"

#include <algorithm>

namespace minivmm::devices {

PcTestdevFlushPage::PcTestdevFlushPage(std::function<void(std::uint64_t page_gpa)> flush)
    : flush_(std::move(flush)) {}

void PcTestdevFlushPage::read(std::uint16_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  ++bad_accesses_;
  std::fill(data.begin(), data.end(), std::uint8_t{0xff});
}

void PcTestdevFlushPage::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  if (offset != 0 || data.size() != 4) {
    ++bad_accesses_;
    return;
  }
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) value |= std::uint32_t{data[i]} << (8 * i);
  ++flushes_;
  if (flush_) flush_(value & kPageMask);
}

}  // namespace minivmm::devices
