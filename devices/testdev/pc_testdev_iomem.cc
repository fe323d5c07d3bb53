#include "devices/testdev/pc_testdev_iomem.h"

namespace minivmm::devices {

void PcTestdevIomem::read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept {
  ++reads_;
  bool outside = false;
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::uint64_t at = offset + i;
    if (at < offset || at >= kSize) {  // wrapped, or past the end
      data[i] = 0xff;
      outside = true;
    } else {
      data[i] = buf_[at];
    }
  }
  if (outside) ++bad_accesses_;
}

void PcTestdevIomem::write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept {
  ++writes_;
  bool outside = false;
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::uint64_t at = offset + i;
    if (at < offset || at >= kSize) {
      outside = true;
    } else {
      buf_[at] = data[i];
    }
  }
  if (outside) ++bad_accesses_;
}

}  // namespace minivmm::devices
