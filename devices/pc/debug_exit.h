// QEMU's "isa-debug-exit" device (hw/misc/debugexit.c): a port a test guest writes to end the
// run with a status. Not a real chip; there is no data sheet. Compatible with guests written for
// `-device isa-debug-exit,iobase=0xf4,iosize=0x04`: a write of value v, at any offset in the range
// and any width, requests exit status (v << 1) | 1, so a guest can never produce status 0 and
// "0" still means the VMM ended normally. Reads return 0, as QEMU's do.
//
// The status is computed from the written value at its width (QEMU passes the zero-extended
// value), then truncated to int: a process exit status keeps only its low 8 bits anyway.
//
// Threads: read()/write() on vCPU threads. No state is shared, so no mutex; `on_exit` runs on the
// writing vCPU thread, with no device lock held, once per write, and must be thread-safe (two
// vCPUs may write at once). It should request an orderly shutdown, not exit().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

class DebugExit final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  // A window of 4 ports (QEMU's iosize, used by most test kernels).
  static constexpr std::uint16_t kPortCount = 4;

  // The status a write of `value` requests.
  static constexpr int exit_status(std::uint32_t value) noexcept {
    return static_cast<int>(static_cast<std::uint32_t>((std::uint64_t{value} << 1) | 1u));
  }

  explicit DebugExit(std::function<void(int exit_status)> on_exit);

  std::string_view name() const noexcept override { return report_key(); }

  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  // Widths 1, 2 and 4 are honoured; any other width is ignored and counted.
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint64_t exit_requests() const noexcept { return exit_requests_.load(); }
  std::uint64_t bad_accesses() const noexcept { return bad_accesses_.load(); }

  // ReportingDevice: exit_requests under "debug_exit" (bad_accesses is not in the report).
  std::string_view report_key() const noexcept override { return "debug_exit"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice: its counters (the exit itself ends the run, so no snapshot holds one
  // half done).
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  const std::function<void(int)> on_exit_;
  std::atomic<std::uint64_t> exit_requests_{0};
  std::atomic<std::uint64_t> bad_accesses_{0};
};

}  // namespace minivmm::devices
