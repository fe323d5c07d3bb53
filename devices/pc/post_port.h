// Port 0x80, the POST code port: firmware writes progress codes there for a diagnostic card to
// display, and Linux writes it as a ~1 us I/O delay (io_delay, `outb %al, $0x80`) on every
// slow port access. Not a chip; on the PC/AT it is an unused DMA page register that no card
// answers on reads.
//
// Writes are remembered (last_code(), for logs and tests) and counted with relaxed atomics and
// no lock, since a Linux guest issues them by the thousand. Reads return 0xff, as QEMU's ioport80
// does (hw/i386/pc.c) and as a bus with a write-only POST latch does; Firecracker maps nothing
// there. Wider accesses use their first byte; the other bytes belong to ports 0x81-0x83 (DMA
// page registers, not emulated) and read 0xff.
//
// Threads: read()/write() on any vCPU thread, lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

class PostPort final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  std::string_view name() const noexcept override { return report_key(); }

  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint8_t last_code() const noexcept { return last_code_.load(std::memory_order_relaxed); }
  std::uint64_t writes() const noexcept { return writes_.load(std::memory_order_relaxed); }

  // ReportingDevice: writes under "post_port" (the last code is for logs, not the report).
  std::string_view report_key() const noexcept override { return "post_port"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice: the last POST code (a guest that reads port 0x80 back sees it) and the
  // write count.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  std::atomic<std::uint8_t> last_code_{0};
  std::atomic<std::uint64_t> writes_{0};
};

}  // namespace minivmm::devices
