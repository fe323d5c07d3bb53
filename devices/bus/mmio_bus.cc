#include "devices/bus/mmio_bus.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "devices/log/log.h"

namespace minivmm::devices {
namespace {

bool valid_mmio_width(std::size_t width) noexcept {
  return width == 1 || width == 2 || width == 4 || width == 8;
}

}  // namespace

void MmioBus::attach(std::uint64_t base, std::uint64_t length, MmioDevice& device) {
  if (length == 0 || length - 1 > UINT64_MAX - base) {
    throw std::invalid_argument("MmioBus::attach: bad range for " + std::string(device.name()));
  }
  const std::uint64_t last = base + (length - 1);
  for (const Range& r : ranges_) {
    if (base <= r.last && r.base <= last) {
      throw std::invalid_argument("MmioBus::attach: " + std::string(device.name()) +
                                  " overlaps " + std::string(r.device->name()));
    }
  }
  ranges_.push_back(Range{base, last, &device});
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.base < b.base; });
}

const MmioBus::Range* MmioBus::find(std::uint64_t gpa, std::size_t width) const noexcept {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), gpa,
                             [](std::uint64_t a, const Range& r) { return a < r.base; });
  if (it == ranges_.begin()) return nullptr;
  --it;
  // The whole access must be inside: one straddling two devices goes to neither.
  if (gpa > it->last || width - 1 > it->last - gpa) return nullptr;
  return &*it;
}

bool MmioBus::read(std::uint64_t gpa, std::span<std::uint8_t> data) noexcept {
  if (!valid_mmio_width(data.size())) {
    bad_width_.fetch_add(1, std::memory_order_relaxed);
    std::memset(data.data(), 0xff, data.size());
    return false;
  }
  if (const Range* r = find(gpa, data.size())) {
    r->device->read(gpa - r->base, data);
    return true;
  }
  std::memset(data.data(), 0xff, data.size());
  if (unmapped_reads_.fetch_add(1, std::memory_order_relaxed) < 16) {
    log::debug("guest: unmapped MMIO read 0x{:x} width {}", gpa, data.size());
  }
  return false;
}

bool MmioBus::write(std::uint64_t gpa, std::span<const std::uint8_t> data) noexcept {
  if (!valid_mmio_width(data.size())) {
    bad_width_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (const Range* r = find(gpa, data.size())) {
    r->device->write(gpa - r->base, data);
    return true;
  }
  if (unmapped_writes_.fetch_add(1, std::memory_order_relaxed) < 16) {
    log::debug("guest: unmapped MMIO write 0x{:x} width {}", gpa, data.size());
  }
  return false;
}

MmioBusStats MmioBus::stats() const noexcept {
  return MmioBusStats{unmapped_reads_.load(std::memory_order_relaxed),
                      unmapped_writes_.load(std::memory_order_relaxed),
                      bad_width_.load(std::memory_order_relaxed)};
}

void MmioBus::report(ReportWriter& out) const {
  const MmioBusStats s = stats();
  out.count("reads", s.unmapped_reads);
  out.count("writes", s.unmapped_writes);
  out.count("bad_width", s.bad_width);
}

}  // namespace minivmm::devices
