// Dispatches MMIO exits to the device mapped at that guest physical address (IoBus with 64-bit
// addresses). Unmapped addresses behave as an undecoded bus: reads return all ones, writes are
// ignored; both counted. Accesses wider than 8 bytes or of width 0 are refused the same way
// (KVM never produces them; a bad caller must not overrun anything).
//
// Threads: attach() during setup, before any vCPU runs; read()/write()/stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "devices/bus/mmio_device.h"
#include "devices/bus/report_writer.h"

namespace minivmm::devices {

struct MmioBusStats {
  std::uint64_t unmapped_reads = 0;
  std::uint64_t unmapped_writes = 0;
  std::uint64_t bad_width = 0;
};

class MmioBus final : public ReportingDevice {
 public:
  // Maps [base, base+length). Throws std::invalid_argument on an overlap, a zero length or a
  // range that wraps past 2^64 (a setup bug, not a guest action).
  void attach(std::uint64_t base, std::uint64_t length, MmioDevice& device);

  // Return false when nothing took the access (data is then all ones on read).
  bool read(std::uint64_t gpa, std::span<std::uint8_t> data) noexcept;
  bool write(std::uint64_t gpa, std::span<const std::uint8_t> data) noexcept;

  MmioBusStats stats() const noexcept;

  // ReportingDevice: the accesses nothing took, under "unmapped_mmio" {reads, writes,
  // bad_width}.
  std::string_view report_key() const noexcept override { return "unmapped_mmio"; }
  void report(ReportWriter& out) const override;

 private:
  struct Range {
    std::uint64_t base;
    std::uint64_t last;  // inclusive, so a range may end at 2^64-1
    MmioDevice* device;
  };
  // The range holding all of [gpa, gpa+width), or nullptr.
  const Range* find(std::uint64_t gpa, std::size_t width) const noexcept;

  std::vector<Range> ranges_;  // sorted by base; immutable once vCPUs run
  std::atomic<std::uint64_t> unmapped_reads_{0};
  std::atomic<std::uint64_t> unmapped_writes_{0};
  std::atomic<std::uint64_t> bad_width_{0};
};

}  // namespace minivmm::devices
