// QEMU's ISA pvpanic device (hw/misc/pvpanic-isa.c, docs/specs/pvpanic.rst): one I/O port
// (0x505 on QEMU's PC and on minivmm's board) through which a guest kernel says it panicked.
// Linux finds it through ACPI (_HID QEMU0001, drivers/misc/pvpanic/) and writes on panic, so a
// CI run of a crashing kernel ends at once with a verdict of its own instead of a timeout.
//
// Reading gives the events the device supports (bit 0 panicked, bit 1 crash kernel loaded, as
// QEMU 7.2 offers). Writing reports them: "panicked" ends the run (on_panic), "crash loaded"
// (a kdump kernel is about to take over) is counted and the guest goes on, and bits the
// device does not offer are counted and ignored, as QEMU does. Accesses wider than a byte use
// their first byte, as the ISA bus splits them; the other bytes read 0xff.
//
// Threads: read()/write() on vCPU threads; on_panic runs on the writing vCPU thread; the
// counters are relaxed atomics, read from any thread.
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

class PvPanic final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  static constexpr std::uint8_t kPanicked = 1u << 0;
  static constexpr std::uint8_t kCrashLoaded = 1u << 1;
  static constexpr std::uint8_t kSupported = kPanicked | kCrashLoaded;

  explicit PvPanic(std::function<void()> on_panic) : on_panic_(std::move(on_panic)) {}

  std::string_view name() const noexcept override { return report_key(); }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint64_t panics() const noexcept { return panics_.load(std::memory_order_relaxed); }

  // ReportingDevice: under "pvpanic".
  std::string_view report_key() const noexcept override { return "pvpanic"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice: its counters; the device has no register state (reads return the
  // supported events).
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  const std::function<void()> on_panic_;
  std::atomic<std::uint64_t> panics_{0};
  std::atomic<std::uint64_t> crash_loaded_{0};
  std::atomic<std::uint64_t> unknown_events_{0};  // writes with bits the device does not offer
  std::atomic<std::uint64_t> bad_accesses_{0};    // offsets past the one port
};

}  // namespace minivmm::devices
