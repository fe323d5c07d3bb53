#include "devices/pc/debug_exit.h"

#include <algorithm>

#include "devices/log/log.h"

namespace minivmm::devices {

DebugExit::DebugExit(std::function<void(int exit_status)> on_exit) : on_exit_(std::move(on_exit)) {}

void DebugExit::read(std::uint16_t /*offset*/, std::span<std::uint8_t> data) noexcept {
  std::fill(data.begin(), data.end(), std::uint8_t{0});
}

void DebugExit::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  if (data.empty() || data.size() > sizeof(std::uint32_t)) {
    ++bad_accesses_;
    return;
  }
  std::uint32_t value = 0;  // x86 I/O is little-endian
  for (std::size_t i = 0; i < data.size(); ++i) value |= std::uint32_t{data[i]} << (8 * i);
  const int status = exit_status(value);
  ++exit_requests_;
  log::info("guest: debug_exit write 0x{:x} (width {}, offset {}): exit status {}", value,
            data.size(), offset, status);
  if (on_exit_) on_exit_(status);
}

void DebugExit::report(ReportWriter& out) const { out.count("exit_requests", exit_requests()); }

}  // namespace minivmm::devices

namespace minivmm::devices {

void DebugExit::save_state(StateWriter& out) const {
  write_version(out, 1);
  out.u64(exit_requests_.load());
  out.u64(bad_accesses_.load());
}

void DebugExit::load_state(StateReader& in) {
  read_version(in, 1);
  const std::uint64_t exits = in.u64();
  const std::uint64_t bad = in.u64();
  in.expect_end();
  exit_requests_.store(exits);
  bad_accesses_.store(bad);
}

}  // namespace minivmm::devices
