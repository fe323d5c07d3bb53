#include "devices/pc/pvpanic.h"

#include <algorithm>

namespace minivmm::devices {

void PvPanic::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::fill(data.begin(), data.end(), std::uint8_t{0xff});
  if (offset != 0 || data.empty()) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  data[0] = kSupported;
}

void PvPanic::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  if (offset != 0 || data.empty()) {
    bad_accesses_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint8_t events = data[0];
  if ((events & ~kSupported) != 0) unknown_events_.fetch_add(1, std::memory_order_relaxed);
  // QEMU's order: a panic wins over a crash kernel in the same write.
  if ((events & kPanicked) != 0) {
    panics_.fetch_add(1, std::memory_order_relaxed);
    if (on_panic_) on_panic_();
    return;
  }
  if ((events & kCrashLoaded) != 0) crash_loaded_.fetch_add(1, std::memory_order_relaxed);
}

void PvPanic::report(ReportWriter& out) const {
  out.count("panics", panics());
  out.count("crash_loaded", crash_loaded_.load(std::memory_order_relaxed));
  out.count("unknown_events", unknown_events_.load(std::memory_order_relaxed));
  out.count("bad_accesses", bad_accesses_.load(std::memory_order_relaxed));
}

}  // namespace minivmm::devices
