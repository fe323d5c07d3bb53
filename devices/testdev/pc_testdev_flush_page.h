// QEMU's pc-testdev "flush page" port (hw/misc/pc-testdev.c, port 0xe4): a 32-bit write of a
// guest physical address makes the VMM drop its host mapping of that 4 KiB page and restore it
// (QEMU: mprotect PROT_NONE, then PROT_READ|PROT_WRITE), so KVM's next guest access to the page
// must fault it in again. kvm-unit-tests' eventinj test uses it to make a page-table walk fault
// in the middle of event delivery. Not a chip.
//
// The device only decodes the access; `flush` (the VMM, which owns guest RAM) does the work and
// must ignore addresses outside RAM, as QEMU's cpu_physical_memory_map does. Only 32-bit writes
// at offset 0 are decoded, as in QEMU; anything else, and every read (QEMU has no read handler;
// the bus reads all ones), is counted.
//
// Threads: any vCPU thread, no lock; `flush` runs on the writing vCPU thread and must be
// thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"

namespace minivmm::devices {

class PcTestdevFlushPage final : public PortIoDevice {
 public:
  static constexpr std::uint16_t kPortCount = 4;
  static constexpr std::uint64_t kPageMask = ~std::uint64_t{0xfff};

  // `flush(page_gpa)`: page_gpa is 4 KiB aligned.
  explicit PcTestdevFlushPage(std::function<void(std::uint64_t page_gpa)> flush);

  std::string_view name() const noexcept override { return "pc_testdev_flush_page"; }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint64_t flushes() const noexcept { return flushes_.load(); }
  std::uint64_t bad_accesses() const noexcept { return bad_accesses_.load(); }

  // Part of PcTestdev's snapshot record (pc_testdev_state.cc).
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in);

 private:
  const std::function<void(std::uint64_t)> flush_;
  std::atomic<std::uint64_t> flushes_{0};
  std::atomic<std::uint64_t> bad_accesses_{0};
};

}  // namespace minivmm::devices
