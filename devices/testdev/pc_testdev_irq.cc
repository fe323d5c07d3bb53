#include "devices/testdev/pc_testdev_irq.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {

PcTestdevIrq::PcTestdevIrq(const std::array<IrqLine*, kLines>& lines) : lines_(lines) {}

void PcTestdevIrq::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::fill(data.begin(), data.end(), std::uint8_t{0xff});
  std::lock_guard lock(mu_);
  ++stats_.bad_accesses;
  log::debug("pc_testdev_irq: read at offset {} ignored", offset);
}

void PcTestdevIrq::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  if (data.size() != 1 || offset >= kLines) {
    ++stats_.bad_accesses;
    log::debug("pc_testdev_irq: {}-byte write at offset {} ignored", data.size(), offset);
    return;
  }
  const bool level = data[0] != 0;
  levels_[offset] = level;
  ++(level ? stats_.raises : stats_.lowers);
  if (lines_[offset] == nullptr) {
    ++stats_.unwired;
    return;
  }
  lines_[offset]->set_level(level);
}

bool PcTestdevIrq::level(std::size_t line) const {
  std::lock_guard lock(mu_);
  return line < kLines && levels_[line];
}

PcTestdevIrqStats PcTestdevIrq::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace minivmm::devices
