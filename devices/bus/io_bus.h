// Dispatches port I/O to the device mapped at that port, translating the port to an offset.
// Unmapped ports behave as on a PC with nothing decoding them: reads return all ones, writes are
// ignored; both are counted per port and logged at debug level, rate-limited.
//
// Threads: attach() during setup, before any vCPU runs; read()/write() from vCPU threads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

struct UnmappedAccess {
  std::uint16_t port;
  std::uint64_t reads;
  std::uint64_t writes;
};

class IoBus final : public ReportingDevice {
 public:
  // Maps [base, base+length) to `device`. Throws std::invalid_argument on an overlap or a range
  // that wraps past 0xffff (a setup bug, not a guest action).
  void attach(std::uint16_t base, std::uint16_t length, PortIoDevice& device);

  // Returns false when nothing is mapped at `port` (data is then all ones).
  bool read(std::uint16_t port, std::span<std::uint8_t> data) noexcept;
  bool write(std::uint16_t port, std::span<const std::uint8_t> data) noexcept;

  std::vector<UnmappedAccess> unmapped() const;

  // ReportingDevice: the unmapped ports a guest touched, under "unmapped_ports": one object
  // {reads, writes} per port, keyed "0x0061" (fmt's {:#06x}, the report's spelling).
  std::string_view report_key() const noexcept override { return "unmapped_ports"; }
  void report(ReportWriter& out) const override;

 private:
  struct Range {
    std::uint16_t base;
    std::uint32_t end;  // exclusive
    PortIoDevice* device;
  };
  const Range* find(std::uint16_t port) const noexcept;
  void count_unmapped(std::uint16_t port, bool is_write, std::size_t width) noexcept;

  std::vector<Range> ranges_;  // sorted by base; immutable once vCPUs run

  mutable std::mutex mu_;
  std::map<std::uint16_t, UnmappedAccess> unmapped_;  // guarded by mu_
  std::uint64_t logged_ = 0;                          // guarded by mu_
};

}  // namespace minivmm::devices
