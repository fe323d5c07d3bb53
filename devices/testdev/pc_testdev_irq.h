// QEMU's pc-testdev IRQ ports (hw/misc/pc-testdev.c "pc-testdev-irq-line", ports
// 0x2000-0x2017): a byte write to port 0x2000+n sets ISA interrupt line n (0-23) to the level
// (value != 0). kvm-unit-tests' ioapic and eventinj tests drive the IOAPIC's pins through it
// (lib/x86/apic.c set_irq_line). Not a chip.
//
// Lines are injected: the VMM wires each to the in-kernel IOAPIC/PIC (a null entry is a line
// with nothing behind it: the write is counted and dropped). Only byte writes are decoded (QEMU
// valid.max_access_size = 1); wider writes, reads (QEMU has no read handler) and offsets past
// line 23 (the bus does not map them here, but a wider attach must not index past the array) are
// counted as bad accesses and logged at debug level.
//
// Threads: any vCPU thread. A line's level and the IrqLine call happen under mu_, so two vCPUs
// writing the same line leave the controller at the level of the later write.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "devices/bus/irq_line.h"
#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"

namespace minivmm::devices {

struct PcTestdevIrqStats {
  std::uint64_t raises = 0;
  std::uint64_t lowers = 0;
  std::uint64_t unwired = 0;       // writes to a line with no IrqLine behind it
  std::uint64_t bad_accesses = 0;  // wide writes, reads, lines past 23
};

class PcTestdevIrq final : public PortIoDevice {
 public:
  static constexpr std::size_t kLines = 24;
  static constexpr std::uint16_t kPortCount = kLines;

  explicit PcTestdevIrq(const std::array<IrqLine*, kLines>& lines);

  std::string_view name() const noexcept override { return "pc_testdev_irq"; }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  // The level last written to `line` (false for lines past 23).
  bool level(std::size_t line) const;
  PcTestdevIrqStats stats() const;

  // Part of PcTestdev's snapshot record (pc_testdev_state.cc), its last: load_state() checks
  // the record's end before it raises the lines the guest had raised.
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in);

 private:
  const std::array<IrqLine*, kLines> lines_;
  mutable std::mutex mu_;
  std::array<bool, kLines> levels_{};  // guarded by mu_
  PcTestdevIrqStats stats_;            // guarded by mu_
};

}  // namespace minivmm::devices
