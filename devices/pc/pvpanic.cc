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

namespace minivmm::devices {

void PvPanic::save_state(StateWriter& out) const {
  write_version(out, 1);
  out.u64(panics_.load(std::memory_order_relaxed));
  out.u64(crash_loaded_.load(std::memory_order_relaxed));
  out.u64(unknown_events_.load(std::memory_order_relaxed));
  out.u64(bad_accesses_.load(std::memory_order_relaxed));
}

void PvPanic::load_state(StateReader& in) {
  read_version(in, 1);
  const std::uint64_t panics = in.u64();
  const std::uint64_t crash_loaded = in.u64();
  const std::uint64_t unknown = in.u64();
  const std::uint64_t bad = in.u64();
  in.expect_end();
  panics_.store(panics, std::memory_order_relaxed);
  crash_loaded_.store(crash_loaded, std::memory_order_relaxed);
  unknown_events_.store(unknown, std::memory_order_relaxed);
  bad_accesses_.store(bad, std::memory_order_relaxed);
}

}  // namespace minivmm::devices
